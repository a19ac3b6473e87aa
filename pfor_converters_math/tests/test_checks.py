"""Tests for the run-time checks: EnsureShape and CheckNumerics under pfor.

Property tests compare with the sequential loop (fallback="error"); the failure tests
check that a batched check fails exactly when some iteration's check would, with the
body's message.
"""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing

iters = st.integers(0, 4)
seeds = st.integers(0, 2**31 - 1)
shapes = st.lists(st.integers(0, 3), max_size=3)


@settings(max_examples=30)
@given(data=st.data(), shape=shapes, n=iters, seed=seeds)
def test_ensure_shape(data, shape, n, seed):
    """The expected per-iteration shape has some dimensions left unknown. (TF 2.21 cannot
    build an EnsureShape of unknown rank in a graph at all.)"""
    expected = [None if data.draw(st.booleans()) else d for d in shape]
    x = tf.constant(np.random.default_rng(seed).standard_normal([n] + shape), tf.float32)
    mode = data.draw(st.sampled_from(testing.DRAWN_MODES), label="mode")
    testing.check_op(lambda t: tf.ensure_shape(t * 2.0, expected), [x], stacked=[True], n=n,
                     mode=mode)


def test_ensure_shape_fails_when_an_iteration_has_the_wrong_shape():
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32)])
    def run(x):
        return pf.pfor(lambda i: tf.ensure_shape(tf.gather(x, i), [3]), 2, fallback="error")

    assert run(tf.ones([2, 3])).shape == [2, 3]
    with pytest.raises(tf.errors.InvalidArgumentError, match="Shape of tensor"):
        run(tf.ones([2, 4]))


@settings(max_examples=30)
@given(data=st.data(), shape=shapes, stacked=st.booleans(), n=iters, seed=seeds,
       v2=st.booleans())
def test_check_numerics_passes_finite_values_through(data, shape, stacked, n, seed, v2):
    x = tf.constant(np.random.default_rng(seed).standard_normal([n] * stacked + shape),
                    tf.float64)

    def check(t):
        if v2:
            return tf.raw_ops.CheckNumericsV2(tensor=t, message="bad")
        return tf.debugging.check_numerics(t, "bad")

    mode = data.draw(st.sampled_from(testing.DRAWN_MODES[:2]), label="mode")
    testing.check_op(lambda t, w: check(t + w), [x, tf.ones(shape, tf.float64)],
                     stacked=[stacked, False], n=n, mode=mode)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("graph", [False, True])
def test_check_numerics_fails_if_any_iteration_would(bad, graph):
    x = np.ones([4, 3], np.float32)
    x[2, 1] = bad
    x = tf.constant(x)

    def body(i):
        return tf.debugging.check_numerics(tf.gather(x, i) * 2.0, "row is not finite")

    run = tf.function(lambda n: pf.pfor(body, n, fallback="error")) if graph else (
        lambda n: pf.pfor(body, n, fallback="error"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="row is not finite"):
        run(tf.constant(4) if graph else 4)
    # The loop fails the same way; without the bad row, both pass.
    with pytest.raises(tf.errors.InvalidArgumentError, match="row is not finite"):
        testing.sequential(body, 4)
    testing.assert_matches_loop(body, 2, graph=graph)


@pytest.mark.parametrize("iters", [0, 2])
@pytest.mark.parametrize("graph", [False, True])
def test_check_numerics_of_an_invariant_value_runs_only_if_an_iteration_does(iters, graph):
    w = tf.constant([1.0, np.nan])
    x = tf.ones([iters, 2])

    def body(i):
        return tf.gather(x, i) + tf.debugging.check_numerics(w, "weights are not finite")

    run = tf.function(lambda n: pf.pfor(body, n, fallback="error")) if graph else (
        lambda n: pf.pfor(body, n, fallback="error"))
    n = tf.constant(iters) if graph else iters
    if iters:
        with pytest.raises(tf.errors.InvalidArgumentError, match="weights are not finite"):
            run(n)
    else:
        assert run(n).shape == [0, 2]
