"""The documentation keeps up with the code: every public name and every hook is
documented (no Sphinx needed; the HTML build is `sphinx-build -W -b html docs docs/_build`)."""

import importlib.util
import inspect
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

import pfor_core
from pfor_core import hookspecs

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def _documented(text: str) -> set[str]:
    """Names documented by an autodoc or py: directive, e.g. ``.. autofunction:: pfor``."""
    pattern = re.compile(r"^\.\. (?:auto\w+|py:\w+):: (?:pfor_core\.)?([\w.]+)", re.MULTILINE)
    names = set(pattern.findall(text))
    return names | {n.split(".")[0] for n in names}  # data.map_batched documents pf.data


def test_every_public_name_is_in_the_api_page():
    documented = _documented((DOCS / "api.rst").read_text(encoding="utf-8"))
    missing = sorted(set(pfor_core.__all__) - documented)
    assert pfor_core.__all__, "pfor_core.__all__ is empty"
    assert not missing, f"not documented in docs/api.rst: {missing}"


def test_every_converter_api_name_is_documented_in_the_extending_page():
    from pfor_core import extend  # pylint: disable=import-outside-toplevel

    text = (DOCS / "extending.rst").read_text(encoding="utf-8")
    directive = re.compile(r"^\.\. (?:auto\w+|py:\w+):: (?:pfor_core\.extend\.)?(\w+)\s*$",
                           re.MULTILINE)
    documented = set(directive.findall(text.split(".. currentmodule:: pfor_core.extend", 1)[-1]))
    assert extend.__all__, "pfor_core.extend.__all__ is empty"
    missing = sorted(set(extend.__all__) - documented)
    assert not missing, f"pfor_core.extend names not documented in docs/extending.rst: {missing}"
    undocumented = sorted(n for n in extend.__all__ if not inspect.getdoc(getattr(extend, n)))
    assert not undocumented, f"pfor_core.extend names without a docstring: {undocumented}"


def test_every_testing_kit_name_is_documented_in_the_extending_page():
    from pfor_core import testing  # pylint: disable=import-outside-toplevel

    text = (DOCS / "extending.rst").read_text(encoding="utf-8")
    directive = re.compile(r"^\.\. (?:auto\w+|py:\w+):: (?:pfor_core\.testing\.)?(\w+)\s*$",
                           re.MULTILINE)
    documented = set(directive.findall(text.split(".. currentmodule:: pfor_core.testing", 1)[-1]))
    missing = sorted(set(testing.__all__) - documented)
    assert not missing, f"pfor_core.testing names not documented in docs/extending.rst: {missing}"
    undocumented = sorted(n for n in testing.__all__ if callable(getattr(testing, n))
                          and not inspect.getdoc(getattr(testing, n)))
    assert not undocumented, f"pfor_core.testing names without a docstring: {undocumented}"


def test_every_hook_is_documented():
    hooks = {name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
             if name.startswith("pfor_")}
    assert hooks, "pfor_core.hookspecs defines no hooks"
    text = (DOCS / "extending.rst").read_text(encoding="utf-8")
    missing = sorted(h for h in hooks if h not in text)
    assert not missing, f"hooks not documented in docs/extending.rst: {missing}"
    undocumented = sorted(h for h in hooks if not inspect.getdoc(getattr(hookspecs, h)))
    assert not undocumented, f"hookspecs without a docstring: {undocumented}"


def test_docs_toctree_lists_every_page():
    index = (DOCS / "index.rst").read_text(encoding="utf-8")
    pages = sorted(p.stem for p in DOCS.glob("*.rst") if p.stem != "index")
    assert pages
    missing = [p for p in pages if not re.search(rf"^\s+{p}\s*$", index, re.MULTILINE)]
    assert not missing, f"pages missing from the toctree in docs/index.rst: {missing}"


# Every ``.. code-block:: python`` of docs/*.rst runs: the blocks of one page in order,
# in one fresh namespace per page. A block whose first line is ``# doc: no-run`` is
# skipped (a file of a hypothetical pack, say). All pages run in one subprocess, so what
# the examples register in-process (pf.register_converter) stays out of this process.
RUN_PAGES = textwrap.dedent("""
    import runpy, sys, traceback
    failed = []
    for path in sys.argv[1:]:
        try:
            runpy.run_path(path, run_name="__docs__")
        except Exception:
            failed.append(path)
            traceback.print_exc()
    print("FAILED:", failed)
    sys.exit(1 if failed else 0)
""")


def python_blocks(text: str) -> list[str]:
    """The python code blocks of an .rst page, dedented, in order."""
    blocks = []
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if line.strip() != ".. code-block:: python":
            continue
        body = []
        for follow in lines[k + 1:]:
            if follow.strip() and not follow.startswith((" ", "\t")):
                break
            body.append(follow)
        while body and body[0].strip().startswith(":"):  # the directive's options
            body.pop(0)
        code = textwrap.dedent("\n".join(body))
        if not code.lstrip().startswith("# doc: no-run"):
            blocks.append(code)
    return blocks


def test_python_blocks_are_found():
    blocks = python_blocks((DOCS / "quickstart.rst").read_text(encoding="utf-8"))
    assert blocks and all(b.strip() for b in blocks)


def test_every_python_example_in_the_docs_runs(tmp_path):
    # One real .py file per page: autograph reads the source of the functions it converts.
    pages = []
    for path in sorted(DOCS.glob("*.rst")):
        blocks = python_blocks(path.read_text(encoding="utf-8"))
        if blocks:
            script = tmp_path / f"{path.stem}.py"
            script.write_text("\n\n".join(blocks), encoding="utf-8")
            pages.append(str(script))
    assert pages, "no python code blocks in docs/"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run([sys.executable, "-c", RUN_PAGES, *pages], capture_output=True,
                         text=True, env=env, cwd=DOCS.parent)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]


def test_html_build_has_no_warnings(tmp_path):
    # A full build takes a few seconds; -W turns every warning into a failure.
    pytest.importorskip("sphinx")
    run = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "-b", "html",
                          "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")],
                         capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert (tmp_path / "html" / "index.html").exists()


def test_design_lists_every_module_with_its_docstring():
    """docs/design.rst's "Where the code lives" has the tables dev/module_table.py prints
    (paste its output again after moving code)."""
    root = DOCS.parent
    spec = importlib.util.spec_from_file_location("module_table", root / "dev" / "module_table.py")
    module_table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module_table)
    text = (DOCS / "design.rst").read_text(encoding="utf-8")
    stale = [package for package in module_table.PACKAGES
             if module_table.table(package) not in text]
    assert not stale, (f"docs/design.rst's module tables of {stale} are out of date: paste "
                       "the output of `python dev/module_table.py`")
