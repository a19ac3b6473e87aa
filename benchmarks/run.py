"""All the paper's workloads, every implementation side by side: tables, JSON and plots.

    .venv/bin/python benchmarks/run.py --quick --out benchmarks/results/quick   # < 5 min
    .venv/bin/python benchmarks/run.py --full  --out benchmarks/results/full
    (or ``make bench-quick`` / ``make bench``)

For every workload (see workloads.py), size and implementation, in one process: the
function is wrapped in ``tf.function`` and its first call timed (trace + conversion +
one run); its output is compared with the reference implementation's (allclose,
relative to the reference's largest magnitude) before anything is timed; then, after one
more warm-up call, calls are timed one by one for a time budget and the median is the
steady-state time. Peak memory is what TensorFlow's CPU allocator reports
(``tf.config.experimental.get_memory_info('CPU:0')``, reset before one extra call):
bytes of tensors the call allocates at its peak above what was live before it, which
misses allocations made outside TensorFlow's allocator (oneDNN scratch space) and small
ones (its statistics skip them: a 96 KiB matmul output registers as 0), so figures under
1 MiB read "<1 MiB". Every mode measures memory in-process; no subprocess is needed.
Graph ops are counted in the traced function and every function in its library
(while-loop bodies included), and divided by the ops of one iteration's body.

When JAX is installed, every workload also gets a ``jax.vmap (jit)`` cell
(jax_workloads.py) with the same weights and inputs: timed and checked the same way,
but called as given (it is jitted JAX, not a ``tf.function``), with no graph ops or
peak memory (TensorFlow's allocator does not see JAX's buffers).

Writes ``results.md`` (Markdown tables), ``results.json`` (every cell) and one PNG per
figure (throughput against size, one line per implementation, log-log) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import report  # noqa: E402  pylint: disable=import-error
import workloads  # noqa: E402  pylint: disable=import-error


class _FallbackLog(logging.Handler):
    """Collects TensorFlow's pfor messages that an op fell back to a while loop."""

    def __init__(self):
        super().__init__()
        self.ops = set()

    def emit(self, record):
        message = record.getMessage()
        if "while_loop for converting" in message:
            self.ops.add(message.split("converting", 1)[1].split()[0])
        elif "uses a while_loop" in message:
            self.ops.add(message.split()[0])


def count_ops(concrete) -> int:
    """Ops of a concrete function's graph plus those of every function it calls."""
    graph_def = concrete.graph.as_graph_def()
    return len(graph_def.node) + sum(len(f.node_def) for f in graph_def.library.function)


def body_ops(body) -> int:
    return count_ops(tf.function(body, autograph=False).get_concrete_function(
        tf.TensorSpec([], tf.int32)))


def _peak_bytes(fn):
    try:
        tf.config.experimental.reset_memory_stats("CPU:0")
        before = tf.config.experimental.get_memory_info("CPU:0")["current"]
        _sync(fn())
        return tf.config.experimental.get_memory_info("CPU:0")["peak"] - before
    except (ValueError, RuntimeError):
        return None


def _sync(out):
    return [np.asarray(t) for t in tf.nest.flatten(out)]


def measure(name, python_fn, budget, min_reps, max_reps, raw=False):
    """First-call and steady-state seconds, peak bytes, ops and output of one cell. A
    ``raw`` function (JAX's) is called as given: TensorFlow's graph and allocator do not
    see it, so it has no op count or peak bytes."""
    fn = python_fn if raw else tf.function(python_fn, autograph=False,
                                           jit_compile=name.endswith("(XLA)"))
    log = _FallbackLog()
    tf.get_logger().addHandler(log)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            output = _sync(fn())
            first = time.perf_counter() - start
    finally:
        tf.get_logger().removeHandler(log)
    stats = {"first_s": first, "fallback_ops": sorted(log.ops)}
    if not raw:
        stats["graph_ops"] = count_ops(fn.get_concrete_function())
    _sync(fn())
    times = _time_calls(fn, budget, min_reps, max_reps)
    stats.update(steady_s=statistics.median(times), reps=len(times))
    if not raw:
        stats["peak_bytes"] = _peak_bytes(fn)
    return stats, output


def _time_calls(fn, budget, min_reps, max_reps):
    times, spent = [], 0.0
    while len(times) < min_reps or (spent < budget and len(times) < max_reps):
        start = time.perf_counter()
        _sync(fn())
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return times


def check(outputs, reference, summed=False):
    """Largest difference relative to the reference's largest magnitude (None: shapes
    differ), over all output tensors."""
    if summed:
        reference = [r.sum(axis=0) for r in reference]
    if len(outputs) != len(reference):
        return None
    worst = 0.0
    for got, want in zip(outputs, reference):
        if got.shape != want.shape:
            return None
        scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-6)
        diff = float(np.max(np.abs(got - want))) if want.size else 0.0
        worst = max(worst, diff / scale)
    return worst


def run_cell(workload, size, args):
    cell = workload.build(size)
    records, outputs = [], {}
    for name, python_fn in cell.fns.items():
        record = {"workload": workload.key, "size": size, "impl": name,
                  "work": float(cell.work), "unit": workload.unit, "status": "ok"}
        try:
            stats, outputs[name] = measure(name, python_fn, args.budget, args.min_reps,
                                           args.max_reps, raw=name in cell.raw)
            record.update(stats)
            record["throughput"] = cell.work / stats["steady_s"]
        except Exception as err:  # pylint: disable=broad-except  (recorded, not hidden)
            first_line = (str(err).strip().splitlines() or [""])[0][:160]
            record["status"] = f"fails: {type(err).__name__}: {first_line}"
        records.append(record)
    reference = outputs.get(cell.reference)
    for record in records:
        name = record["impl"]
        if name in outputs and reference is not None and name != cell.reference:
            error = check(outputs[name], reference, summed=name in cell.summed)
            record["max_rel_diff"] = error
            if error is None or error > args.tolerance:
                record["status"] = ("mismatch: shapes differ" if error is None
                                    else f"mismatch: max rel diff {error:.1e}")
    if size == max(args.sizes_of(workload)):  # TensorFlow short-cuts a size of 1
        try:
            n_body = body_ops(cell.body)
            for record in records:
                record["body_ops"] = n_body
        except Exception as err:  # pylint: disable=broad-except
            print(f"  (body ops not counted: {type(err).__name__})", file=sys.stderr)
    return records


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{cpu}, {os.cpu_count()} cores; TensorFlow {tf.__version__}, "
            f"Python {platform.python_version()}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="few sizes (the default)")
    mode.add_argument("--full", action="store_true", help="all sizes, longer budgets")
    mode.add_argument("--smoke", action="store_true",
                      help="the quick run's smallest size only, timed briefly (tests)")
    parser.add_argument("--out", default=None, help="output folder "
                        "(default benchmarks/results/<mode>)")
    parser.add_argument("--only", nargs="*", default=None, metavar="WORKLOAD",
                        help="workloads to run: " + ", ".join(w.key for w in workloads.WORKLOADS))
    parser.add_argument("--tolerance", type=float, default=2e-3,
                        help="largest relative difference accepted by the check")
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    args.mode = "full" if args.full else "smoke" if args.smoke else "quick"
    args.budget, args.min_reps, args.max_reps = {
        "full": (2.0, 5, 50), "quick": (1.0, 5, 30), "smoke": (0.0, 1, 1)}[args.mode]
    args.out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                        "results", args.mode)

    def sizes_of(workload):
        return {"full": workload.full, "quick": workload.quick,
                "smoke": workload.quick[:1]}[args.mode]

    args.sizes_of = sizes_of
    return args


def main(argv=None):
    args = parse_args(argv)
    selected = [w for w in workloads.WORKLOADS if args.only is None or w.key in args.only]
    os.makedirs(args.out, exist_ok=True)
    started, records = time.perf_counter(), []
    for workload in selected:
        for size in args.sizes_of(workload):
            print(f"{workload.key} size {size} ...", flush=True)
            for record in run_cell(workload, size, args):
                records.append(record)
                note = "" if record["status"] == "ok" else "  " + record["status"]
                rate = record.get("throughput")
                print(f"  {record['impl']:28} "
                      f"{'-' if rate is None else f'{rate:,.4g}'} {workload.unit}{note}",
                      flush=True)
    meta = {"command": " ".join([os.path.relpath(sys.executable)] + sys.argv),
            "mode": args.mode, "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M"),
            "seconds": round(time.perf_counter() - started, 1),
            "jax": _jax_meta()}
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as out:
        json.dump({"meta": meta, "cells": records}, out, indent=1)
    with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as out:
        out.write(report.markdown(meta, selected, records))
    if not args.no_plots:
        report.plots(selected, records, args.out)
    print(f"wrote {args.out}/results.md, results.json and plots in {meta['seconds']} s")


def _jax_meta() -> str:
    if not workloads.has_jax():
        return "not installed: no JAX column"
    from importlib.metadata import version  # pylint: disable=import-outside-toplevel
    return (f"jax {version('jax')}: column "
            f"`{workloads.JAX}` (under jax.jit, outside tf.function; no peak memory)")


if __name__ == "__main__":
    main()
