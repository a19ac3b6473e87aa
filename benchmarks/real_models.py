"""Real Keras models (random weights) per example: pfor vs tf.vectorized_map vs a loop.

Tasks, each with the loss users write and ``training=False``:
- ``batching``: the model written for one example (``model(x[None])``) over a batch;
- ``grads``: per-example gradients of a cross-entropy loss w.r.t. every weight;
- ``jacobian``: the jacobian of one example's logits w.r.t. its input (``pf.jacobian``
  against TensorFlow's vectorizer over the logits and a loop of gradients); it does not
  depend on the batch, so it runs once per model (batch column 1).
Models: keras.applications MobileNetV3Small and EfficientNetB0 (depthwise convolutions),
ConvNeXtTiny (grouped 7x7 convolutions), DenseNet121 (dense concatenation), and, where
keras_hub is installed (``pip install --no-deps keras-hub regex tokenizers``), a small
BERT-style encoder (attention); a GRU classifier (recurrent). A model's implementations
run side by side in one process (_bench.compare), 2 threads unless --threads says
otherwise; each model in a subprocess of its own (what one model's graphs hold stays out
of the next one's figures). ``hand`` is the model called on the batch: the floor for
``batching``.

Run: .venv/bin/python benchmarks/real_models.py [--models ...] [--tasks ...]
     [--batch 4 32] [--size 64] [--budget 2] [--without tf.vectorized_map]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

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
    pooled = backbone({"token_ids": ids, "segment_ids": keras.ops.zeros_like(ids),
                       "padding_mask": keras.ops.ones_like(ids)})["pooled_output"]
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
    """{task: {implementation: zero-argument tf.function}}; ``body`` is one iteration
    (not timed: the graph ops of the others are counted per op of it)."""
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
            "hand": lambda: model(x, training=False),
            "body": lambda: one_logits(0),
        },
        "grads": {
            "pfor": lambda: pf.per_example_gradients(loss_fn, variables, x, labels,
                                                     keepdims=True, fallback="error"),
            "tf.vectorized_map": lambda: tf.vectorized_map(one_grad, tf.range(n)),
            "loop": lambda: tf.map_fn(one_grad, tf.range(n), fn_output_signature=signature),
            "body": lambda: one_grad(0),
        },
    }
    if floats:
        tasks["jacobian"] = {
            "pfor": lambda: pf.jacobian(lambda v: model(v, training=False)[0], x0,
                                        fallback="error"),
            "tf.vectorized_map": lambda: tf.vectorized_map(jac_body, tf.range(CLASSES)),
            "loop": lambda: tf.map_fn(jac_body, tf.range(CLASSES), fn_output_signature=x.dtype),
            "body": lambda: jac_body(0),
        }
    return {task: {impl: tf.function(fn) for impl, fn in impls.items()}
            for task, impls in tasks.items()}


def _max_rel_diff(got, want):
    """The largest difference over the largest value of all outputs together: some
    gradients are zero up to rounding (a key projection's bias under softmax), where a
    difference relative to the tensor itself means nothing."""
    diff = scale = 0.0
    for g, w in zip(tf.nest.flatten(got), tf.nest.flatten(want)):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        diff = max(diff, np.max(np.abs(g.reshape(w.shape) - w), initial=0.0))
        scale = max(scale, np.max(np.abs(w), initial=0.0))
    return diff / max(scale, 1e-12)


def run(name, tasks, batches, size, budget, journal, skip=(), without=()):
    """One model's cells, each appended to ``journal`` (JSON lines) as a row: model,
    task, batch, times, failures, diff, ops. Before each implementation's first call and
    before the timing, a line names the step, so that a crash can be told apart; steps
    in ``skip`` ("task/batch" for a cell done, "task/batch/impl" for one that crashed)
    are not run again, nor the implementations named in ``without``."""
    try:
        model, shape, dtype = MODELS[name](size)
    except ImportError as error:
        print(f"{name}: skipped ({error})", flush=True)
        return
    for n in batches:
        x = _inputs(shape, dtype, n)
        labels = tf.random.stateless_uniform([n], [2, 3], maxval=CLASSES, dtype=tf.int32)
        for task, impls in _tasks(model, x, labels).items():
            cell = f"{task}/{1 if task == 'jacobian' else n}"
            if task in tasks and (task != "jacobian" or n == batches[0]) and cell not in skip:
                crashed = {i for i in impls if f"{cell}/{i}" in skip}
                step = lambda what, c=cell: _write(journal, {"step": f"{c}/{what}"})
                row = _cell(name, task, int(cell.split("/")[1]),
                            {i: f for i, f in impls.items()
                             if i not in crashed and i not in without}, budget, step)
                row["failed"].update({i: "crashed" for i in crashed})
                row["failed"].update({i: "not run" for i in without})
                _write(journal, {"row": row})
                print(_format(row), flush=True)


def _write(journal, record):
    with open(journal, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def _cell(name, task, n, impls, budget, step):
    """Every implementation called once (pfor checked against the loop), then timed
    side by side; one that fails is named with its error's type. ``ops`` is the graph
    ops of pfor's and TensorFlow's function per op of the body (TensorFlow's include
    the traced body, which its graph keeps)."""
    body = _graph_ops(impls.pop("body"))
    live, outs, failed, ops = {}, {}, {}, {}
    for impl, fn in impls.items():
        step(impl)
        try:
            outs[impl] = fn()
        except Exception as error:  # pylint: disable=broad-except
            failed[impl] = type(error).__name__
            continue
        live[impl] = fn
        if impl in ("pfor", "tf.vectorized_map"):
            ops[impl] = round(_graph_ops(fn) / body, 2)
    diff = _max_rel_diff(outs["pfor"], outs["loop"]) if "pfor" in outs and "loop" in outs else None
    step("timing")
    return dict(model=name, task=task, batch=n, diff=diff, failed=failed, ops=ops,
                times=_bench.compare(live, budget=budget, rounds=5))


def _graph_ops(fn) -> int:
    return len(fn.get_concrete_function().graph.get_operations())


IMPLS = ("pfor", "tf.vectorized_map", "loop", "hand")


def _format(row):
    """One line: every implementation's ms per call, then the peers' times over pfor's."""
    t = row["times"]
    cells = [f"{row['model']:<19} {row['task']:<9} {row['batch']:>4}"]
    for impl in IMPLS:
        if impl in t:
            cells.append(f"{impl}={t[impl] * 1e3:9.1f} ms")
        elif impl in row["failed"]:
            cells.append(f"{impl}={row['failed'][impl]}")
    for peer in IMPLS[1:]:
        if "pfor" in t and peer in t:
            cells.append(f"x{peer.split('.')[-1]}={t[peer] / t['pfor']:.2f}")
    if row["diff"] is not None:
        cells.append(f"diff={row['diff']:.0e}")
    cells += [f"ops/op {impl}={ratio}" for impl, ratio in row["ops"].items()]
    return "  ".join(cells)


def _markdown(rows):
    lines = ["| model | task | batch | pfor ms | tf.vectorized_map ms | loop ms | hand ms | "
             "vs tf.vectorized_map | vs loop | ops/op pfor | ops/op TF |", "|" + " --- |" * 11]
    for row in rows:
        t = row["times"]
        ms = [f"{t[i] * 1e3:.1f}" if i in t else row["failed"].get(i, "") for i in IMPLS]
        ratios = [f"{t[p] / t['pfor']:.2f}x" if "pfor" in t and p in t else ""
                  for p in IMPLS[1:3]]
        ops = [str(row["ops"].get(i, "")) for i in IMPLS[:2]]
        lines.append(f"| {row['model']} | {row['task']} | {row['batch']} | "
                     + " | ".join(ms + ratios + ops) + " |")
    return "\n".join(lines)


def _run_child(name, args, journal):
    """One model's rows from a subprocess. TensorFlow's vectorizer crashes the process
    on some models (a segmentation fault on BERT, memory on ConvNeXt's gradients): then
    the model runs again from the step that crashed, which is marked and skipped (a crash
    while timing runs the cell again without TensorFlow's vectorizer)."""
    command = [sys.executable, os.path.abspath(__file__), "--models", name,
               "--tasks", *args.tasks, "--batch", *map(str, args.batch),
               "--size", str(args.size), "--budget", str(args.budget),
               "--threads", str(args.threads), "--json", journal]
    if args.without:
        command += ["--without", *args.without]
    skip, rows = [], []
    for _ in range(8):
        done = subprocess.run(command + ["--skip", *skip], check=False).returncode == 0
        records = []
        if os.path.exists(journal):
            with open(journal, encoding="utf-8") as lines:
                records = [json.loads(line) for line in lines]
            os.remove(journal)
        rows += [r["row"] for r in records if "row" in r]
        skip = sorted(set(skip) | {f"{r['task']}/{r['batch']}" for r in rows})
        steps = [r["step"] for r in records if "step" in r]
        if done or not steps:
            return rows
        crashed = steps[-1]
        print(f"{name}: {crashed} crashed the process; the rest runs again", flush=True)
        if crashed.endswith("/timing"):  # the one implementation seen crashing
            crashed = crashed.replace("/timing", "/tf.vectorized_map")
            if crashed in skip:
                return rows
        skip.append(crashed)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--tasks", nargs="+", default=["batching", "grads", "jacobian"],
                        choices=["batching", "grads", "jacobian"])
    parser.add_argument("--batch", nargs="+", type=int, default=[4, 32])
    parser.add_argument("--size", type=int, default=64, help="image side")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds per cell")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--without", nargs="+", default=[], choices=IMPLS[1:],
                        help="peers not to run (TensorFlow's vectorizer crashes on BERT and "
                        "leaves oneDNN broken for the kernels run after it in the process)")
    parser.add_argument("--out", help="also write the rows to this JSON file")
    parser.add_argument("--json", help=argparse.SUPPRESS)  # a child's journal
    parser.add_argument("--skip", nargs="*", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    if args.json:
        run(args.models[0], args.tasks, args.batch, args.size, args.budget, args.json,
            args.skip, args.without)
        return
    print(_bench.header("Real Keras models per example: pfor vs tf.vectorized_map vs a loop"))
    print("x<peer> = the peer's time over pfor's (above 1: pfor is faster)", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            rows += _run_child(name, args, os.path.join(folder, f"{name}.json"))
    print("\n" + _markdown(rows))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    main()
