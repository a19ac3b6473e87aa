"""The dependency rules of the converter ecosystem hold (pyproject.toml's import-linter
contracts: packs import from the core only pfor_core, pfor_core.extend and
pfor_core.testing, and never each other; the core imports no pack), and the core does
not even name a pack: it knows packs only through entry points and their hooks."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = [ROOT, ROOT / "pfor_converters_math" / "src", ROOT / "pfor_converters_nn" / "src",
           ROOT / "pfor_converters_state" / "src", ROOT / "pfor_controlflow" / "src",
           ROOT / "examples" / "pfor_converters_example" / "src"]
PACK_MODULES = ("pfor_converters_math", "pfor_converters_nn", "pfor_converters_state",
                "pfor_controlflow", "pfor_converters_example")


def _lint_imports() -> str:
    here = pathlib.Path(sys.executable).parent / "lint-imports"
    found = str(here) if here.exists() else shutil.which("lint-imports")
    assert found, "lint-imports not found: pip install -r requirements/setup.txt"
    return found


def test_import_linter_contracts_are_kept():
    # This checkout's sources first on the path, so the contracts judge this code.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(s) for s in SOURCES))
    run = subprocess.run([_lint_imports(), "--no-cache"], capture_output=True, text=True,
                         cwd=ROOT, env=env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    assert "5 kept, 0 broken" in out, out[-4000:]



def test_the_core_names_no_pack():
    pattern = re.compile("|".join(PACK_MODULES + tuple(m.replace("_", "-") for m in PACK_MODULES)))
    named = [f"{path.relative_to(ROOT)}:{k}" for path in sorted((ROOT / "pfor_core").rglob("*.py"))
             for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line)]
    assert not named, f"the core names a pack here (declare it through a hook instead): {named}"
