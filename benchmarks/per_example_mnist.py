"""Per-example gradients of the paper's MNIST model: pf vs tf.vectorized_map vs a loop.

Two conv-relu-maxpool blocks, dense-relu-dropout-dense, 28x28 inputs (dropout in
inference mode). Run: .venv/bin/python benchmarks/per_example_mnist.py [--batch 128]
"""

import argparse
import time

import keras
import numpy as np
import tensorflow as tf

import pfor_core as pf


def build_model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([
        keras.Input([28, 28, 1]),
        keras.layers.Conv2D(32, 5, activation="relu"), keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(64, 5, activation="relu"), keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(), keras.layers.Dense(1024, activation="relu"),
        keras.layers.Dropout(0.5), keras.layers.Dense(10)])


def best_time(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        tf.nest.flatten(fn())[0].numpy()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()
    model, n = build_model(), args.batch
    x = tf.random.normal([n, 28, 28, 1], seed=1)
    y = tf.random.uniform([n], 0, 10, tf.int32, seed=2)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    variables = model.trainable_variables

    def loss_fn(xi, yi):
        return loss(yi, model(xi, training=False))

    def body(i):
        with tf.GradientTape() as tape:
            value = loss_fn(tf.gather(x, [i]), tf.gather(y, [i]))
        return tape.gradient(value, variables)

    ours = tf.function(lambda: pf.per_example_gradients(
        loss_fn, variables, x, y, keepdims=True, fallback="error"))
    builtin = tf.function(lambda: tf.vectorized_map(body, tf.range(n)))
    loop = tf.function(lambda: tf.map_fn(body, tf.range(n),
                                         fn_output_signature=[v.dtype for v in variables]))
    got, want = ours(), loop()
    rel = max(float(tf.reduce_max(tf.abs(a - b)) / tf.reduce_max(tf.abs(b)))
              for a, b in zip(got, want))
    t_ours, t_builtin, t_loop = best_time(ours, 5), best_time(builtin, 5), best_time(loop, 2)
    print(f"command: .venv/bin/python benchmarks/per_example_mnist.py --batch {n}")
    print(f"tensorflow {tf.__version__}; devices: "
          f"{[d.device_type for d in tf.config.list_physical_devices()]}")
    print(f"largest relative difference from the loop: {rel:.1e} "
          "(max-pool ties may route one example's gradient differently)")
    print(f"{'':24}{'ms/batch':>10}{'vs pf':>8}")
    for name, t in (("pf.per_example_gradients", t_ours), ("tf.vectorized_map", t_builtin),
                    ("tf.map_fn loop", t_loop)):
        print(f"{name:24}{t * 1e3:10.1f}{t / t_ours:7.2f}x")
    np.testing.assert_array_equal([g.shape[0] for g in got], [n] * len(got))


if __name__ == "__main__":
    main()
