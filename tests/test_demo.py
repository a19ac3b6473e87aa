"""The demo (the README's main command) runs, and every pfor result in it matches its loop.

Runs ``examples/demo.py --quick`` (tiny sizes, negligible timing budget) in a subprocess,
so the demo's global settings (Keras seed, TF log level) stay out of the test process.
"""

import os
import pathlib
import subprocess
import sys

DEMO = pathlib.Path(__file__).resolve().parent.parent / "examples" / "demo.py"


def test_demo_quick_runs_and_every_check_passes():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, str(DEMO), "--quick"], capture_output=True,
                            text=True, timeout=600, env=env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    bodies = [line for line in out.splitlines() if "pf.pfor vs loop:" in line]
    applications = [line for line in out.splitlines() if "rel. diff" in line]
    assert len(bodies) >= 5 and len(applications) == 3, out
    for line in bodies + applications:
        assert " OK (" in line, line
    assert "done in" in out
