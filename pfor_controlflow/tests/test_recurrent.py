"""Recurrent models: Keras 3 LSTM and GRU layers (inference and per-example
gradients), and jacobians through while loops (a dynamic RNN, a Keras LSTM), all with
fallback="error" against sequential references."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing


def _sequences(n, steps=5, dim=4, seed=0):
    return tf.random.stateless_normal([n, steps, dim], seed=[seed, 5])


def _layer(kind, return_sequences, units=6):
    keras.utils.set_random_seed(1)
    cls = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}[kind]
    layer = cls(units, return_sequences=return_sequences)
    layer.build((None, 5, 4))
    return layer


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("return_sequences", [True, False])
def test_keras_recurrent_inference(kind, return_sequences):
    layer, x = _layer(kind, return_sequences), _sequences(4)
    testing.assert_matches_loop(lambda i: layer(tf.gather(x, i)[None])[0], 4,
                                rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("return_sequences", [True, False])
def test_keras_recurrent_per_example_gradients(kind, return_sequences):
    layer, x = _layer(kind, return_sequences), _sequences(3, seed=1)
    y = tf.random.stateless_normal([3] + layer(x[:1]).shape[1:], seed=[2, 2])

    def loss_fn(xi, yi):
        return tf.reduce_sum((layer(xi[None])[0] - yi) ** 2)

    got = pf.per_example_gradients(loss_fn, layer.trainable_variables, x, y,
                                   fallback="error")
    for k in range(3):
        with tf.GradientTape() as tape:
            loss = loss_fn(x[k], y[k])
        for g, e in zip(got, tape.gradient(loss, layer.trainable_variables)):
            testing.assert_allclose(g[k], e, rtol=1e-4, atol=1e-5)


def _loop_jacobian(f, x):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = f(x)
    return tape.jacobian(y, x, experimental_use_pfor=False)


def _loop_hessian(f, x):
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = f(x)
        g = inner.gradient(y, x)
    return outer.jacobian(g, x, experimental_use_pfor=False)


def test_jacobian_through_a_dynamic_rnn():
    w = tf.random.stateless_normal([3, 3], seed=[3, 1]) * 0.5

    def rnn(x):  # x: [steps, 3]; a tf.while_loop over the time steps
        def step(t, h, outs):
            h = tf.tanh(tf.linalg.matvec(w, h) + x[t])
            return t + 1, h, outs.write(t, h)

        _, _, outs = tf.while_loop(lambda t, h, outs: t < tf.shape(x)[0], step,
                                   (0, tf.zeros([3]), tf.TensorArray(tf.float32, size=4)))
        return outs.stack()

    x = tf.random.stateless_normal([4, 3], seed=[3, 2])
    got = pf.jacobian(rnn, x, fallback="error")
    testing.assert_allclose(got, _loop_jacobian(rnn, x), rtol=1e-4, atol=1e-6)


def test_jacobian_through_a_keras_lstm():
    layer = _layer("lstm", True)
    x = _sequences(2, seed=4)
    got = pf.jacobian(layer, x, fallback="error")
    testing.assert_allclose(got, _loop_jacobian(layer, x), rtol=1e-4, atol=1e-6)


def test_batch_jacobian_through_a_keras_gru():
    layer = _layer("gru", False)
    x = _sequences(3, seed=5)
    got = pf.batch_jacobian(layer, x, fallback="error")
    expected = _loop_jacobian(layer, x)  # [3, 6, 3, 5, 4]: keep each example's block
    testing.assert_allclose(got, np.stack([expected[k, :, k] for k in range(3)]),
                            rtol=1e-4, atol=1e-6)


def test_vmap_and_map_fn_of_a_keras_gru():
    layer = _layer("gru", True)
    x = _sequences(3, seed=7)
    expected = tf.stack([layer(x[k][None])[0] for k in range(3)])
    one = lambda v: layer(v[None])[0]  # noqa: E731
    testing.assert_allclose(pf.vmap(one, fallback="error")(x), expected, rtol=1e-5, atol=1e-6)
    testing.assert_allclose(pf.map_fn(one, x, fallback="error"), expected, rtol=1e-5,
                            atol=1e-6)


def test_tape_jacobian_of_a_keras_lstm():
    layer = _layer("lstm", True)
    x = _sequences(2, seed=8)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = layer(x)
    got = pf.tape_jacobian(tape, y, x, fallback="error")
    testing.assert_allclose(got, tape.jacobian(y, x, experimental_use_pfor=False),
                            rtol=1e-4, atol=1e-6)


def test_hessian_through_a_while_loop():
    """Second order: the gradient loop (a tape's backward function, run as a call
    whose definition returns fewer values than its Python graph) is converted again."""
    w = tf.random.stateless_normal([3, 3], seed=[1, 2]) * 0.5

    def f(x):
        def step(t, h):
            return t + 1, tf.tanh(tf.linalg.matvec(w, h) + x)
        return tf.reduce_sum(tf.while_loop(lambda t, h: t < 3, step, (0, tf.zeros([3])))[1] ** 2)

    x = tf.random.stateless_normal([3], seed=[3, 4])
    got = pf.hessian(f, x, fallback="error")
    testing.assert_allclose(got, _loop_hessian(f, x), rtol=1e-4, atol=1e-6)


def test_hessian_through_a_keras_lstm():
    """Second order through Keras' while loop: the gradient loop's accumulators are
    lists of lists, and its gradient adds lists popped from them."""
    layer = _layer("lstm", False, units=3)
    x = _sequences(1, steps=3, dim=4, seed=6)[0]

    def f(v):
        return tf.reduce_sum(layer(v[None]) ** 2)

    got = pf.hessian(f, x, fallback="error")
    testing.assert_allclose(got, _loop_hessian(f, x), rtol=1e-3, atol=1e-5)
