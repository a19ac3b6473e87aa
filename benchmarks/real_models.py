"""Real Keras models (random weights) per example: pfor vs tf.vectorized_map vs a loop.

Tasks, each with the loss users write and ``training=False``:
- ``batching``: the model written for one example (``model(x[None])``) over a batch;
- ``grads``: per-example gradients of a cross-entropy loss w.r.t. every weight;
- ``jacobian``: the jacobian of the logits w.r.t. one example's input (``pf.jacobian``
  against ``tape.jacobian``, vectorized by TensorFlow, and a loop of gradients).
Models: keras.applications MobileNetV3Small and EfficientNetB0 (depthwise convolutions),
ConvNeXtTiny (grouped 7x7 convolutions), DenseNet121 (dense concatenation), and, where
keras_hub is installed (``pip install --no-deps keras-hub regex tokenizers``), a small
BERT-style encoder (attention); a GRU classifier (recurrent). All run in one process,
side by side (_bench.compare), 2 threads unless --threads says otherwise.

Run: .venv/bin/python benchmarks/real_models.py [--models ...] [--tasks ...]
     [--batch 4 32] [--size 64] [--budget 1]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import pfor_core as pf  # noqa: E402

CLASSES = 10


def _application(name, size):
    keras.utils.set_random_seed(0)
    build = getattr(keras.applications, name)
    kwargs = dict(weights=None, input_shape=(size, size, 3), classes=CLASSES,
                  classifier_activation=None)  # logits
    if name.startswith(("MobileNetV3", "ConvNeXt")):
        kwargs["include_preprocessing"] = False
    return build(**kwargs), [size, size, 3], tf.float32


def _gru(_size):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input([20, 16]), keras.layers.GRU(64),
                              keras.layers.Dense(CLASSES)])
    return model, [20, 16], tf.float32


def _bert(_size):
    import keras_hub  # pylint: disable=import-outside-toplevel
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=1000, num_layers=2, num_heads=2, hidden_dim=64,
        intermediate_dim=128, max_sequence_length=32)
    ids = keras.Input([32], dtype="int32")
    pooled = backbone({"token_ids": ids, "segment_ids": tf.zeros_like(ids),
                       "padding_mask": tf.ones_like(ids)})["pooled_output"]
    return keras.Model(ids, keras.layers.Dense(CLASSES)(pooled)), [32], tf.int32


MODELS = {
    "mobilenet_v3_small": lambda s: _application("MobileNetV3Small", s),
    "efficientnet_b0": lambda s: _application("EfficientNetB0", s),
    "convnext_tiny": lambda s: _application("ConvNeXtTiny", s),
    "densenet121": lambda s: _application("DenseNet121", s),
    "gru": _gru,
    "bert_tiny": _bert,
}


def _inputs(shape, dtype, n):
    if dtype == tf.int32:
        return tf.random.stateless_uniform([n] + shape, [0, 1], maxval=1000, dtype=tf.int32)
    return tf.random.stateless_normal([n] + shape, [0, 1])


def _tasks(model, x, labels):
    """{task: {implementation: zero-argument tf.function}}."""
    variables = model.trainable_variables
    xent = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    n = int(x.shape[0])

    def loss_fn(xi, yi):
        return xent(yi, model(xi, training=False))

    def one_grad(i):
        with tf.GradientTape() as tape:
            value = loss_fn(tf.gather(x, [i]), tf.gather(labels, [i]))
        return tape.gradient(value, variables)

    def one_logits(i):
        return model(tf.gather(x, [i]), training=False)[0]

    floats = x.dtype.is_floating
    x0 = x[:1]

    def jac_body(k):
        with tf.GradientTape() as tape:
            tape.watch(x0)
            out = model(x0, training=False)[0, k]
        return tape.gradient(out, x0)[0]

    signature = [v.dtype for v in variables]
    tasks = {
        "batching": {
            "pfor": lambda: pf.vectorized_map(lambda xi: model(xi[None], training=False)[0],
                                              x, fallback="error"),
            "tf.vectorized_map": lambda: tf.vectorized_map(
                lambda xi: model(xi[None], training=False)[0], x),
            "loop": lambda: tf.map_fn(one_logits, tf.range(n), fn_output_signature=tf.float32),
        },
        "grads": {
            "pfor": lambda: pf.per_example_gradients(loss_fn, variables, x, labels,
                                                     keepdims=True, fallback="error"),
            "tf.vectorized_map": lambda: tf.vectorized_map(one_grad, tf.range(n)),
            "loop": lambda: tf.map_fn(one_grad, tf.range(n), fn_output_signature=signature),
        },
    }
    if floats:
        tasks["jacobian"] = {
            "pfor": lambda: pf.jacobian(lambda v: model(v, training=False)[0], x0,
                                        fallback="error"),
            "tf.vectorized_map": lambda: tf.vectorized_map(jac_body, tf.range(CLASSES)),
            "loop": lambda: tf.map_fn(jac_body, tf.range(CLASSES), fn_output_signature=x.dtype),
        }
    return {task: {impl: tf.function(fn) for impl, fn in impls.items()}
            for task, impls in tasks.items()}


def _max_rel_diff(got, want):
    diffs = []
    for g, w in zip(tf.nest.flatten(got), tf.nest.flatten(want)):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        g = g.reshape(w.shape)
        diffs.append(np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-12))
    return max(diffs)


def run(models, tasks, batches, size, budget):
    rows = []
    for name in models:
        try:
            model, shape, dtype = MODELS[name](size)
        except ImportError as error:
            print(f"{name}: skipped ({error})", flush=True)
            continue
        for n in batches:
            x = _inputs(shape, dtype, n)
            labels = tf.random.stateless_uniform([n], [2, 3], maxval=CLASSES, dtype=tf.int32)
            for task, impls in _tasks(model, x, labels).items():
                if task not in tasks:
                    continue
                live, notes = {}, {}
                for impl, fn in impls.items():
                    try:
                        out = fn()
                    except Exception as error:  # pylint: disable=broad-except
                        notes[impl] = f"{type(error).__name__}"
                        continue
                    live[impl] = fn
                    notes[impl] = out
                want = notes.get("loop")
                diff = (_max_rel_diff(notes["pfor"], want)
                        if "pfor" in live and "loop" in live else None)
                times = _bench.compare(live, budget=budget, rounds=3)
                row = dict(model=name, task=task, batch=n, diff=diff, times=times,
                           failed={k: v for k, v in notes.items() if isinstance(v, str)})
                rows.append(row)
                print(_format(row), flush=True)
    return rows


def _format(row):
    t = row["times"]
    cells = [f"{row['model']:<19} {row['task']:<9} {row['batch']:>4}"]
    for impl in ("pfor", "tf.vectorized_map", "loop"):
        cells.append(f"{impl}={t[impl] * 1e3:9.1f} ms" if impl in t else
                     f"{impl}={row['failed'].get(impl, '-'):>12}")
    if "pfor" in t:
        for peer in ("tf.vectorized_map", "loop"):
            if peer in t:
                cells.append(f"x{peer.split('.')[-1]}={t[peer] / t['pfor']:.2f}")
    if row["diff"] is not None:
        cells.append(f"diff={row['diff']:.0e}")
    return "  ".join(cells)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--tasks", nargs="+", default=["batching", "grads", "jacobian"])
    parser.add_argument("--batch", nargs="+", type=int, default=[4, 32])
    parser.add_argument("--size", type=int, default=64, help="image side")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per cell")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    print(_bench.header("Real Keras models per example: pfor vs tf.vectorized_map vs a loop"))
    print("x<peer> = the peer's time over pfor's (above 1: pfor is faster)")
    run(args.models, args.tasks, args.batch, args.size, args.budget)


if __name__ == "__main__":
    main()
