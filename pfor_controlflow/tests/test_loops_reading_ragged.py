"""A tf.while_loop whose body (or condition) reads a value made before it whose shape
differs between iterations (``tf.boolean_mask``, ``x[:n_i]``): the loop's rows read
their own rows of the ragged value, on the active subset and masked, in every mode,
with gradients, all against the sequential loop with no fallback."""

from unittest import mock

import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing
from pfor_core.testing import ragged_loop
from pfor_controlflow import masking


def _strategy(masked):
    """A loop with per-iteration trip counts runs masked or on the active subset."""
    return mock.patch.object(masking, "pays", lambda loop: masked)


def _weighted_sum(values, limit, in_cond):
    """sum_t (t + 1) * values[t] for t < limit, by a while loop (the condition reads the
    ragged ``values`` itself with ``in_cond``)."""
    def cond(t, acc):
        return t < (tf.shape(values)[0] if in_cond else limit)

    def step(t, acc):
        return t + 1, acc + tf.reduce_sum(values[t]) * tf.cast(t + 1, tf.float32)

    return tf.while_loop(cond, step, (0, tf.constant(0.0)))[1]


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_drawn_ragged_values_read_by_loops(data):
    n = data.draw(st.integers(1, 4), label="n")
    lengths = data.draw(ragged_loop.lengths_strategy(n, 5), label="lengths")
    per_iteration_steps = data.draw(st.booleans(), label="per-iteration steps")
    in_cond = per_iteration_steps and data.draw(st.booleans(), label="condition reads it")
    masked = data.draw(st.booleans(), label="masked")
    two_d = data.draw(st.booleans(), label="items of rank 1")
    x = tf.random.stateless_normal([n, 5, 2], seed=[n, 21])
    length_of = tf.constant(lengths)

    def body(i):
        values = ragged_loop.rows(x if two_d else x[..., 0], length_of, i)
        limit = tf.shape(values)[0] if per_iteration_steps else tf.reduce_min(length_of)
        return _weighted_sum(tf.sin(values), limit, in_cond)

    with _strategy(masked):
        ragged_loop.assert_matches_loop(body, n, modes=ragged_loop.modes(data))


@pytest.mark.parametrize("masked", [False, True])
def test_a_loop_over_the_items_a_boolean_mask_keeps(masked):
    x = tf.random.stateless_normal([5, 7], seed=[1, 22])

    def body(i):
        xi = tf.gather(x, i)
        kept = tf.boolean_mask(xi, xi > 0.3)
        return _weighted_sum(kept, tf.size(kept), in_cond=False)

    with _strategy(masked):
        ragged_loop.assert_matches_loop(body, 5)


def test_per_example_gradients_through_such_a_loop():
    x = tf.random.stateless_normal([4, 6], seed=[2, 23]) + tf.constant([[0.5], [-9.0], [0.0], [0.3]])
    w = tf.Variable(tf.random.stateless_normal([6], seed=[2, 24]))

    def loss(xi):
        h = xi * w
        kept = tf.boolean_mask(h, xi > 0.0)
        return _weighted_sum(tf.tanh(kept), tf.size(kept), in_cond=False)

    got = pf.per_example_gradients(loss, [w], x, fallback="error")[0]
    for j in range(4):
        with tf.GradientTape() as tape:
            value = loss(x[j])
        want = tape.gradient(value, w, unconnected_gradients="zero")
        testing.assert_allclose(got[j], want, rtol=1e-5, atol=1e-6, what=f"example {j}")
    assert float(tf.reduce_max(tf.abs(got))) > 0.0


def test_in_an_outer_pfor():
    x = tf.random.stateless_normal([2, 3, 5], seed=[3, 25])
    lengths = tf.constant([[2, 0, 5], [3, 1, 4]])

    def inner_for(i):
        def inner(j):
            values = tf.gather(x, i)[j][:tf.gather(tf.gather(lengths, i), j)]
            return _weighted_sum(values, tf.size(values), in_cond=False)
        return pf.pfor(inner, 3, fallback="error")

    got = pf.pfor(inner_for, 2, fallback="error")
    want = [[_weighted_sum(x[i, j][:lengths[i, j]], lengths[i, j], False) for j in range(3)]
            for i in range(2)]
    testing.assert_allclose(got, tf.convert_to_tensor(want), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("masked", [False, True])
def test_a_ragged_value_carried_through_the_loop_keeping_its_shape(masked):
    x = tf.random.stateless_normal([4, 5], seed=[4, 26])
    steps = tf.constant([2, 0, 3, 1])

    def body(i):
        values = tf.gather(x, i)[:i + 1]
        out = tf.while_loop(lambda t, v: t < tf.gather(steps, i),
                            lambda t, v: (t + 1, tf.sin(v) * 2.0), (0, values),
                            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None])))[1]
        return tf.reduce_sum(out)

    with _strategy(masked):
        ragged_loop.assert_matches_loop(body, 4)


def test_a_ragged_value_that_changes_shape_in_the_loop_fails_clearly():
    x = tf.random.stateless_normal([3, 5], seed=[4, 27])

    def body(i):
        values = tf.gather(x, i)[:i + 1]
        out = tf.while_loop(lambda t, v: t < 2, lambda t, v: (t + 1, v[1:]), (0, values),
                            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None])))[1]
        return tf.reduce_sum(out)

    with pytest.raises((pf.ConversionError, tf.errors.InvalidArgumentError),
                       match="changes (shape|which of its dimensions)"):
        pf.pfor(body, 3, fallback="error")
