"""Jacobians, hessians and per-example gradients against sequential references
(TensorFlow's own tape computing one row at a time in a loop), with no fallback."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing

RNG = np.random.default_rng(0)
W = tf.constant(RNG.standard_normal([3, 4]).astype(np.float32))


def f_matrix(x):
    return tf.tanh(tf.matmul(x, W)) * tf.reduce_sum(x ** 2)


def loop_jacobian(f, x):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = f(x)
    return tape.jacobian(y, x, experimental_use_pfor=False)


@given(rows=st.integers(1, 3), seed=st.integers(0, 99))
def test_jacobian_matches_the_loop(rows, seed):
    x = tf.constant(np.random.default_rng(seed).standard_normal([rows, 3]).astype(np.float32))
    got = pf.jacobian(f_matrix, x, fallback="error")
    assert got.shape == [rows, 4, rows, 3]
    testing.assert_allclose(got, loop_jacobian(f_matrix, x), rtol=1e-4, atol=1e-5)


def test_jacobian_of_structures_and_variables():
    v = tf.Variable(RNG.standard_normal([3]).astype(np.float32))
    u = tf.constant(RNG.standard_normal([2, 3]).astype(np.float32))

    def f(xs):
        return {"a": tf.linalg.matvec(xs["u"], xs["v"]), "b": tf.exp(xs["v"])}

    got = pf.jacobian(f, {"u": u, "v": v}, fallback="error")
    assert got["a"]["u"].shape == [2, 2, 3] and got["b"]["v"].shape == [3, 3]
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(u)
        y = f({"u": u, "v": v})
    for key in ("a", "b"):
        want = tape.jacobian(y[key], {"u": u, "v": v}, experimental_use_pfor=False,
                             unconnected_gradients=tf.UnconnectedGradients.ZERO)
        testing.assert_allclose(got[key]["u"], want["u"], rtol=1e-5, atol=1e-6)
        testing.assert_allclose(got[key]["v"], want["v"], rtol=1e-5, atol=1e-6)


def test_batch_jacobian_matches_the_loop():
    x = tf.constant(RNG.standard_normal([5, 3]).astype(np.float32))
    got = pf.batch_jacobian(lambda x: tf.tanh(tf.matmul(x, W)), x, fallback="error")
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tf.tanh(tf.matmul(x, W))
    want = tape.batch_jacobian(y, x, experimental_use_pfor=False)
    testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scalar", [True, False])
def test_hessian_matches_the_loop(scalar):
    x = tf.constant(RNG.standard_normal([3]).astype(np.float64))
    w = tf.constant(RNG.standard_normal([3, 2]))

    def f(x):
        y = tf.sin(tf.linalg.matvec(w, x, transpose_a=True)) * tf.reduce_sum(x ** 3)
        return tf.reduce_sum(y) if scalar else y

    got = pf.hessian(f, x, fallback="error")
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tf.GradientTape(persistent=True) as inner:
            inner.watch(x)
            y = f(x)
        first = inner.jacobian(y, x, experimental_use_pfor=False)
    want = outer.jacobian(first, x, experimental_use_pfor=False)
    assert got.shape == y.shape + x.shape + x.shape
    testing.assert_allclose(got, want)


def test_tape_drop_ins():
    x = tf.constant(RNG.standard_normal([4, 3]).astype(np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tf.tanh(tf.matmul(x, W))
    testing.assert_allclose(pf.tape_jacobian(tape, y, x, fallback="error"),
                            tape.jacobian(y, x, experimental_use_pfor=False), atol=1e-6)
    testing.assert_allclose(pf.tape_batch_jacobian(tape, y, x, fallback="error"),
                            tape.batch_jacobian(y, x, experimental_use_pfor=False), atol=1e-6)


def test_forward_pass_is_computed_once():
    x = tf.constant(RNG.uniform(1, 2, [6, 3]).astype(np.float32))

    def f(x):
        return tf.math.lgamma(x) * 2.0  # Lgamma only appears in the forward pass

    graph = tf.function(lambda x: pf.jacobian(f, x, fallback="error"),
                        autograph=False).get_concrete_function(x).graph
    forward = [op for op in graph.get_operations() if op.type == "Lgamma"]
    inner = [op for fn in graph._functions.values()  # pylint: disable=protected-access
             for op in fn.graph.get_operations() if op.type == "Lgamma"] \
        if hasattr(graph, "_functions") else []
    assert len(forward) + len(inner) == 1
    assert (forward or inner)[0].outputs[0].shape == x.shape  # not batched, not looped


def test_per_example_gradients_mean_is_the_batch_gradient():
    x = tf.constant(RNG.standard_normal([6, 3]).astype(np.float32))
    t = tf.constant(RNG.standard_normal([6, 4]).astype(np.float32))
    w = tf.Variable(RNG.standard_normal([3, 4]).astype(np.float32))
    b = tf.Variable(np.zeros([4], np.float32))

    def loss_fn(xi, ti):
        return tf.reduce_sum((tf.linalg.matvec(w, xi, transpose_a=True) + b - ti) ** 2)

    grads = pf.per_example_gradients(loss_fn, [w, b], x, t, fallback="error")
    assert grads[0].shape == [6, 3, 4] and grads[1].shape == [6, 4]
    with tf.GradientTape() as tape:
        mean_loss = tf.reduce_mean(tf.map_fn(lambda e: loss_fn(*e), (x, t),
                                             fn_output_signature=tf.float32))
    batch = tape.gradient(mean_loss, [w, b])
    for per_example, whole in zip(grads, batch):
        testing.assert_allclose(tf.reduce_mean(per_example, 0), whole, rtol=1e-5, atol=1e-5)
    for k in range(6):
        with tf.GradientTape() as tape:
            loss = loss_fn(x[k], t[k])
        for per_example, one in zip(grads, tape.gradient(loss, [w, b])):
            testing.assert_allclose(per_example[k], one, rtol=1e-5, atol=1e-5)


def test_per_example_gradients_of_a_keras_model():
    model = keras.Sequential([keras.Input([3]), keras.layers.Dense(5),
                              keras.layers.Dense(2)])
    x = tf.constant(RNG.standard_normal([4, 3]).astype(np.float32))
    y = tf.constant(RNG.standard_normal([4, 2]).astype(np.float32))

    def loss_fn(xi, yi):  # keepdims: the model gets a batch of one
        return tf.reduce_mean((model(xi) - yi) ** 2)

    grads = pf.per_example_gradients(loss_fn, model.trainable_variables, x, y,
                                     keepdims=True, fallback="error")
    for k in range(4):
        with tf.GradientTape() as tape:
            loss = loss_fn(x[k:k + 1], y[k:k + 1])
        for per_example, one in zip(grads, tape.gradient(loss, model.trainable_variables)):
            testing.assert_allclose(per_example[k], one, rtol=1e-5, atol=1e-5)


def test_bad_arguments_name_the_argument():
    with pytest.raises(TypeError, match="f must be callable"):
        pf.jacobian(3, tf.ones([2]))
    with pytest.raises(TypeError, match="x must be a tensor"):
        pf.jacobian(tf.exp, [1.0, 2.0])
    with pytest.raises(ValueError, match="batch tensor"):
        pf.per_example_gradients(lambda: 0.0, [tf.Variable(1.0)])
    with pytest.raises(ValueError, match="fallback"):
        pf.hessian(tf.exp, tf.ones([2]), fallback="never")
