"""Per-iteration trip counts: the masked loop against the active subset ("compacted").

Two bodies, each iteration running its own number of steps: ``x = tanh(W x)`` on a row
of ``d`` floats (``x * 0.9 + 1`` for d = 1), and the paper's dynamic LSTM (input 128,
state 32 or 256, reading its input at the step). Trip counts are drawn three ways:
uniform in 1..100, skewed (90% in 1..10, the rest in 90..100) and constant (100). Both
strategies of pfor's while-loop converter run side by side in one process, forced on
each side; "chosen" names what pfor's cost model picks on its own
(pfor_controlflow/loops/masking.py, as pf.explain reports it) and "chosen / best" how
far that is from the faster of the two. Run:
    .venv/bin/python benchmarks/while_strategies.py [--batch 64 512] [--dims ...] [--lstm-batch 128]
"""

import argparse
from unittest import mock

import numpy as np
import tensorflow as tf

from _bench import compare, header, table  # pylint: disable=import-error

import pfor_core as pf
from dynamic_lstm import per_example  # pylint: disable=import-error
from pfor_controlflow.loops import masking


def trip_counts(kind, batch, rng):
    if kind == "uniform":
        return rng.integers(1, 101, size=[batch])
    if kind == "skewed":
        return np.where(rng.random(batch) < 0.9, rng.integers(1, 11, batch),
                        rng.integers(90, 101, batch))
    return np.full([batch], 100)


def make_body(batch, d, trips, seed=0):
    rng = np.random.default_rng(seed)
    trips = tf.constant(trips, tf.int32)
    x0 = tf.constant(rng.normal(size=[batch, d]), tf.float32)
    w = tf.constant(rng.normal(size=[d, d]) / np.sqrt(d), tf.float32)

    def step(t, x):
        return t + 1, (x * 0.9 + 1.0 if d == 1 else tf.tanh(tf.linalg.matvec(w, x)))

    def body(i):
        limit = tf.gather(trips, i)
        return tf.while_loop(lambda t, x: t < limit, step, (0, tf.gather(x0, i)))[1]
    return body


def make_lstm(batch, state, trips, seed=0):
    rng = np.random.default_rng(seed)
    dim = 128 if state > 32 else 16
    inputs = tf.constant(rng.normal(size=[batch, 100, dim]), tf.float32)
    lengths = tf.constant(trips, tf.int32)
    weights = tf.constant(rng.normal(size=[dim + state, 4 * state]) / np.sqrt(dim + state),
                          tf.float32)
    return per_example(inputs, lengths, weights, tf.zeros([4 * state]))


def converted(body, batch, masked):
    """pf.pfor of ``body`` under tf.function, with the strategy forced."""
    with mock.patch.object(masking, "pays", lambda loop: masked):
        fn = tf.function(lambda: pf.pfor(body, batch, fallback="error"))
        fn.get_concrete_function()  # converts now, while the patch holds
    return fn


def chosen(body, batch) -> str:
    return pf.explain(body, batch).loops[0].strategy


def measure(body, batch):
    fns = {"compacted": converted(body, batch, False), "masked": converted(body, batch, True)}
    np.testing.assert_allclose(fns["masked"](), fns["compacted"](), rtol=1e-4, atol=1e-5)
    times = compare(fns, budget=1.0, rounds=3)
    pick = chosen(body, batch)
    return (f"{times['compacted'] * 1e3:.2f}", f"{times['masked'] * 1e3:.2f}",
            f"{times['masked'] / times['compacted']:.2f}", pick,
            f"{times[pick] / min(times.values()):.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, nargs="*", default=[64, 512])
    parser.add_argument("--dims", type=int, nargs="*", default=[1, 8, 32, 64, 256])
    parser.add_argument("--lengths", nargs="*", default=["uniform", "skewed", "constant"])
    parser.add_argument("--lstm-batch", type=int, default=128)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    columns = ("compacted ms", "masked ms", "masked / compacted", "chosen", "chosen / best")
    rows = []
    for batch in args.batch:
        for d in args.dims:
            for kind in args.lengths:
                rows.append((batch, d, kind) + measure(
                    make_body(batch, d, trip_counts(kind, batch, rng)), batch))
    print(header("Per-iteration trip counts: masked loop vs active subset (compacted)"))
    print(table(("batch", "floats a row", "trip counts") + columns, rows))
    rows = []
    for state in (32, 256):
        for kind in args.lengths:
            trips = trip_counts(kind, args.lstm_batch, rng)
            rows.append((state, kind) + measure(
                make_lstm(args.lstm_batch, state, trips), args.lstm_batch))
    print(f"\nDynamic LSTM, batch {args.lstm_batch}")
    print(table(("state", "lengths") + columns, rows))


if __name__ == "__main__":
    main()
