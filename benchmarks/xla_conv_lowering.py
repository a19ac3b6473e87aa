"""Could pfor lower convolutions differently under XLA? (issue 16, "XLA is never a trap")

Under ``jit_compile=True`` the MNIST and VGG workloads run slower than without XLA, the
hand-batched code too: XLA's CPU convolutions are slower than oneDNN's. pfor could only
help by emitting another form when compiling; this times the two convolutions of the
MNIST model (batch 128) as TensorFlow's ``Conv2D`` and as the two forms an im2col
lowering could take (``extract_patches`` and a matmul; stacked shifted slices and one
2-D matmul), each with and without XLA, and the filter gradient likewise. Best of 7.
Run: .venv/bin/python benchmarks/xla_conv_lowering.py
"""

import time

import tensorflow as tf

from _bench import header, table  # pylint: disable=import-error

LAYERS = ((128, 28, 1, 5, 32), (128, 12, 32, 5, 64))  # batch, side, in, kernel, out


def best_ms(fn, *args, repeats=7):
    fn(*args)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args).numpy()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def forms(side, k, c, o):
    out = side - k + 1

    def conv(x, w):
        return tf.nn.conv2d(x, w, 1, "VALID")

    def patches(x, w):
        p = tf.image.extract_patches(x, [1, k, k, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID")
        return tf.einsum("bhwp,po->bhwo", p, tf.reshape(w, [k * k * c, o]))

    def slices(x, w):  # patches in (row, column, channel) order, as the filter's
        p = tf.concat([x[:, a:a + out, b:b + out, :] for a in range(k) for b in range(k)], -1)
        flat = tf.reshape(p, [-1, k * k * c]) @ tf.reshape(w, [k * k * c, o])
        return tf.reshape(flat, [-1, out, out, o])

    def filter_grad(x, dy):
        return tf.compat.v1.nn.conv2d_backprop_filter(x, [k, k, c, o], dy, [1, 1, 1, 1],
                                                      "VALID")

    def filter_grad_slices(x, dy):
        p = tf.concat([x[:, a:a + out, b:b + out, :] for a in range(k) for b in range(k)], -1)
        grad = tf.matmul(tf.reshape(p, [-1, k * k * c]), tf.reshape(dy, [-1, o]),
                         transpose_a=True)
        return tf.reshape(grad, [k, k, c, o])

    return (("Conv2D", conv), ("extract_patches + matmul", patches),
            ("slices + matmul", slices)), (("Conv2DBackpropFilter", filter_grad),
                                           ("slices + matmul", filter_grad_slices))


def main():
    rows = []
    for batch, side, c, k, o in LAYERS:
        x = tf.random.normal([batch, side, side, c], seed=1)
        w = tf.random.normal([k, k, c, o], seed=2)
        dy = tf.random.normal([batch, side - k + 1, side - k + 1, o], seed=3)
        forward, backward = forms(side, k, c, o)
        shape = f"{batch}x{side}x{side}x{c}, {k}x{k}x{c}x{o}"
        for what, cases, second in (("conv", forward, w), ("filter gradient", backward, dy)):
            reference = cases[0][1](x, second)
            for name, fn in cases:
                tf.debugging.assert_near(fn(x, second), reference, rtol=1e-3, atol=1e-2)
                plain = best_ms(tf.function(fn), x, second)
                xla = best_ms(tf.function(fn, jit_compile=True), x, second)
                rows.append((shape, what, name, f"{plain:.2f}", f"{xla:.2f}"))
    print(header("Convolutions of the MNIST model, with and without XLA (ms, best of 7)"))
    print(table(("layer", "op", "form", "ms", "ms (XLA)"), rows))


if __name__ == "__main__":
    main()
