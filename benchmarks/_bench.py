"""Shared by the benchmark scripts: timing, tables, and the header naming the run."""

from __future__ import annotations

import os
import platform
import shlex
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402


def header(title: str) -> str:
    """What produced the figures: the command, TensorFlow, the machine."""
    command = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.executable)] + sys.argv)
    return (f"{title}\n"
            f"command:    {command}\n"
            f"tensorflow: {tf.__version__}; python {platform.python_version()}; "
            f"{os.cpu_count()} CPU cores; devices: "
            f"{', '.join(d.device_type for d in tf.config.list_logical_devices())}\n")


def compare(fns: dict, *args, budget: float = 0.5, rounds: int = 5,
            max_calls: int = 1000) -> dict:
    """Seconds per call of each ``fns[name](*args)``, measured side by side: after
    warm-up, ``rounds`` rounds each time one group of calls of every function in turn,
    and each keeps its best group. Interleaving spreads a busy machine's disturbances
    over all functions alike instead of penalizing whichever ran during them."""
    per_group = {}
    for name, fn in fns.items():
        for _ in range(2):
            _sync(fn(*args))
        start = time.perf_counter()
        _sync(fn(*args))
        one = max(time.perf_counter() - start, 1e-7)
        per_group[name] = max(1, min(max_calls, int(budget / rounds / one)))
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(per_group[name]):
                out = fn(*args)
            _sync(out)
            best[name] = min(best[name], (time.perf_counter() - start) / per_group[name])
    return best


def peak_bytes(fn):
    """Peak bytes TensorFlow's CPU allocator reports above what was live, over one call
    of ``fn()`` after a warm-up call."""
    fn()
    tf.config.experimental.reset_memory_stats("CPU:0")
    before = tf.config.experimental.get_memory_info("CPU:0")["current"]
    out = fn()
    peak = tf.config.experimental.get_memory_info("CPU:0")["peak"] - before
    del out
    return peak


def _sync(out):
    """Wait for the values (matters on GPUs, where ops run asynchronously)."""
    for t in tf.nest.flatten(out):
        if hasattr(t, "numpy"):
            t.numpy()


def best_of(repeats: int, fn):
    """(smallest seconds, last result) over ``repeats`` runs of ``fn()``."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.0f} us"


def table(header_row, rows) -> str:
    """A plain-text table; the first column left-aligned, the others right-aligned."""
    lines = [tuple(str(c) for c in header_row)] + [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(line[k]) for line in lines) for k in range(len(lines[0]))]
    out = []
    for k, line in enumerate(lines):
        out.append("  ".join(c.ljust(w) if j == 0 else c.rjust(w)
                             for j, (c, w) in enumerate(zip(line, widths))).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
