"""The benchmark driver keeps working: its smallest sizes run once, pfor's results match.

Runs ``benchmarks/run.py --smoke`` (the quick run's smallest size of every workload, one
timed call each) in a subprocess, so the benchmarks' global settings stay out of the
test process. No timing is asserted: only that every table, JSON record and plot is
written and that pfor (run with ``fallback="error"``) neither fails nor disagrees with
the reference implementation on any workload; and, where JAX is installed, that its
optional column runs and agrees too.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

RUN = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"


def _smoke(out, *options):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, str(RUN), "--smoke", "--out", str(out), *options]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((out / "results.json").read_text())


def test_quick_benchmark_smallest_sizes_run_and_pfor_matches(tmp_path):
    cells = _smoke(tmp_path)["cells"]
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


def test_jax_column_runs_and_matches_the_reference(tmp_path):
    pytest.importorskip("jax")
    # A conv net's per-example gradients, a per-example while loop, a jacobian.
    chosen = {"mnist_grads", "dynamic_lstm", "lstm_jacobian"}
    data = _smoke(tmp_path, "--no-plots", "--only", *sorted(chosen))
    cells = [c for c in data["cells"] if c["impl"] == "jax.vmap (jit)"]
    assert {c["workload"] for c in cells} == chosen
    for cell in cells:
        assert cell["status"] == "ok" and cell["max_rel_diff"] is not None, cell
        assert cell["throughput"] > 0 and cell["first_s"] > 0, cell
        assert "peak_bytes" not in cell, cell  # TensorFlow's allocator does not see JAX
    assert data["meta"]["jax"].startswith("jax ")
    assert "pfor / JAX" in (tmp_path / "results.md").read_text()


def test_lstm_per_example_benchmark_runs_and_checks_every_column():
    """Every form and column, each checked against the hand-written per-example
    gradients inside the script (it raises on a mismatch)."""
    script = RUN.parent / "lstm_per_example.py"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, str(script), "--batch", "4", "--steps", "3",
                             "--budget", "0.01"], capture_output=True, text=True,
                            timeout=600, env=env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line.split() for line in result.stdout.splitlines()]
    pfor_rows = [r for r in rows if len(r) > 2 and r[-5] == "pfor"]
    assert len(pfor_rows) == 4, result.stdout  # one per form


@pytest.mark.parametrize("task", [[], ["--grads"]], ids=["forward", "grads"])
def test_tree_lstm_benchmark_runs_and_checks_every_column(task):
    """Every column of the TreeLSTM benchmark, each checked inside the script against
    the by-depth form (or the loop of tapes); it raises on a mismatch."""
    script = RUN.parent / "tree_lstm.py"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, str(script), "--batch", "3", "--budget", "0.01",
                             *task], capture_output=True, text=True, timeout=600, env=env,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line.split() for line in result.stdout.splitlines()]
    names = {r[1] for r in rows if r and r[0] == "3"}
    want = {"loop", "dag_map"} if task else {"by-depth", "dag_map", "node", "map_fn"}
    assert want <= names, result.stdout


def test_graph_classification_benchmark_runs_and_checks_every_column():
    """pfor and map_fn against the disjoint union, checked inside the script."""
    script = RUN.parent / "graph_classify.py"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, str(script), "--batch", "3", "--budget", "0.01"],
                            capture_output=True, text=True, timeout=600, env=env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    names = {r[1] for r in (line.split() for line in result.stdout.splitlines())
             if r and r[0] == "3"}
    assert {"disjoint", "pfor", "map_fn"} <= names, result.stdout


def test_real_models_benchmark_runs_and_pfor_matches(tmp_path):
    """benchmarks/real_models.py on its smallest model (a GRU classifier), batch 2: every
    task runs in every implementation, pfor's results match the loop's."""
    script = RUN.parent / "real_models.py"
    out = tmp_path / "rows.json"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, str(script), "--models", "gru", "--batch", "2",
                             "--budget", "0.01", "--out", str(out)], capture_output=True,
                            text=True, timeout=600, env=env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert {r["task"] for r in rows} == {"batching", "grads", "jacobian"}
    for row in rows:
        assert not row["failed"], row
        assert set(row["times"]) >= {"pfor", "tf.vectorized_map", "loop"}, row
        assert row["diff"] < 1e-4, row
        assert row["ops"]["pfor"] > 0, row
