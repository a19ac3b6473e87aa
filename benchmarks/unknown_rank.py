"""Values of unknown rank: a ``tf.numpy_function`` without ``set_shape``, then a chain of
elementwise ops, pfor against the loop and TensorFlow's vectorizer.

The numpy function runs once per example in every implementation (pfor's fallback
loop; ``tf.vectorized_map`` falls back to a loop for it too). Its output has no static
rank, so pfor converts each op after it when all examples' shapes agree at run time and
loops otherwise (pfor_core/uniform_or_loop.py); ``set_shape`` gives the rank and skips
that choice. Shapes ``uniform``: one shape for every example; ``varying``: each example
its own length (only the loop and pfor can run it). Run:
    .venv/bin/python benchmarks/unknown_rank.py [--batch 256] [--ops 11]
"""

import argparse
import time
import warnings

import numpy as np
import tensorflow as tf

from _bench import compare, fmt_time, header, table  # pylint: disable=import-error

import pfor_core as pf


def make_body(ops, varying, rank_known):
    def row(i):  # numpy: one example's row, of its own length when ``varying``
        return np.ones([3 + (int(i) % 4 if varying else 0)], np.float32) * float(i)

    def body(i):
        x = tf.numpy_function(row, [i], tf.float32)
        if rank_known:
            x.set_shape([None])
        for k in range(ops):
            x = tf.tanh(x * 0.5 + float(k))
        return tf.reduce_sum(x)
    return body


def implementations(body, batch):
    index = tf.range(batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.FallbackWarning)
        return {
            "loop": tf.function(lambda: tf.map_fn(body, index, fn_output_signature=tf.float32)),
            "tf.vectorized_map": tf.function(lambda: tf.vectorized_map(body, index)),
            "pfor": tf.function(lambda: pf.pfor(body, batch, fallback="loop")),
        }


def first_call(fn):
    start = time.perf_counter()
    try:
        out = fn()
    except (tf.errors.InvalidArgumentError, ValueError) as err:
        return None, type(err).__name__
    return time.perf_counter() - start, out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--ops", type=int, default=11)
    args = parser.parse_args()
    rows = []
    for varying in (False, True):
        for rank_known in (False, True):
            body = make_body(args.ops, varying, rank_known)
            fns = implementations(body, args.batch)
            firsts, outs = {}, {}
            for name, fn in fns.items():
                firsts[name], outs[name] = first_call(fn)
            ran = {n: f for n, f in fns.items() if firsts[n] is not None}
            for name in ran:
                np.testing.assert_allclose(outs[name], outs["loop"], rtol=1e-5)
            times = compare(ran, budget=1.0, rounds=3)
            for name in fns:
                rows.append(("varying" if varying else "uniform",
                             "set_shape" if rank_known else "unknown", name,
                             fmt_time(firsts[name]) if firsts[name] is not None
                             else f"fails: {outs[name]}",
                             fmt_time(times.get(name))))
    print(header(f"A numpy_function then {args.ops} elementwise ops, batch {args.batch}"))
    print(table(("shapes", "rank", "implementation", "first call", "per call"), rows))


if __name__ == "__main__":
    main()
