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
release = "0.4.0"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
autodoc_member_order = "bysource"
# Signatures stay as written; annotations refer to TensorFlow types that need not resolve.
autodoc_typehints = "none"
napoleon_google_docstring = False
default_role = "code"
exclude_patterns = ["_build", "requirements.txt"]
html_theme = "alabaster"
html_static_path = []
