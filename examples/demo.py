"""pfor demo: a few loop bodies vectorized, checked against the loop, and timed.

Each body is written for ONE example (``fn(row, ...)``). For each we

1. check ``pf.pfor(loop_fn, n, fallback="error")`` against the sequential loop (a body
   that needs the fallback because a converter is missing is reported, not fatal), and
2. time one call of the same computation done four ways:

   - ``python loop``: ``tf.stack([fn(x[i]) for i in range(n)])``, eagerly;
   - ``tf.map_fn``: a sequential ``tf.while_loop`` inside a ``tf.function`` (traced once);
   - ``pf.vmap``: called eagerly; it converts once per input signature and caches, so the
     per-call time excludes tracing and conversion;
   - ``tf.vectorized_map``: TensorFlow's built-in vectorizer inside a ``tf.function``
     (traced once; called eagerly it would retrace and reconvert on every call).

Run with ``bash dev/demo`` (or ``.venv/bin/python examples/demo.py [--n N]``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
import warnings
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import pfor_core as pf  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    fn: Callable  # one example's computation: fn(*rows)
    args: tuple  # tensors with a leading example axis of size n


def make_cases(n: int, seed: int = 0) -> list[Case]:
    """The demo's loop bodies: math and array ops a per-example computation uses."""
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return tf.constant(rng.standard_normal(shape), tf.float32)

    d = 64
    w, b = normal(d, d) / 8.0, normal(d)
    w2 = normal(d, 16) / 8.0
    table = normal(1000, 32)
    a = normal(16, 16) / 4.0

    def affine_tanh(x):  # x: [d]
        return tf.tanh(tf.linalg.matvec(w, x, transpose_a=True) + b)

    def normalize_rows(x):  # x: [16, 32], each row to mean 0, variance 1
        mean = tf.reduce_mean(x, axis=-1, keepdims=True)
        centered = x - mean
        var = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
        return centered * tf.math.rsqrt(var + 1e-5)

    def tanh_jacobian(x):  # x: [d]; d tanh(W^T x) / dx, then projected by w2
        h = tf.tanh(tf.linalg.matvec(w, x, transpose_a=True))
        jac = tf.expand_dims(1.0 - h * h, 1) * tf.transpose(w)  # [d, d]
        return tf.matmul(jac, w2)  # stacked x invariant matmul

    def embedding_bag(ids):  # ids: [8] int32 rows of the table
        return tf.reduce_sum(tf.gather(table, ids), axis=0)

    def bilinear_einsum(x):  # x: [8, 16]
        return tf.einsum("td,de,se->ts", x, a, x)

    return [
        Case("affine + tanh", affine_tanh, (normal(n, d),)),
        Case("normalize rows", normalize_rows, (normal(n, 16, 32),)),
        Case("tanh jacobian @ W", tanh_jacobian, (normal(n, d),)),
        Case("gather (embedding bag)", embedding_bag,
             (tf.constant(rng.integers(0, 1000, size=(n, 8)), tf.int32),)),
        Case("einsum x A x^T", bilinear_einsum, (normal(n, 8, 16),)),
    ]


# -- the four ways of running a case ----------------------------------------------------

def python_loop(case: Case):
    n = int(case.args[0].shape[0])
    return tf.stack([case.fn(*[a[i] for a in case.args]) for i in range(n)])


def map_fn_runner(case: Case):
    def run(*args):
        return tf.map_fn(lambda rows: case.fn(*rows), args,
                         fn_output_signature=tf.float32)
    return tf.function(run, autograph=False)


def vectorized_map_runner(case: Case):
    def run(*args):
        return tf.vectorized_map(lambda rows: case.fn(*rows), args)
    return tf.function(run, autograph=False)


def loop_fn_of(case: Case):
    def loop_fn(i):
        return case.fn(*[tf.gather(a, i) for a in case.args])
    return loop_fn


# -- measuring ----------------------------------------------------------------------------

def time_per_call(fns: dict, *args, budget: float, rounds: int = 3,
                  max_calls: int = 200) -> dict:
    """Seconds per call of each ``fns[name](*args)``, measured side by side: after a
    warm-up call (tracing, conversion), ``rounds`` rounds each time a group of calls of
    every function in turn; each keeps its best group, so a busy machine disturbs all
    alike."""
    per_group = {}
    for name, fn in fns.items():
        fn(*args)  # warm-up
        start = time.perf_counter()
        fn(*args)
        one = max(time.perf_counter() - start, 1e-6)
        per_group[name] = max(1, min(max_calls, int(budget / rounds / one)))
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(per_group[name]):
                fn(*args)
            best[name] = min(best[name], (time.perf_counter() - start) / per_group[name])
    return best


def check(case: Case, reference) -> tuple[str, str]:
    """(status, fallback mode to time pf.vmap with)."""
    n = int(case.args[0].shape[0])
    try:
        got = pf.pfor(loop_fn_of(case), n, fallback="error")
    except pf.ConversionError:
        report = pf.explain(loop_fn_of(case), n)
        missing = sorted({r.op_type for r in report.fallbacks})
        return f"FALLBACK (no converter for {', '.join(missing)})", "loop"
    except Exception as err:  # a bug; report it and go on with the other bodies
        return f"ERROR {type(err).__name__}: {str(err).splitlines()[0][:120]}", ""
    diff = float(tf.reduce_max(tf.abs(tf.cast(got, tf.float64)
                                      - tf.cast(reference, tf.float64))))
    ok = np.allclose(got.numpy(), reference.numpy(), rtol=1e-4, atol=1e-4)
    return f"{'OK' if ok else 'MISMATCH'} (max abs diff {diff:.1e})", "error"


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def run_case(case: Case, budget: float) -> dict:
    reference = python_loop(case)
    status, mode = check(case, reference)
    row = {"body": case.name, "n": int(case.args[0].shape[0]), "status": status,
           "pfor": None, "vmap_tf": None, "pfor_note": "*" if mode == "loop" else ""}
    row["loop"] = time_per_call({"loop": python_loop}, case, budget=budget,
                                max_calls=20)["loop"]
    fns = {"map_fn": map_fn_runner(case)}
    if mode:
        fns["pfor"] = pf.vmap(case.fn, fallback=mode)
    try:
        vectorized = vectorized_map_runner(case)
        vectorized(*case.args)
        fns["vmap_tf"] = vectorized
    except Exception as err:  # pylint: disable=broad-except
        row["status"] += f"; tf.vectorized_map failed: {type(err).__name__}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.FallbackWarning)
        row.update(time_per_call(fns, *case.args, budget=budget))
    return row


def print_table(rows: list[dict]) -> None:
    header = ("body", "n", "python loop", "tf.map_fn", "pf.vmap", "tf.vectorized_map",
              "vs loop", "vs map_fn", "vs tf.vectorized_map")
    lines = [header]
    for r in rows:
        p = r["pfor"]

        def speedup(other):
            return "-" if p is None or other is None else f"{other / p:.1f}x"

        lines.append((r["body"], str(r["n"]), fmt_time(r["loop"]), fmt_time(r["map_fn"]),
                      fmt_time(p) + r.get("pfor_note", ""), fmt_time(r["vmap_tf"]),
                      speedup(r["loop"]), speedup(r["map_fn"]), speedup(r["vmap_tf"])))
    widths = [max(len(line[k]) for line in lines) for k in range(len(header))]
    for k, line in enumerate(lines):
        print("  ".join(c.ljust(w) if j == 0 else c.rjust(w)
                        for j, (c, w) in enumerate(zip(line, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="iterations (examples) per call")
    parser.add_argument("--budget", type=float, default=0.3,
                        help="seconds of timed calls per measurement")
    args = parser.parse_args(argv)
    tf.get_logger().setLevel("ERROR")
    started = time.perf_counter()
    rows = []
    print(f"pfor demo: {args.n} iterations per call, TensorFlow {tf.__version__}, "
          f"{os.cpu_count()} CPU cores\n")
    for case in make_cases(args.n):
        row = run_case(case, args.budget)
        print(f"  {case.name:<24} pf.pfor vs loop: {row['status']}")
        rows.append(row)
    print("\nTime per call (best of 3 rounds; the graph versions timed side by side):")
    print("  python loop       = eager Python loop over the examples, results stacked")
    print("  tf.map_fn         = sequential tf.while_loop, in a tf.function traced once")
    print("  pf.vmap           = eager call of pf.vmap(fn): converted once on the first call "
          "and cached, so conversion is excluded")
    print("  tf.vectorized_map = TensorFlow's built-in vectorizer, in a tf.function traced once")
    print("  vs X              = speed-up of pf.vmap over X; * = ran with fallback "
          "(a converter is missing)\n")
    print_table(rows)
    print(f"\ndone in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
