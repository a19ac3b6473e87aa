"""Print the rst tables of docs/design.rst's "Where the code lives": every module of the
core and of each pack with the first sentence of its docstring (run after moving code,
paste the output; tests/test_docs.py checks that every module is listed)."""

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = {"pfor_core": ROOT / "pfor_core",
            "pfor_converters_math": ROOT / "pfor_converters_math/src/pfor_converters_math",
            "pfor_converters_nn": ROOT / "pfor_converters_nn/src/pfor_converters_nn",
            "pfor_converters_state": ROOT / "pfor_converters_state/src/pfor_converters_state",
            "pfor_controlflow": ROOT / "pfor_controlflow/src/pfor_controlflow"}


def modules(package: str) -> list[tuple[str, str]]:
    """(dotted name below the package, first sentence of its docstring) per module."""
    base = PACKAGES[package]
    out = []
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base).with_suffix("")
        if rel.name == "__init__" and rel.parent == pathlib.Path("."):
            continue
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        first = " ".join(doc.split("\n\n")[0].split())
        sentence = re.split(r"(?<=[a-z)`\]])\. (?=[A-Z`])", first)[0].rstrip(".") + "."
        out.append((name + ("/" if rel.name == "__init__" else ""), sentence))
    return out


def table(package: str) -> str:
    rows = "".join(f"   * - ``{n}``\n     - {d}\n" for n, d in modules(package))
    return (f".. list-table:: ``{package}``\n   :header-rows: 1\n   :widths: 1 3\n\n"
            f"   * - module\n     - what it holds\n{rows}")


if __name__ == "__main__":
    for package in PACKAGES:
        print(table(package))
