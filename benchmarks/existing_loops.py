"""Loops users already wrote, unchanged, against ``pf.vectorize_loops`` of the same
function (issue 31).

Each workload is a function as people write it: ``tf.map_fn`` over examples, or a
``tf.while_loop`` / AutoGraph ``for`` writing a ``TensorArray``. Columns: the function
itself (``original``, in a ``tf.function``), ``pf.vectorize_loops`` of it (called
eagerly: converted once per input signature), and ``hand``, the batched code one would
write instead, where there is one. The exponential moving average carries a value
from step to step: ``vectorize_loops`` must leave it as it is, and not slower. ``tree``
and ``solve`` read what earlier iterations wrote (8 nodes or unknowns per batch
entry): they run level by level.
Each result is checked against the original (largest difference over the largest
value).

Run: .venv/bin/python benchmarks/existing_loops.py [--batch 1 8 32 128 256]
     [--only preprocess mlp topk decode tree solve ema] [--budget 0.5]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import pfor_core as pf  # noqa: E402


def preprocess(n):
    """Per-image normalization, a flip by a per-image flag, a central crop and resize."""
    images = tf.random.stateless_uniform([n, 48, 48, 3], [0, 1])
    flags = tf.random.stateless_uniform([n], [0, 2]) < 0.5

    def one(args):
        image, flip = args
        image = (image - tf.reduce_mean(image)) / (tf.math.reduce_std(image) + 1e-6)
        image = tf.where(flip, tf.reverse(image, [1]), image)
        return tf.image.resize(image[8:40, 8:40], [24, 24])

    def original(images, flags):
        return tf.map_fn(one, (images, flags), fn_output_signature=tf.float32)

    def hand(images, flags):
        mean = tf.reduce_mean(images, [1, 2, 3], keepdims=True)
        std = tf.math.reduce_std(images, [1, 2, 3], keepdims=True)
        images = (images - mean) / (std + 1e-6)
        images = tf.where(flags[:, None, None, None], tf.reverse(images, [2]), images)
        return tf.image.resize(images[:, 8:40, 8:40], [24, 24])
    return original, hand, (images, flags)


def mlp(n):
    """A per-example two-layer MLP in ``tf.map_fn``."""
    w1 = tf.random.stateless_normal([64, 128], [1, 1]) * 0.1
    w2 = tf.random.stateless_normal([128, 10], [1, 2]) * 0.1
    x = tf.random.stateless_normal([n, 64], [1, 3])

    def original(x):
        return tf.map_fn(lambda r: tf.linalg.matvec(w2, tf.nn.relu(tf.linalg.matvec(
            w1, r, transpose_a=True)), transpose_a=True), x)

    def hand(x):
        return tf.nn.relu(x @ w1) @ w2
    return original, hand, (x,)


def topk(n):
    """Per-example post-processing: the top 5 scores and the boxes they index."""
    scores = tf.random.stateless_uniform([n, 100], [2, 1])
    boxes = tf.random.stateless_uniform([n, 100, 4], [2, 2])

    def original(scores, boxes):
        def one(args):
            s, b = args
            top = tf.math.top_k(s, 5)
            return tf.gather(b, top.indices) * top.values[:, None]
        return tf.map_fn(one, (scores, boxes), fn_output_signature=tf.float32)

    def hand(scores, boxes):
        top = tf.math.top_k(scores, 5)
        return tf.gather(boxes, top.indices, batch_dims=1) * top.values[..., None]
    return original, hand, (scores, boxes)


def decode(n):
    """Per-example greedy decoding of a small RNN, 12 steps, in ``tf.map_fn``: the
    inner loop carries the state (it stays a loop), the outer one is independent."""
    emb = tf.random.stateless_normal([20, 16], [3, 1]) * 0.3
    wh = tf.random.stateless_normal([16, 16], [3, 2]) * 0.3
    wo = tf.random.stateless_normal([16, 20], [3, 3]) * 0.3
    starts = tf.random.stateless_uniform([n], [3, 4], maxval=20, dtype=tf.int32)

    def one(token):
        def step(t, token, h, out):
            h = tf.tanh(tf.linalg.matvec(wh, h, transpose_a=True) + emb[token])
            token = tf.argmax(tf.linalg.matvec(wo, h, transpose_a=True), output_type=tf.int32)
            return t + 1, token, h, out.write(t, token)
        out = tf.TensorArray(tf.int32, size=12)
        _, _, _, out = tf.while_loop(lambda t, *_: t < 12, step,
                                     (0, token, tf.zeros([16]), out))
        return out.stack()

    def original(starts):
        return tf.map_fn(one, starts)

    def hand(starts):
        def step(t, tokens, h, out):
            h = tf.tanh(h @ wh + tf.gather(emb, tokens))
            tokens = tf.argmax(h @ wo, -1, output_type=tf.int32)
            return t + 1, tokens, h, out.write(t, tokens)
        out = tf.TensorArray(tf.int32, size=12)
        _, _, _, out = tf.while_loop(lambda t, *_: t < 12, step,
                                     (0, starts, tf.zeros([tf.shape(starts)[0], 16]), out))
        return tf.transpose(out.stack())
    return original, hand, (starts,)


def _random_dag(n, k, seed):
    """For each of n nodes, k children among the nodes before it (or -1)."""
    rng = np.random.default_rng(seed)
    kids = np.full([n, k], -1, np.int32)
    for t in range(1, n):
        for j in range(k):
            if rng.random() < 0.7:
                kids[t, j] = rng.integers(max(0, t - 64), t)
    return kids


def tree(n):
    """A node loop over 8 * batch nodes of a random binary DAG in post-order, reading the
    children's states from a TensorArray (the "levels" case)."""
    d = 32
    w = tf.random.stateless_normal([d, d], [5, 1]) * 0.2
    u = tf.random.stateless_normal([d, d], [5, 2]) * 0.2
    x = tf.random.stateless_normal([8 * n, d], [5, 3])
    kids = tf.constant(_random_dag(8 * n, 2, 0))

    def original(x, kids):
        hs = tf.TensorArray(tf.float32, size=tf.shape(x)[0], element_shape=[d])
        for t in tf.range(tf.shape(x)[0]):
            left, right = kids[t, 0], kids[t, 1]
            hl = tf.where(left >= 0, hs.read(tf.maximum(left, 0)), tf.zeros([d]))
            hr = tf.where(right >= 0, hs.read(tf.maximum(right, 0)), tf.zeros([d]))
            hs = hs.write(t, tf.tanh(tf.linalg.matvec(w, x[t]) + tf.linalg.matvec(u, hl + hr)))
        return hs.stack()
    return original, None, (x, kids)


def solve(n):
    """Forward substitution over a sparse lower-triangular matrix of 8 * batch rows
    (up to 4 off-diagonal entries a row): each unknown reads earlier ones by the
    sparsity pattern (the "levels" case)."""
    cols = _random_dag(8 * n, 4, 1)
    vals = np.where(cols >= 0, np.random.default_rng(2).normal(size=cols.shape), 0)
    cols, vals = tf.constant(np.maximum(cols, 0)), tf.constant(vals, tf.float32)
    diag = tf.random.stateless_uniform([8 * n], [6, 1], 1., 2.)
    b = tf.random.stateless_normal([8 * n], [6, 2])

    def original(b, cols, vals, diag):
        xs = tf.TensorArray(tf.float32, size=tf.shape(b)[0], element_shape=[])
        for t in tf.range(tf.shape(b)[0]):
            earlier = xs.gather(cols[t])
            xs = xs.write(t, (b[t] - tf.reduce_sum(vals[t] * earlier)) / diag[t])
        return xs.stack()
    return original, None, (b, cols, vals, diag)


def ema(n):
    """An exponential moving average over the rows: a true carried dependence."""
    x = tf.random.stateless_normal([n, 256], [4, 1])

    def original(x):
        h = tf.zeros([256])
        for i in tf.range(tf.shape(x)[0]):
            h = 0.9 * h + 0.1 * x[i]
        return h
    return original, None, (x,)


WORKLOADS = {"preprocess": preprocess, "mlp": mlp, "topk": topk, "decode": decode,
             "tree": tree, "solve": solve, "ema": ema}


def _diff(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want), initial=0) / max(np.max(np.abs(want), initial=0),
                                                                 1e-12))


def run(names, batches, budget):
    rows = []
    for name in names:
        for n in batches:
            original, hand, args = WORKLOADS[name](n)
            vectorized = pf.vectorize_loops(original)
            fns = {"original": tf.function(original), "vectorize_loops": vectorized}
            if hand is not None:
                fns["hand"] = tf.function(hand)
            diff = _diff(vectorized(*args), fns["original"](*args))
            decisions = ",".join(e.decision for e in vectorized.explain(*args))
            times = _bench.compare(fns, *args, budget=budget)
            speedup = times["original"] / times["vectorize_loops"]
            rows.append([name, n, *(_bench.fmt_time(times.get(k)) for k in
                                    ("original", "vectorize_loops", "hand")),
                         f"{speedup:.2f}x", decisions, f"{diff:.0e}"])
            print(" | ".join(map(str, rows[-1])), flush=True)
    print()
    print(_bench.table(["workload", "batch", "original", "vectorize_loops", "hand",
                        "speedup", "decisions", "diff"], rows))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 8, 32, 128, 256])
    parser.add_argument("--only", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--budget", type=float, default=0.5)
    args = parser.parse_args()
    run(args.only, args.batch, args.budget)


if __name__ == "__main__":
    main()
