"""``jit_compile=True`` on the derivatives: the vectorized computation is its own XLA
function (also inside an uncompiled ``tf.function``), with the results of the loop."""

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing

W = tf.Variable(np.random.default_rng(0).standard_normal([4, 4]).astype(np.float32) * 0.5)
X = tf.constant(np.random.default_rng(1).standard_normal([3, 4]).astype(np.float32))


def _rnn(v):
    """A small recurrence in a bounded while loop (what XLA speeds up most)."""
    _, h = tf.while_loop(lambda t, h: t < 3, lambda t, h: (t + 1, tf.tanh(h @ W + v)),
                         (0, v), maximum_iterations=3)
    return h


def _tape_loop(f, x, batch=False):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = f(x)
    if batch:
        return tape.batch_jacobian(y, x, experimental_use_pfor=False)
    return tape.jacobian(y, x, experimental_use_pfor=False)


def _compiled_calls(fn, *args):
    graph = tf.function(fn).get_concrete_function(*args).graph
    return [op for op in graph.get_operations()
            if op.type in ("PartitionedCall", "StatefulPartitionedCall")
            and op.get_attr("_XlaMustCompile")]


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_jacobian(mode):
    # (TensorFlow's forward mode does not go through a while loop's tensor lists.)
    f = ((lambda v: _rnn(v[None])[0] ** 2) if mode == "reverse"
         else (lambda v: tf.tanh(tf.linalg.matvec(W, v)) ** 2))
    got = pf.jacobian(f, X[0], fallback="error", mode=mode, jit_compile=True)
    assert got.shape == [4, 4]
    testing.assert_same_results(got, _tape_loop(f, X[0]), rtol=1e-4, atol=1e-5)


def test_batch_jacobian_inside_a_function_compiles_that_part():
    run = lambda x: pf.batch_jacobian(_rnn, x, fallback="error", jit_compile=True)  # noqa: E731
    testing.assert_same_results(tf.function(run)(X), _tape_loop(_rnn, X, batch=True),
                                rtol=1e-4, atol=1e-5)
    assert len(_compiled_calls(run, X)) == 1


def test_hessian():
    f = lambda v: tf.reduce_sum(tf.tanh(tf.linalg.matvec(W, v)) ** 3)  # noqa: E731

    def gradient(v):
        with tf.GradientTape() as inner:
            inner.watch(v)
            y = f(v)
        return inner.gradient(y, v)

    got = pf.hessian(f, X[0], fallback="error", jit_compile=True)
    assert got.shape == [4, 4]
    testing.assert_same_results(got, _tape_loop(gradient, X[0]), rtol=1e-3, atol=1e-4)


def test_hessian_through_a_while_loop_is_a_clear_error_under_xla():
    """The converted gradient loop's accumulators have no fixed size, which XLA refuses:
    a clear error saying what to do, and the same call without XLA is the loop's."""
    f = lambda v: tf.reduce_sum(_rnn(v[None]) ** 2)  # noqa: E731
    with pytest.raises(pf.ConversionError, match="jit_compile=False"):
        pf.hessian(f, X[0], fallback="error", jit_compile=True)
    got = pf.hessian(f, X[0], fallback="error")
    assert got.shape == [4, 4]

    def gradient(v):
        with tf.GradientTape() as inner:
            inner.watch(v)
            y = f(v)
        return inner.gradient(y, v)

    testing.assert_same_results(got, _tape_loop(gradient, X[0]), rtol=1e-4, atol=1e-5)


def test_per_example_gradients():
    loss = lambda x: tf.reduce_sum(_rnn(x[None]) ** 2)  # noqa: E731
    got = pf.per_example_gradients(loss, [W], X, fallback="error", jit_compile=True)
    assert got[0].shape == [3, 4, 4]

    def one(j):
        with tf.GradientTape() as tape:
            value = loss(X[j])
        return tape.gradient(value, W)

    testing.assert_same_results(got[0], tf.stack([one(j) for j in range(3)]),
                                rtol=1e-4, atol=1e-5)
