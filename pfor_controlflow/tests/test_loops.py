"""tf.while_loop in the body: invariant and per-iteration trip counts (including zero),
loop variables that become stacked, maximum_iterations, XLA, all without fallback."""

from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing
from pfor_controlflow.loops import masking


def _data(shape, seed=0):
    return tf.random.stateless_normal(shape, seed=[seed, 3])


def _strategy(masked):
    """Make a loop with per-iteration trip counts run masked or on the active subset,
    whatever masking.pays would choose."""
    return mock.patch.object(masking, "pays", lambda loop: masked)


@settings(max_examples=20)  # each example converts and runs a loop (suite time)
@given(data=st.data(), n=st.integers(0, 6), m=st.integers(1, 3), graph=st.booleans(),
       stacked_trips=st.booleans(), stacked_start=st.booleans(), masked=st.booleans())
def test_random_trip_counts(data, n, m, graph, stacked_trips, stacked_start, masked):
    trips = tf.constant(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)) or [0],
                        tf.int32)
    x = _data([max(n, 1), m])
    w = _data([m, m], seed=1) * 0.5

    def body(i):
        xi = tf.gather(x, i)
        limit = tf.gather(trips, i) if stacked_trips else tf.constant(3)
        h0 = xi if stacked_start else tf.zeros([m])

        def step(t, h, acc):
            h = tf.tanh(tf.linalg.matvec(w, h) + xi)
            return t + 1, h, acc + tf.cast(t, tf.float32)

        return tf.while_loop(lambda t, h, acc: t < limit, step, (0, h0, 0.0))

    with _strategy(masked):
        testing.assert_matches_loop(body, n, graph=graph)


@settings(max_examples=20)  # each example converts and runs a loop (suite time)
@given(n=st.integers(0, 5), max_iters=st.integers(0, 4), graph=st.booleans(),
       masked=st.booleans())
def test_maximum_iterations(n, max_iters, graph, masked):
    x = _data([max(n, 1), 2])
    trips = tf.constant([5, 0, 2, 7, 1])

    def body(i):
        xi = tf.gather(x, i)
        return tf.while_loop(lambda t, h: t < tf.gather(trips, i % 5),
                             lambda t, h: (t + 1, h * 0.5 + xi), (0, xi),
                             maximum_iterations=max_iters)

    with _strategy(masked):
        testing.assert_matches_loop(body, n, graph=graph)


def test_variable_becomes_stacked_after_several_steps():
    x = _data([4, 2])

    def body(i):
        xi = tf.gather(x, i)
        # c only turns per-iteration through b: the fixed point needs two rounds.
        def step(t, a, b, c):
            return t + 1, a, a + xi, c + b

        return tf.while_loop(lambda t, *_: t < 3, step,
                             (0, tf.ones([2]), tf.zeros([2]), tf.zeros([2])))

    testing.assert_matches_loop(body, 4, graph=True)


def test_loop_with_invariant_everything_but_a_side_effect():
    v = tf.Variable(0.0)
    x = _data([4])

    def body(i):
        xi = tf.gather(x, i)
        tf.while_loop(lambda t: t < 3, lambda t: (v.assign_add(xi) * 0 + 1 + t), (0.0,))
        return xi

    pf.pfor(body, 4, fallback="error")
    np.testing.assert_allclose(v.numpy(), 3 * float(tf.reduce_sum(x)), rtol=1e-5)


def _dynamic_lstm(inputs, lengths, weights, bias, state, max_iterations=None):
    """The paper's dynamic LSTM body: example i runs lengths[i] steps, no padding."""
    def body(i):
        x = tf.gather(inputs, i)
        steps = tf.gather(lengths, i)

        def step(t, h, c):
            z = tf.matmul(tf.concat([x[t], h], 0)[None], weights)[0] + bias
            f, g, o, u = tf.split(z, 4)
            c = tf.sigmoid(f) * c + tf.sigmoid(u) * tf.tanh(g)
            return t + 1, tf.sigmoid(o) * tf.tanh(c), c

        _, h, c = tf.while_loop(lambda t, h, c: t < steps, step,
                                (0, tf.zeros([state]), tf.zeros([state])),
                                maximum_iterations=max_iterations)
        return h, c
    return body


def _lstm_data(batch, dim, state, max_len, seed=0):
    inputs = _data([batch, max_len, dim], seed)
    lengths = tf.random.stateless_uniform([batch], [seed, 9], 1, max_len + 1, tf.int32)
    weights = _data([dim + state, 4 * state], seed + 1) / np.sqrt(dim + state)
    bias = _data([4 * state], seed + 2) * 0.1
    return inputs, lengths, weights, bias


def test_paper_dynamic_lstm():
    inputs, lengths, weights, bias = _lstm_data(6, 128, 256, 100)
    body = _dynamic_lstm(inputs, lengths, weights, bias, 256)
    testing.assert_matches_loop(body, 6, rtol=1e-4, atol=1e-5)


def test_dynamic_lstm_under_xla():
    inputs, lengths, weights, bias = _lstm_data(5, 8, 16, 12)
    body = _dynamic_lstm(inputs, lengths, weights, bias, 16)
    compiled = tf.function(lambda: pf.pfor(body, 5, fallback="error"), jit_compile=True)
    h, c = compiled()
    for j in range(5):
        hj, cj = body(tf.constant(j))
        np.testing.assert_allclose(h[j], hj, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(c[j], cj, rtol=1e-4, atol=1e-5)


def test_while_in_nested_pfor():
    x = _data([3, 4, 2])
    trips = tf.constant([[1, 0, 3, 2], [2, 2, 0, 1], [4, 1, 1, 0]])

    def outer(i):
        def inner(j):
            xij = x[i, j]
            return tf.while_loop(lambda t, h: t < trips[i, j],
                                 lambda t, h: (t + 1, h * 2.0 + xij), (0, xij))[1]
        return pf.pfor(inner, 4, fallback="error")

    testing.assert_matches_loop(outer, 3)


def _per_example_lstm_gradients(inputs, lengths, weights, bias, state, max_iterations=None):
    forward = _dynamic_lstm(inputs, lengths, weights, bias, state, max_iterations)

    def body(i):
        with tf.GradientTape() as tape:
            tape.watch([weights, bias])
            h, _ = forward(i)
            loss = tf.reduce_sum(h * h)
        return tape.gradient(loss, [weights, bias], unconnected_gradients="zero")
    return body


@given(data=st.data(), n=st.integers(0, 5), masked=st.booleans())
@settings(max_examples=8)  # each example traces a forward and a gradient loop
def test_gradients_through_per_iteration_trip_counts(data, n, masked):
    """Per-example gradients of the dynamic LSTM: the forward loop's accumulators are
    pushed for the active rows only and popped by a gradient loop with its own
    per-iteration trip counts (lengths include 0)."""
    inputs, _, weights, bias = _lstm_data(max(n, 1), 3, 4, 5, seed=data.draw(st.integers(0, 9)))
    lengths = tf.constant(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)) or [0])
    body = _per_example_lstm_gradients(inputs, lengths, weights, bias, 4)
    with _strategy(masked):
        testing.assert_matches_loop(body, n, rtol=1e-4, atol=1e-5,
                                    graph=data.draw(st.booleans()))


def test_per_example_gradients_through_per_iteration_trip_counts_under_xla():
    """XLA needs maximum_iterations for a gradient's accumulators (TensorFlow's rule),
    reserves that many items and reports it as the list's length: the masked loop
    counts each row's pushes itself."""
    inputs, _, weights, bias = _lstm_data(4, 3, 4, 6, seed=5)
    lengths = tf.constant([2, 0, 6, 3])
    body = _per_example_lstm_gradients(inputs, lengths, weights, bias, 4, max_iterations=6)
    got = tf.function(lambda: pf.pfor(body, 4, fallback="error"), jit_compile=True)()
    testing.assert_same_results(got, testing.sequential(body, 4), rtol=1e-4, atol=1e-5)


def test_gradients_through_invariant_trip_counts():
    x = _data([4, 3])
    w = _data([3, 3], seed=2) * 0.5

    def body(i):
        xi = tf.gather(x, i)
        with tf.GradientTape() as tape:
            tape.watch(w)
            _, h = tf.while_loop(lambda t, h: t < 4,
                                 lambda t, h: (t + 1, tf.tanh(tf.linalg.matvec(w, h) + xi)),
                                 (0, xi))
            loss = tf.reduce_sum(h)
        return tape.gradient(loss, w)

    testing.assert_matches_loop(body, 4, graph=True, rtol=1e-5)


def test_paper_dynamic_lstm_per_example_gradients():
    inputs, lengths, weights, bias = _lstm_data(4, 128, 256, 100, seed=3)
    body = _per_example_lstm_gradients(inputs, lengths, weights, bias, 256)
    testing.assert_matches_loop(body, 4, rtol=1e-3, atol=1e-5)


@given(n=st.integers(0, 4), graph=st.booleans())
def test_tensor_array_written_in_a_loop_with_per_iteration_trip_counts(n, graph):
    x = _data([max(n, 1), 2])
    trips = tf.constant([3, 0, 4, 1])

    def body(i):
        xi = tf.gather(x, i)

        def step(t, h, ta):
            h = h * 0.5 + xi
            return t + 1, h, ta.write(t, h)

        _, _, ta = tf.while_loop(lambda t, h, ta: t < tf.gather(trips, i % 4), step,
                                 (0, xi, tf.TensorArray(tf.float32, size=4, element_shape=[2])))
        return ta.stack()

    testing.assert_matches_loop(body, n, graph=graph)


@given(n=st.integers(0, 4), graph=st.booleans())
@settings(max_examples=10)
def test_nested_loops_with_per_iteration_trip_counts(n, graph):
    """An inner loop (its own per-iteration trip count) inside an outer one."""
    x = _data([max(n, 1), 2])
    outer_trips, inner_trips = tf.constant([2, 0, 3, 1]), tf.constant([1, 3, 0, 2])

    def body(i):
        xi = tf.gather(x, i)

        def outer_step(t, h):
            _, h = tf.while_loop(lambda s, h: s < tf.gather(inner_trips, i % 4),
                                 lambda s, h: (s + 1, h * 0.5 + xi), (0, h))
            return t + 1, h + 1.0

        return tf.while_loop(lambda t, h: t < tf.gather(outer_trips, i % 4), outer_step,
                             (0, xi))

    testing.assert_matches_loop(body, n, graph=graph)


def test_list_of_an_outer_loop_written_in_an_inner_loop_runs_in_the_fallback():
    """No converter takes it (a clear error); the fallback loop slices each row's list."""
    x = _data([3, 2])
    trips = tf.constant([2, 1, 3])

    def body(i):
        xi = tf.gather(x, i)

        def outer_step(t, ta):
            _, ta = tf.while_loop(lambda s, ta: s < 1,
                                  lambda s, ta: (s + 1, ta.write(t, xi)), (0, ta))
            return t + 1, ta

        ta = tf.TensorArray(tf.float32, size=3, element_shape=[2])
        return tf.while_loop(lambda t, ta: t < tf.gather(trips, i), outer_step,
                             (0, ta))[1].stack()

    with pytest.raises(pf.ConversionError, match="tensor list"):
        pf.pfor(body, 3, fallback="error")
    testing.assert_matches_loop(body, 3, fallback="loop", graph=True)
