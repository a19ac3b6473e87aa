"""Memory-bounded per-example gradients of the paper's MNIST model (per_example_mnist.py).

``pf.per_example_gradients(..., memory_budget=B)`` picks its chunk size from the
converted body's static shapes; this runs it against the unbounded call, side by side:
the chunk size chosen, peak memory above what was live before the call (TensorFlow's
CPU allocator), and examples per second. The per-example gradients themselves (the
output, 4.4 MB per example) are reported apart: the budget bounds what the call holds
beyond them. The dense layers' weight gradients are made after the chunks from the
small values the chunks return (pfor_core/chunk_tails.py), the others copied into the
output's buffer (pfor_core/chunk_buffers.py), so the peak holds the output once plus
the budget. The two calls of a batch are timed in turns. An unbounded run whose output alone would take more than half this
machine's memory is skipped. Run:
    .venv/bin/python benchmarks/memory_budget.py [--batch 512 1024 4096] [--budget-mib 1024]
    .venv/bin/python benchmarks/memory_budget.py --model conv --batch 512 --budget-mib 128
``--model conv`` is a small all-convolutional net on 32x32x3 images (three 3x3
convolutions of 32 channels, global average pooling, a dense layer): 20k parameters,
so its per-example gradients are small next to the work that makes them.
"""

import argparse
import os
import time

import keras
import tensorflow as tf

from _bench import header, peak_bytes, table  # pylint: disable=import-error
from per_example_mnist import build_model  # pylint: disable=import-error

import pfor_core as pf
from pfor_core import api


def best_times(fns, repeats=5):
    """Best seconds of each of ``fns``, run in turns: calls this large spend much of
    their time faulting in fresh pages, which varies from call to call."""
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for j, fn in enumerate(fns):
            start = time.perf_counter()
            tf.nest.flatten(fn())[0].numpy()
            best[j] = min(best[j], time.perf_counter() - start)
    return best


def conv_model():
    layers = [keras.Input([32, 32, 3])]
    layers += [keras.layers.Conv2D(32, 3, padding="same", activation="relu") for _ in range(3)]
    layers += [keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)]
    return keras.Sequential(layers)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, nargs="*", default=[512, 1024])
    parser.add_argument("--budget-mib", type=int, default=1024)
    parser.add_argument("--model", choices=("mnist", "conv"), default="mnist")
    args = parser.parse_args()
    model = build_model() if args.model == "mnist" else conv_model()
    image = [28, 28, 1] if args.model == "mnist" else [32, 32, 3]
    variables = model.trainable_variables
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    per_example = sum(v.shape.num_elements() for v in variables) * 4
    chosen = []
    real_fit = api._fit  # pylint: disable=protected-access
    api._fit = lambda *a, **k: chosen.append(real_fit(*a, **k)) or chosen[-1]
    rows = []
    mib = 1 << 20
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for n in args.batch:
        x = tf.random.normal([n] + image, seed=1)
        y = tf.random.uniform([n], 0, 10, tf.int32, seed=2)
        loss_fn = lambda xi, yi: loss(yi, model(xi, training=False))
        runs = []
        for label, budget in (("unbounded", None), (f"{args.budget_mib} MiB", args.budget_mib * mib)):
            if budget is None and per_example * n > memory / 2:
                continue
            fn = tf.function(lambda b=budget: pf.per_example_gradients(
                loss_fn, variables, x, y, keepdims=True, fallback="error", memory_budget=b))
            peak = peak_bytes(fn)
            chunk = api._balanced(chosen[-1][0], n) if budget else n  # pylint: disable=protected-access
            runs.append((label, budget, fn, peak, chunk))
        times = best_times([run[2] for run in runs])
        for (label, budget, _, peak, chunk), seconds in zip(runs, times):
            ratio = f"{times[0] / seconds:.2f}x" if budget and len(runs) == 2 else ""
            rows.append((n, label, chunk, f"{per_example * n / mib:,.0f}", f"{peak / mib:,.0f}",
                         f"{(peak - per_example * n) / mib:,.0f}", f"{n / seconds:,.0f}", ratio))
    print(header(f"Per-example gradients of the {args.model} model under a memory budget"))
    print(table(("batch", "budget", "chunk", "output MiB", "peak MiB",
                 "peak - output MiB", "examples/s", "vs unbounded"), rows))


if __name__ == "__main__":
    main()
