"""The benchmark driver keeps working: its smallest sizes run once, pfor's results match.

Runs ``benchmarks/run.py --smoke`` (the quick run's smallest size of every workload, one
timed call each) in a subprocess, so the benchmarks' global settings stay out of the
test process. No timing is asserted: only that every table, JSON record and plot is
written and that pfor (run with ``fallback="error"``) neither fails nor disagrees with
the reference implementation on any workload.
"""

import json
import os
import pathlib
import subprocess
import sys

RUN = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"


def test_quick_benchmark_smallest_sizes_run_and_pfor_matches(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, str(RUN), "--smoke", "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=600, env=env,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads((tmp_path / "results.json").read_text())
    cells = data["cells"]
    workloads = {c["workload"] for c in cells}
    assert workloads == {"linear", "mnist", "dynamic_lstm", "mnist_grads", "lstm_grads",
                         "vgg_jacobian", "lstm_jacobian"}
    for cell in cells:
        if cell["impl"].startswith(("pfor", "hand-batched")):
            assert cell["status"] == "ok", cell
            assert cell["throughput"] > 0 and cell["first_s"] > 0, cell
    markdown = (tmp_path / "results.md").read_text()
    for title in ("Linear projection", "Dynamic LSTM", "Per-example gradients, LSTM",
                  "Jacobian, VGG", "Conversion cost"):
        assert title in markdown
    for figure in ("inference", "gradients", "jacobians"):
        assert (tmp_path / f"{figure}.png").stat().st_size > 1000
