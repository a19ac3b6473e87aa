"""tf.range with per-iteration bounds (range.py) against the loop, with no
fallback: lengths that differ and include 0, every argument stacked or not, negative
steps, floats, and the loop's error for a step of the wrong sign."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing

MAX_N = 4


def check_rows(body, n):
    """pfor with ragged outputs, eagerly, in a tf.function of run-time iters, and in
    chunks of 2, equals the loop's rows; nothing falls back."""
    testing.assert_matches_loop(body, n, ragged=True, modes=testing.RUN_MODES)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(0, MAX_N), which=st.sets(st.sampled_from([0, 1, 2]), min_size=1),
       negative=st.booleans(), dtype=st.sampled_from([tf.int32, tf.int64, tf.float32]),
       seed=st.integers(0, 2**16))
def test_range_with_stacked_arguments(n, which, negative, dtype, seed):
    rng = np.random.default_rng(seed)
    starts = rng.integers(-3, 4, size=MAX_N)
    steps = rng.integers(1, 4, size=MAX_N) * (-1 if negative else 1)
    limits = starts + steps * rng.integers(0, 4, size=MAX_N) + rng.integers(0, 2, size=MAX_N) * (
        -1 if negative else 1)
    if dtype == tf.float32:
        steps = steps * 0.5
    args = [tf.constant(a, dtype) for a in (starts, limits, steps)]

    def body(i):
        start, limit, delta = (tf.gather(a, i) if k in which else a[0]
                               for k, a in enumerate(args))
        return tf.range(start, limit, delta)

    check_rows(body, n)


def test_range_of_the_loop_index_has_an_empty_row():
    check_rows(lambda i: tf.range(i), 3)
    check_rows(lambda i: tf.range(3 - i, 3), 3)
    steps = tf.constant([1, 2, 7])
    check_rows(lambda i: tf.range(0, 6, steps[i]), 3)


def test_a_step_of_the_wrong_sign_fails_like_the_loop():
    limits = tf.constant([2, -1])
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.range(0, -1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="delta"):
        pf.pfor(lambda i: tf.range(0, limits[i]), 2, fallback="error")
