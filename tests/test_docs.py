"""The documentation keeps up with the code: every public name and every hook is
documented (no Sphinx needed; the HTML build is `sphinx-build -W -b html docs docs/_build`)."""

import inspect
import pathlib
import re

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
