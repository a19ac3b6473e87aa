"""Per-example weight gradients through loops: the per-step products are summed once
after the loop (deferred_sums.py), and the result equals the loop of tapes."""

from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing
from pfor_controlflow.loops import deferred_sums, while_loop


def _data(shape, seed):
    return tf.random.stateless_normal(shape, seed=[seed, 11])


def _deferred(body, n, compiled=False):
    """The loop variables whose sums were deferred, per converted loop; checks the
    result (under ``jit_compile=True`` when ``compiled``) against the loop."""
    found = []
    run = while_loop._run_invariant_deferring  # pylint: disable=protected-access

    def spy(loop, parallel, deferred):
        found.append(len(deferred))
        return run(loop, parallel, deferred)

    with mock.patch.object(while_loop, "_run_invariant_deferring", spy):
        if not compiled:
            testing.assert_matches_loop(body, n, rtol=1e-4, atol=1e-5)
            return found
        got = tf.function(lambda: pf.pfor(body, n, fallback="error"), jit_compile=True)()
    testing.assert_same_results(got, testing.sequential(body, n), rtol=1e-4, atol=1e-5)
    return found


@given(n=st.integers(1, 4), steps=st.integers(0, 4), d=st.integers(2, 4),
       seed=st.integers(0, 5))
@settings(max_examples=10)
def test_weights_used_several_ways_in_a_loop(n, steps, d, seed):
    """W enters the step three times (x @ W, W @ h, and W^T @ h): its gradient is a sum
    of three products with different transposes, every one deferred."""
    x = _data([n, d], seed)
    w = _data([d, d], seed + 1) * 0.5
    v = _data([d, d], seed + 2) * 0.5

    def body(i):
        xi = tf.gather(x, i)[None]  # [1, d]
        with tf.GradientTape() as tape:
            tape.watch([w, v])

            def step(t, h):
                h = tf.tanh(tf.matmul(h, w) + tf.transpose(tf.matmul(w, h, transpose_b=True))
                            + tf.matmul(h, w, transpose_b=True) + tf.matmul(xi, v))
                return t + 1, h

            _, h = tf.while_loop(lambda t, h: t < steps, step, (0, xi))
            loss = tf.reduce_sum(h * h)
        return tape.gradient(loss, [w, v], unconnected_gradients="zero")

    assert _deferred(body, n) == [2]  # the gradient loop: w's and v's sums


def test_thick_products_are_not_deferred():
    """Each example's rows here are 8 deep: the product is no outer product, so it is
    accumulated step by step as before."""
    x = _data([3, 8, 2], 0)
    w = _data([2, 2], 1)

    def body(i):
        xi = tf.gather(x, i)
        with tf.GradientTape() as tape:
            tape.watch(w)
            _, h = tf.while_loop(lambda t, h: t < 3,
                                 lambda t, h: (t + 1, tf.tanh(tf.matmul(h, w))), (0, xi))
            loss = tf.reduce_sum(h)
        return tape.gradient(loss, w)

    assert _deferred(body, 3) == []


def _keras_lstm_gradients(seed, units=4, dim=3):
    """A Keras LSTM layer and the body of its per-example weight gradients."""
    import keras  # pylint: disable=import-outside-toplevel
    layer = keras.layers.LSTM(units)
    layer.build((None, 5, dim))
    x = _data([3, 5, dim], seed)

    def body(i):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(tf.gather(x, i)[None]) ** 2)
        return tape.gradient(loss, layer.trainable_variables)

    return layer, body


def test_per_example_gradients_of_a_keras_lstm_defer_the_kernel_sums():
    layer, body = _keras_lstm_gradients(2)
    assert _deferred(body, 3)  # at least the kernel and recurrent kernel
    grads = pf.pfor(body, 3, fallback="error")
    assert [g.shape for g in grads] == [(3,) + tuple(v.shape)
                                        for v in layer.trainable_variables]
    np.testing.assert_allclose(grads[0], testing.sequential(body, 3)[0], rtol=1e-4, atol=1e-5)


@given(trips=st.lists(st.integers(0, 5), min_size=1, max_size=5), seed=st.integers(0, 5))
@settings(max_examples=10)
def test_weights_in_a_loop_with_per_iteration_trip_counts(trips, seed):
    """Each row's products are put at its own steps (zeros after it finished, or for a
    row that never ran) before the one batched matmul."""
    n = len(trips)
    x = _data([n, 3], seed)
    w = _data([3, 4], seed + 1) * 0.5
    u = _data([4, 3], seed + 2) * 0.5
    limits = tf.constant(trips)

    def body(i):
        xi = tf.gather(x, i)[None]
        with tf.GradientTape() as tape:
            tape.watch([w, u])

            def step(t, h):
                return t + 1, tf.tanh(tf.matmul(tf.tanh(tf.matmul(h, w)), u)) + xi

            _, h = tf.while_loop(lambda t, h: t < tf.gather(limits, i), step, (0, xi))
            loss = tf.reduce_sum(h * h)
        return tape.gradient(loss, [w, u], unconnected_gradients="zero")

    found = []
    find = deferred_sums.find
    with mock.patch.object(deferred_sums, "find", lambda loop: found.append(
            len(find(loop))) or find(loop)):
        testing.assert_matches_loop(body, n, rtol=1e-4, atol=1e-5)
    assert 2 in found  # the gradient loop: w's and u's sums


def _rnn_gradients(x, w, *, maximum_iterations):
    def body(i):
        xi = tf.gather(x, i)[None]
        with tf.GradientTape() as tape:
            tape.watch(w)
            _, h = tf.while_loop(lambda t, h: t < 3,
                                 lambda t, h: (t + 1, tf.tanh(tf.matmul(h, w)) + xi),
                                 (0, xi), maximum_iterations=maximum_iterations)
            loss = tf.reduce_sum(h * h)
        return tape.gradient(loss, w)
    return body


def test_sums_deferred_under_xla_where_the_steps_are_bounded():
    """Under XLA the steps' operands go to arrays sized by the loop's bound: the
    forward loop's ``maximum_iterations``, which its gradient loop receives."""
    x, w = _data([3, 16], 3), _data([16, 16], 4) * 0.2  # 5 steps of 16 + 16 < 16 x 16
    assert _deferred(_rnn_gradients(x, w, maximum_iterations=5), 3, compiled=True) == [1]


def test_keras_lstm_under_xla_defers_its_sums():
    """Keras bounds its loop by ``max`` of a static step count, read as a bound."""
    _, body = _keras_lstm_gradients(5, units=16, dim=8)  # 5 steps' operands < a sum
    assert _deferred(body, 3, compiled=True)


@pytest.mark.parametrize("per_iteration_steps", [False, True])
def test_a_zero_start_is_not_tiled(per_iteration_steps):
    """The gradient accumulator starts at zeros: no [n, p, q] copy of them is made
    (outside the branch taken when no step ran)."""
    x, w = _data([3, 4], 6), _data([4, 4], 7) * 0.5
    steps = tf.constant([2, 0, 3])

    def body(i):
        xi = tf.gather(x, i)[None]
        limit = tf.gather(steps, i) if per_iteration_steps else 3
        with tf.GradientTape() as tape:
            tape.watch(w)
            _, h = tf.while_loop(lambda t, h: t < limit,
                                 lambda t, h: (t + 1, tf.tanh(tf.matmul(h, w)) + xi), (0, xi))
            loss = tf.reduce_sum(h * h)
        return tape.gradient(loss, w, unconnected_gradients="zero")

    found = []
    find = deferred_sums.find
    with mock.patch.object(deferred_sums, "find", lambda loop: found.append(
            len(find(loop))) or find(loop)):
        testing.assert_matches_loop(body, 3, rtol=1e-4, atol=1e-5)
    assert 1 in found
    graph = tf.function(lambda: pf.pfor(body, 3, fallback="error")).get_concrete_function().graph
    tiled = [op for op in graph.get_operations() if op.type in ("BroadcastTo", "Tile")
             and op.outputs[0].shape == [3, 4, 4]]
    assert not tiled, tiled


def test_a_recurrence_written_with_scan_defers_its_sums():
    x = _data([3, 5, 4], 8)
    w, u = _data([4, 4], 9) * 0.5, _data([4, 4], 10) * 0.5

    def body(i):
        with tf.GradientTape() as tape:
            tape.watch([w, u])
            hs = tf.scan(lambda h, xt: tf.tanh(tf.matmul(h, w) + tf.matmul(xt[None], u)),
                         tf.gather(x, i), initializer=tf.zeros([1, 4]))
            loss = tf.reduce_sum(hs ** 2)
        return tape.gradient(loss, [w, u])

    assert _deferred(body, 3) == [2]


def test_a_generous_bound_under_xla_adds_step_by_step():
    """maximum_iterations=1000 for 3 steps: arrays of 1000 steps would outgrow the sum,
    so under XLA the sums are added step by step (same results)."""
    x, w = _data([3, 4], 11), _data([4, 4], 12) * 0.5
    assert _deferred(_rnn_gradients(x, w, maximum_iterations=1000), 3, compiled=True) == []
