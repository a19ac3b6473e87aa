"""Gradients taken through pfor's output (a tape around ``pf.vectorized_map``, and
``pf.jacobian`` of a function that calls it) where the body runs a while loop with
per-iteration trip counts: TensorFlow differentiates the converted loop, on the active
subset and masked. Rows that never run, rows whose start is per-iteration, values
whose shape differs between steps; against the loop, with no fallback."""

from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing
from pfor_controlflow.loops import masking


def _strategy(masked):
    """A loop with per-iteration trip counts runs masked or on the active subset."""
    return mock.patch.object(masking, "pays", lambda loop: masked)


def _loss(kind, stacked_start):
    """One example's loss: a loop of one step per positive value."""
    def loss(xi):
        steps = tf.reduce_sum(tf.cast(xi > 0, tf.int32))
        start = xi[0] if stacked_start else tf.constant(0.5)

        def body(t, acc):
            above = xi > 0.4 + tf.cast(t, tf.float32) * 0.3
            if kind == "ragged":  # differs in shape between steps and rows
                term = tf.reduce_sum(tf.boolean_mask(xi, above) ** 2)
            elif kind == "masked":
                term = tf.reduce_sum((xi * tf.cast(above, tf.float32)) ** 2)
            else:  # reads of the carried value only
                term = acc * xi[1]
            return t + 1, acc * 0.5 + term

        return tf.while_loop(lambda t, acc: t < steps, body, (0, start))[1]
    return loss


def _loop_gradients(loss, x, weights):
    with tf.GradientTape() as tape:
        tape.watch(x)
        value = tf.reduce_sum(tf.stack([loss(x[r]) for r in range(x.shape[0])]) * weights)
    return tape.gradient(value, x, unconnected_gradients="zero")


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_drawn_gradients_through_vectorized_map(data):
    n = data.draw(st.integers(1, 4), label="n")
    kind = data.draw(st.sampled_from(["ragged", "masked", "carried"]), label="kind")
    stacked_start = data.draw(st.booleans(), label="per-iteration start")
    masked = data.draw(st.booleans(), label="masked")
    signs = data.draw(st.lists(st.lists(st.booleans(), min_size=5, max_size=5),
                               min_size=n, max_size=n), label="positive entries")
    magnitude = tf.random.stateless_uniform([n, 5], seed=[n, 41], minval=0.1, maxval=1.5)
    x = tf.where(tf.constant(signs), magnitude, -magnitude)  # rows of no step included
    weights = tf.linspace(1.0, 2.0, n)
    loss = _loss(kind, stacked_start)
    with _strategy(masked), tf.GradientTape() as tape:
        tape.watch(x)
        value = tf.reduce_sum(pf.vectorized_map(loss, x, fallback="error") * weights)
    got = tape.gradient(value, x, unconnected_gradients="zero")
    testing.assert_allclose(got, _loop_gradients(loss, x, weights), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("kind", ["ragged", "masked"])
def test_jacobian_of_a_vectorized_map(kind, masked):
    x = tf.constant(np.random.RandomState(7).normal(size=(4, 6)).astype(np.float32))
    x = tf.tensor_scatter_nd_update(x, [[1]], -tf.abs(x[1:2]))  # row 1: no step
    loss = _loss(kind, stacked_start=True)
    with _strategy(masked):
        got = pf.jacobian(lambda xb: pf.vectorized_map(loss, xb, fallback="error"), x,
                          fallback="error")
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        values = [loss(x[r]) for r in range(4)]
    want = tf.stack([tape.gradient(v, x, unconnected_gradients="zero") for v in values])
    testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert got.shape == (4, 4, 6)
    assert float(tf.reduce_max(tf.abs(got[1, 1]))) > 0.0  # the start's own gradient
