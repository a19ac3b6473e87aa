"""Per-example gradients of an LSTM in four forms, against hand-written per-example code.

The model: an LSTM (input 128, state 256, T steps) over each example's sequence, a
dense head of 10 and cross-entropy. Four forms of the same model:

- ``unrolled``: the steps in a plain Python ``for t in range(T)``;
- ``while``: the steps in a ``tf.while_loop``;
- ``keras``: ``keras.layers.LSTM(256)`` (its while loop), then ``Dense(10)``;
- ``keras unroll``: the same with ``unroll=True``.

Columns, side by side in one run (``_bench.compare``):

- ``hand``: per-example gradients written by hand, as a user would for differential
  privacy: one batched forward pass, the gradient of the summed loss with respect to
  every step's pre-activations ``z_t`` (each example's rows only depend on its own
  loss), then each weight's per-example gradient as one contraction over the steps,
  ``einsum('bti,btj->bij', inputs, dz)``;
- ``summed``: the ordinary batch gradient of the summed loss, which never materializes
  per-example gradients: a floor on the cost, not a per-example method;
- ``tf.vectorized_map``: TensorFlow's vectorizer of the per-example tape;
- ``pfor``: ``pf.per_example_gradients(..., fallback="error")``.

``--xla`` adds every column under ``jit_compile=True``. Peak memory is what TensorFlow's
CPU allocator reports above what was live before one call. Every column is checked
against ``hand`` (``summed`` against the sum of its rows). Run:

    .venv/bin/python benchmarks/lstm_per_example.py [--batch 256] [--steps 10] [--xla]
"""

from __future__ import annotations

import argparse

from _bench import compare, header, peak_bytes, table  # pylint: disable=import-error  (sets TF's log level)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import pfor_core as pf  # noqa: E402

IN, STATE, CLASSES = 128, 256, 10
FORMS = ("unrolled", "while", "keras", "keras unroll")


def _step(x_t, h, c, kernel, recurrent, bias):
    """One LSTM step in Keras's gate order (i, f, c, o); returns (z, h, c)."""
    z = tf.matmul(x_t, kernel) + tf.matmul(h, recurrent) + bias
    i, f, g, o = tf.split(z, 4, axis=-1)
    c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
    return z, tf.sigmoid(o) * tf.tanh(c), c


def _xent(y, logits):
    return tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))


class Model:
    """The weights, and the model's loss in each form."""

    def __init__(self, steps, seed=0):
        rng = np.random.default_rng(seed)
        init = lambda shape, fan: tf.Variable(  # noqa: E731
            (rng.normal(size=shape) * fan ** -0.5).astype(np.float32))
        self.steps = steps
        self.kernel = init([IN, 4 * STATE], IN)
        self.recurrent = init([STATE, 4 * STATE], STATE)
        self.bias = tf.Variable(tf.zeros([4 * STATE]))
        self.head = init([STATE, CLASSES], STATE)
        self.head_bias = tf.Variable(tf.zeros([CLASSES]))
        self.variables = [self.kernel, self.recurrent, self.bias, self.head, self.head_bias]
        self.keras = {}
        for form, unroll in (("keras", False), ("keras unroll", True)):
            lstm = keras.layers.LSTM(STATE, unroll=unroll)
            dense = keras.layers.Dense(CLASSES)
            model = keras.Sequential([keras.Input([steps, IN]), lstm, dense])
            lstm.cell.kernel.assign(self.kernel)
            lstm.cell.recurrent_kernel.assign(self.recurrent)
            lstm.cell.bias.assign(self.bias)
            dense.kernel.assign(self.head)
            dense.bias.assign(self.head_bias)
            self.keras[form] = model

    def weights(self, form):
        if form in self.keras:
            return self.keras[form].trainable_variables
        return self.variables

    def loss(self, form, x, y):
        """The summed loss of a batch x [k, T, IN], y [k]."""
        if form in self.keras:
            return _xent(y, self.keras[form](x))
        zeros = tf.zeros([tf.shape(x)[0], STATE])
        weights = (self.kernel, self.recurrent, self.bias)
        if form == "unrolled":
            h, c = zeros, zeros
            for t in range(self.steps):
                _, h, c = _step(x[:, t], h, c, *weights)
        else:
            def body(t, h, c):
                _, h, c = _step(tf.gather(x, t, axis=1), h, c, *weights)
                return t + 1, h, c
            _, h, c = tf.while_loop(lambda t, h, c: t < self.steps, body,
                                    (0, zeros, zeros), maximum_iterations=self.steps)
        return _xent(y, h @ self.head + self.head_bias)

    def hand(self, x, y):
        """Per-example gradients by hand: dz_t of the summed loss, then contractions."""
        batch = tf.shape(x)[0]
        h = c = tf.zeros([batch, STATE])
        hs, zs = [], []
        with tf.GradientTape() as tape:
            for t in range(self.steps):
                hs.append(h)
                z, h, c = _step(x[:, t], h, c, self.kernel, self.recurrent, self.bias)
                zs.append(z)
            logits = h @ self.head + self.head_bias
            loss = _xent(y, logits)
        dzs, dlogits = tape.gradient(loss, [zs, logits])
        dz = tf.stack(dzs, 1)                                   # [B, T, 4 STATE]
        return [tf.einsum("bti,btj->bij", x, dz),
                tf.einsum("bti,btj->bij", tf.stack(hs, 1), dz),
                tf.reduce_sum(dz, 1),
                tf.einsum("bi,bj->bij", h, dlogits),
                dlogits]

    def summed(self, form, x, y):
        with tf.GradientTape() as tape:
            loss = self.loss(form, x, y)
        return tape.gradient(loss, self.weights(form))

    def builtin(self, form, x, y):
        def body(i):
            with tf.GradientTape() as tape:
                loss = self.loss(form, tf.gather(x, [i]), tf.gather(y, [i]))
            return tape.gradient(loss, self.weights(form))
        return tf.vectorized_map(body, tf.range(tf.shape(x)[0]))

    def pfor(self, form, x, y):
        return pf.per_example_gradients(lambda xi, yi: self.loss(form, xi, yi),
                                        self.weights(form), x, y, keepdims=True,
                                        fallback="error")


def _check(name, got, want, summed=False):
    want = [tf.reduce_sum(w, 0) if summed else w for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=2e-3, atol=2e-4,
                                   err_msg=name)


def run_form(model, form, x, y, xla, budget):
    fns = {"hand": lambda: model.hand(x, y),
           "summed": lambda: model.summed(form, x, y),
           "tf.vectorized_map": lambda: model.builtin(form, x, y),
           "pfor": lambda: model.pfor(form, x, y)}
    compiled = {}
    for name, fn in fns.items():
        compiled[name] = tf.function(fn)
        if xla:
            compiled[name + " (XLA)"] = tf.function(fn, jit_compile=True)
    reference = compiled["hand"]()
    failed = {}
    for name, fn in list(compiled.items()):
        try:
            got = fn()
        except (tf.errors.OpError, ValueError, pf.ConversionError) as err:
            failed[name] = type(err).__name__  # e.g. the built-in's loops under XLA
            del compiled[name]
            continue
        _check(f"{form}: {name}", got, reference, summed=name.startswith("summed"))
    seconds = compare(compiled, budget=budget)
    peaks = {name: peak_bytes(fn) for name, fn in compiled.items()}
    return seconds, peaks, failed


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--forms", nargs="*", default=list(FORMS), choices=FORMS)
    parser.add_argument("--xla", action="store_true")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds per column")
    args = parser.parse_args()
    model = Model(args.steps)
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=[args.batch, args.steps, IN]).astype(np.float32))
    y = tf.constant(rng.integers(0, CLASSES, size=[args.batch]).astype(np.int32))
    rows = []
    mib = 1 << 20
    for form in args.forms:
        seconds, peaks, failed = run_form(model, form, x, y, args.xla, args.budget)
        rows += [(form, name, f"fails ({why})", "", "", "") for name, why in failed.items()]
        for name in seconds:
            hand = "hand (XLA)" if name.endswith("(XLA)") else "hand"
            rows.append((form, name, f"{args.batch / seconds[name]:,.0f}",
                         f"{seconds[hand] / seconds[name]:.2f}x",
                         f"{peaks[name] / mib:,.1f}",
                         f"{peaks[name] / max(peaks[hand], 1):.2f}x"))
    print(header(f"Per-example gradients of an LSTM ({args.steps} steps, batch {args.batch})"))
    print(table(("form", "implementation", "examples/s", "/ hand", "peak MiB",
                 "peak / hand"), rows))


if __name__ == "__main__":
    main()
