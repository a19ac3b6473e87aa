"""Sphinx configuration for pfor's documentation.

Build from the project root (pfor and its packs installed, e.g. in .venv)::

    .venv/bin/pip install -r docs/requirements.txt
    .venv/bin/sphinx-build -W -b html docs docs/_build
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# autodoc imports pfor_core; from a source checkout it is found at the project root.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

project = "pfor"
author = "the pfor developers"
copyright = "the pfor developers"  # pylint: disable=redefined-builtin
release = "0.7.6"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
autodoc_member_order = "bysource"
# Signatures stay as written; annotations refer to TensorFlow types that need not resolve.
autodoc_typehints = "none"
napoleon_google_docstring = False
default_role = "code"
exclude_patterns = ["_build", "requirements.txt"]
html_theme = "alabaster"
html_static_path = []


def _write_op_table():
    """docs/_generated/op_table.rst, the table ops.rst includes: per op type, the input
    patterns a converter vectorizes and those that take the fallback loop, read off
    ``pfor ops --patterns --json`` (never written by hand)."""
    import collections  # pylint: disable=import-outside-toplevel
    import json  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel

    run = subprocess.run([sys.executable, "-m", "pfor_core.cli", "ops", "--patterns", "--json"],
                         capture_output=True, text=True, check=True,
                         cwd=os.path.join(os.path.dirname(__file__), ".."))
    by_op = collections.defaultdict(lambda: ([], []))
    for row in json.loads(run.stdout):
        converted, fallback = by_op[row["op_type"]]
        if row["converter"] == "fallback":
            fallback.append(row["inputs"])
        else:
            converted.append(f"{row['inputs']} ({row['pack'].replace('pfor-', '')})")
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 20 50 30", "",
             "   * - op type", "     - vectorized for inputs (pack)", "     - fallback loop for"]
    for op_type in sorted(by_op):
        converted, fallback = by_op[op_type]
        lines += [f"   * - ``{op_type}``",
                  "     - " + (", ".join(f"``{c}``" for c in converted) or "-"),
                  "     - " + (", ".join(f"``{f}``" for f in fallback) or "-")]
    folder = os.path.join(os.path.dirname(__file__), "_generated")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "op_table.rst"), "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")


_write_op_table()
