"""Calls of tf.functions inside the loop body convert inline, with no fallback."""

import tensorflow as tf
from hypothesis import given, strategies as st

from pfor_core import testing


@tf.function
def _scaled_tanh(v):
    return tf.tanh(v) * 2.0


@tf.function
def _outer(v):
    return _scaled_tanh(v) + tf.reduce_sum(v)


@tf.function
def _affine(w, v):
    return tf.linalg.matvec(w, v) + 1.0, tf.reduce_max(v)


def _data(n, m=3, seed=0):
    return tf.random.stateless_normal([n, m], seed=[seed, 1])


@given(n=st.integers(0, 4), m=st.integers(0, 4), graph=st.booleans())
def test_call_on_stacked_argument(n, m, graph):
    x = _data(n, m)
    testing.assert_matches_loop(lambda i: _scaled_tanh(tf.gather(x, i)), n, graph=graph)


@given(n=st.integers(0, 4), graph=st.booleans())
def test_nested_call(n, graph):
    x = _data(n)
    testing.assert_matches_loop(lambda i: _outer(tf.gather(x, i)), n, graph=graph)


@given(n=st.integers(0, 4), stack_w=st.booleans(), stack_v=st.booleans(), graph=st.booleans())
def test_call_with_invariant_and_stacked_arguments(n, stack_w, stack_v, graph):
    w_all = tf.random.stateless_normal([n, 2, 3], seed=[2, 3])
    w_one = tf.random.stateless_normal([2, 3], seed=[4, 5])
    x = _data(n)
    v_one = tf.constant([0.5, -1.0, 2.0])

    def body(i):
        w = tf.gather(w_all, i) if stack_w else w_one
        v = tf.gather(x, i) if stack_v else v_one
        return _affine(w, v)

    testing.assert_matches_loop(body, n, graph=graph)


@given(n=st.integers(0, 4), graph=st.booleans())
def test_stateful_call_reading_a_variable(n, graph):
    scale = tf.Variable([1.5, -2.0, 0.25])

    @tf.function
    def scaled(v):
        return v * scale.read_value() + scale

    x = _data(n)
    testing.assert_matches_loop(lambda i: scaled(tf.gather(x, i)), n, graph=graph)


@given(n=st.integers(0, 4), graph=st.booleans())
def test_call_with_all_invariant_arguments(n, graph):
    scale = tf.Variable(3.0)

    @tf.function
    def stateful(v):
        return v * scale

    x = _data(n)
    c = tf.constant([1.0, 2.0, 3.0])

    def body(i):
        return _scaled_tanh(c) + stateful(c) + tf.gather(x, i)

    testing.assert_matches_loop(body, n, graph=graph)


def test_call_returning_only_invariant_values_in_the_loop():
    scale = tf.Variable(2.0)

    @tf.function
    def stateful(v):
        return v * scale

    testing.assert_matches_loop(lambda i: stateful(tf.constant([1.0, 2.0])), 3, graph=True)


def test_legacy_defun_call_and_while():
    """function.Defun calls (an op whose type is the function's name) and a functional
    While of Defun bodies (what tf.nn.ctc_loss builds) convert inline; the bodies see
    the call site's shapes, which their definitions do not record."""
    from tensorflow.python.framework import function  # pylint: disable=import-outside-toplevel
    from tensorflow.python.ops import functional_ops  # pylint: disable=import-outside-toplevel

    @function.Defun(tf.float32)
    def scaled(v):
        return tf.reshape(v, [-1])[:2] * 3.0  # needs v's rank

    @function.Defun(tf.int32, tf.float32)
    def cond(k, v):  # pylint: disable=unused-argument
        return k < 3

    @function.Defun(tf.int32, tf.float32)
    def body(k, v):
        return k + 1, tf.concat([v[1:], v[:1]], 0) + tf.cast(k, tf.float32)

    x = _data(4)

    @tf.function(autograph=False)  # Defuns run only in graphs (the loop runs eagerly)
    def loop_fn(i):
        row = tf.gather(x, i)
        _, rolled = functional_ops.While([tf.constant(0), row], cond, body)
        return scaled(row), rolled

    testing.assert_matches_loop(loop_fn, 4, graph=True)
