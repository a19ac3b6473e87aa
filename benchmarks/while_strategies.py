"""Per-iteration trip counts: the masked loop against the active subset, by body size.

The body is ``x = tanh(W x)`` on a row of ``d`` floats (``x * 0.9 + 1`` for d = 1),
each iteration running its own number of steps (uniform in 0..100). Both strategies
of pfor's while-loop converter run side by side in one process, forced on each side;
"chosen" names what pfor picks on its own (pfor_controlflow/loops/masking.py: masked for
rows of at most 32 elements when the body is made of total ops). Run:
    .venv/bin/python benchmarks/while_strategies.py [--batch 512]
"""

import argparse
from unittest import mock

import numpy as np
import tensorflow as tf

from _bench import compare, header, table  # pylint: disable=import-error

import pfor_core as pf
from pfor_controlflow.loops import masking, trip_counts


def make_body(batch, d, max_trips=100, seed=0):
    rng = np.random.default_rng(seed)
    trips = tf.constant(rng.integers(0, max_trips + 1, size=[batch]), tf.int32)
    x0 = tf.constant(rng.normal(size=[batch, d]), tf.float32)
    w = tf.constant(rng.normal(size=[d, d]) / np.sqrt(d), tf.float32)

    def step(t, x):
        return t + 1, (x * 0.9 + 1.0 if d == 1 else tf.tanh(tf.linalg.matvec(w, x)))

    def body(i):
        limit = tf.gather(trips, i)
        return tf.while_loop(lambda t, x: t < limit, step, (0, tf.gather(x0, i)))[1]
    return body


def converted(body, batch, masked):
    """pf.pfor of ``body`` under tf.function, with the strategy forced."""
    with mock.patch.object(masking, "pays", lambda loop: masked):
        fn = tf.function(lambda: pf.pfor(body, batch, fallback="error"))
        fn.get_concrete_function()  # converts now, while the patch holds
    return fn


def chosen(body) -> str:
    runs = []
    with mock.patch.object(trip_counts, "run_masked", lambda *a: runs.append("masked")), \
            mock.patch.object(trip_counts, "run_subset", lambda *a: runs.append("subset")):
        try:
            pf.pfor(body, 2, fallback="error")
        except Exception:  # pylint: disable=broad-except
            pass  # the stand-ins return nothing: only the choice matters
    return runs[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, nargs="*", default=[64, 512])
    parser.add_argument("--dims", type=int, nargs="*", default=[1, 8, 32, 64, 128, 256])
    args = parser.parse_args()
    rows = []
    for batch in args.batch:
        for d in args.dims:
            body = make_body(batch, d)
            fns = {"subset": converted(body, batch, False),
                   "masked": converted(body, batch, True)}
            np.testing.assert_allclose(fns["masked"](), fns["subset"](), rtol=1e-5, atol=1e-6)
            times = compare(fns, budget=1.0, rounds=3)
            rows.append((batch, d, f"{times['subset'] * 1e3:.2f}",
                         f"{times['masked'] * 1e3:.2f}",
                         f"{times['masked'] / times['subset']:.2f}", chosen(body)))
    print(header("Per-iteration trip counts (0..100): masked loop vs active subset"))
    print(table(("batch", "floats a row", "subset ms", "masked ms", "masked / subset",
                 "chosen"), rows))


if __name__ == "__main__":
    main()
