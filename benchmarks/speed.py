"""Run-time speed of vectorized loops: pf.pfor vs hand-batched vs TF's built-ins.

For each body (written for one example) and each n, four versions of the same
computation, each inside a ``tf.function`` traced and warmed before timing, so only
running the graph is measured:

- ``hand-batched``: the batched computation written by hand (the target: ratio 1);
- ``pf.pfor``: ``pf.pfor(loop_fn, n)`` with ``loop_fn(i)`` slicing row i;
- ``tf.vectorized_map``: TensorFlow's built-in vectorizer on the same body;
- ``tf.map_fn``: a sequential ``tf.while_loop`` over the examples.

The versions are timed side by side (interleaved rounds, best round each). The table
gives the time per call of hand-batched code and every other version's time as a
multiple of it (lower is better; 1.0x = as fast as hand-batched). ``--xla``
compiles every version with ``jit_compile=True``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import warnings
from typing import Callable

import _bench  # first: it quiets TensorFlow's logging before TensorFlow loads
import numpy as np
import tensorflow as tf

import pfor_core as pf


@dataclasses.dataclass(frozen=True)
class Body:
    name: str
    fn: Callable  # one example: fn(*rows)
    batched: Callable  # all examples at once, written by hand: batched(*args)
    args: tuple  # tensors with a leading example axis


def bodies(n: int, seed: int = 0) -> list[Body]:
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return tf.constant(rng.standard_normal(shape) / 4.0, tf.float32)

    w, b = normal(256, 256), normal(256)
    w_small = normal(32, 16)
    table = normal(10000, 64)
    ids = tf.constant(rng.integers(0, 10000, size=(n, 16)), tf.int32)

    def softmax_rows(x):  # x: [8, 128], a softmax along the last axis from reductions
        e = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))
        return e / tf.reduce_sum(e, axis=-1, keepdims=True)

    return [
        Body("MLP layer 256->256 (tanh)",
             lambda x: tf.tanh(tf.linalg.matvec(w, x, transpose_a=True) + b),
             lambda x: tf.tanh(x @ w + b), (normal(n, 256),)),
        Body("matmul stacked x invariant [16,32]@[32,16]",
             lambda a: tf.matmul(a, w_small),
             lambda a: tf.matmul(a, w_small), (normal(n, 16, 32),)),  # broadcasts
        Body("matmul stacked x stacked [16,32]@[32,16]",
             # lambdas: a tf.function of tf.matmul itself binds its many keyword
             # arguments on every call (~0.2 ms), which would distort the base time.
             lambda a, c: tf.matmul(a, c), lambda a, c: tf.matmul(a, c),
             (normal(n, 16, 32), normal(n, 32, 16))),
        Body("softmax-like reductions [8,128]", softmax_rows, softmax_rows,
             (normal(n, 8, 128),)),
        Body("gather 16 rows of [10000,64] + sum",
             lambda i: tf.reduce_sum(tf.gather(table, i), axis=0),
             lambda i: tf.reduce_sum(tf.gather(table, i), axis=1), (ids,)),
    ]


def versions(body: Body, fallback: str, xla: bool) -> dict:
    """name -> a tf.function computing the batched result from ``body.args``."""
    n = int(body.args[0].shape[0])

    def with_pfor(*args):
        return pf.pfor(lambda i: body.fn(*[tf.gather(a, i) for a in args]), n,
                       fallback=fallback)

    def with_tf_vmap(*args):
        return tf.vectorized_map(lambda rows: body.fn(*rows), args)

    def with_map_fn(*args):
        return tf.map_fn(lambda rows: body.fn(*rows), args,
                         fn_output_signature=tf.float32)

    fns = {"hand-batched": body.batched, "pf.pfor": with_pfor,
           "tf.vectorized_map": with_tf_vmap, "tf.map_fn": with_map_fn}
    return {k: tf.function(f, autograph=False, jit_compile=xla or None)
            for k, f in fns.items()}


def fallback_ops(body: Body) -> list[str]:
    def loop_fn(i):
        return body.fn(*[tf.gather(a, i) for a in body.args])
    return sorted({r.op_type for r in pf.explain(loop_fn, int(body.args[0].shape[0])).fallbacks})


def measure(body: Body, budget: float, fallback: str, xla: bool):
    """(times by version name, notes)."""
    notes = []
    missing = fallback_ops(body)
    if missing:
        notes.append(f"pf.pfor fell back for {', '.join(missing)}")
    working, expected = {}, None
    for name, fn in versions(body, fallback, xla).items():
        try:
            out = fn(*body.args)
        except Exception as err:  # pylint: disable=broad-except
            notes.append(f"{name} failed: {type(err).__name__}: "
                         f"{str(err).splitlines()[0][:100]}")
            continue
        if expected is None:
            expected = out
        elif not np.allclose(out.numpy(), expected.numpy(), rtol=1e-3, atol=1e-4):
            notes.append(f"{name} DIFFERS from hand-batched")
        working[name] = fn
    return _bench.compare(working, *body.args, budget=budget), notes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[32, 512],
                        help="iterations (examples) per call")
    parser.add_argument("--budget", type=float, default=0.6,
                        help="seconds of timed calls per version and body")
    parser.add_argument("--fallback", default="loop", choices=("loop", "error"),
                        help="pf.pfor's fallback mode (loop: note fallbacks and go on)")
    parser.add_argument("--xla", action="store_true", help="jit_compile=True everywhere")
    args = parser.parse_args(argv)
    tf.get_logger().setLevel("ERROR")
    warnings.simplefilter("ignore", pf.FallbackWarning)
    print(_bench.header("speed: pf.pfor vs hand-batched vs tf.vectorized_map vs tf.map_fn"
                        + (" (XLA)" if args.xla else "")))
    rows, notes = [], []
    for n in args.n:
        for body in bodies(n):
            times, body_notes = measure(body, args.budget, args.fallback, args.xla)
            base = times.get("hand-batched")

            def ratio(name):
                t = times.get(name)
                return "-" if t is None or not base else f"{t / base:.2f}x"

            rows.append((body.name, n, _bench.fmt_time(base), ratio("pf.pfor"),
                         ratio("tf.vectorized_map"), ratio("tf.map_fn")))
            notes.extend(f"{body.name}, n={n}: {note}" for note in body_notes)
    print(_bench.table(("body", "n", "hand-batched", "pf.pfor", "tf.vectorized_map",
                        "tf.map_fn"), rows))
    print("\nhand-batched: time per call; the other columns: time per call / hand-batched "
          "(lower is better). All in tf.function, traced and warmed.")
    for note in notes:
        print("note:", note)


if __name__ == "__main__":
    sys.exit(main())
