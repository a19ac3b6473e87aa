"""The fuzz tests import their grammar modules (``fuzz_*.py``) from this folder."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
