"""tf.unique / tf.unique_with_counts of a per-iteration vector (unique.py) against
the loop, with no fallback: stacked and ragged inputs, rows with no element and rows of
one repeated value, every op variant, numbers and strings, -0.0 beside 0.0."""

import functools

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing

MAX_N, WIDTH = 4, 5


# pfor eagerly, in a tf.function of run-time iters and in chunks of 2 against one run of
# the loop (ragged results row by row); nothing falls back. Property tests draw one of
# the modes per example instead (the examples cover all three).
check = functools.partial(testing.assert_matches_loop, modes=testing.RUN_MODES,
                          ragged_outputs=True)


OPS = {
    "unique": lambda x: tf.unique(x),
    "unique_int64": lambda x: tf.unique(x, out_idx=tf.int64),
    "with_counts": lambda x: tf.unique_with_counts(x),
    "v2": lambda x: tuple(tf.raw_ops.UniqueV2(x=x, axis=tf.constant([0], tf.int64))),
    "with_counts_v2": lambda x: tuple(tf.raw_ops.UniqueWithCountsV2(
        x=x, axis=tf.constant([-1]))),
}


@settings(max_examples=8, deadline=None)
@given(n=st.integers(0, MAX_N), op=st.sampled_from(sorted(OPS)), ragged=st.booleans(),
       dtype=st.sampled_from([tf.int32, tf.int64, tf.float32, tf.string]),
       seed=st.integers(0, 2**16), mode=st.sampled_from(testing.RUN_MODES))
def test_unique(n, op, ragged, dtype, seed, mode):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 3, size=[MAX_N, WIDTH])
    values[rng.integers(0, MAX_N)] = 1  # one row of a single value
    if dtype == tf.string:
        xs = tf.constant(np.array(["a", "bb", ""])[values])
    else:
        xs = tf.constant(values, dtype)
    lengths = tf.constant(rng.integers(0, WIDTH + 1, size=MAX_N), tf.int32)
    fn = OPS[op]

    def body(i):
        return fn(xs[i, :lengths[i]] if ragged else xs[i])

    check(body, n, modes=(mode,))


def test_unique_of_every_row_empty_and_of_no_row():
    xs = tf.zeros([3, 0], tf.float32)
    check(lambda i: tf.unique(xs[i]), 3)
    check(lambda i: tf.unique_with_counts(tf.range(i)), 0)


def test_signed_zeros_come_out_as_each_iteration_has_them():
    xs = tf.constant([[0.0, -0.0, 1.0], [-0.0, 0.0, 1.0]])
    got = pf.pfor(lambda i: tf.unique(xs[i])[0], 2, fallback="error", ragged_outputs=True)
    signs = np.signbit(got.flat_values.numpy()).tolist()
    assert signs == [False, False, True, False]


def test_unique_values_feed_a_fixed_size_result():
    """What tf.unique is mostly used for: a count of distinct values per example."""
    xs = tf.constant([[3, 1, 3, 3], [2, 2, 2, 2], [1, 2, 3, 4]])
    testing.assert_matches_loop(lambda i: tf.unique(xs[i])[1], 3, graph=True)
    report = pf.explain(lambda i: tf.unique(xs[i])[1], 3)
    assert not report.fallbacks


def test_the_number_of_distinct_values_and_their_counts_reduced():
    xs = tf.constant([[3, 1, 3, 3], [2, 2, 2, 2], [1, 2, 3, 4]])
    lengths = tf.constant([4, 0, 3])

    def body(i):
        y, _, count = tf.unique_with_counts(xs[i, :lengths[i]])
        return tf.size(y), tf.reduce_sum(count), tf.reduce_max(count)

    testing.assert_matches_loop(body, 3, graph=True)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("ragged", [False, True])
def test_every_variant_of_stacked_and_ragged_vectors(op, ragged):
    xs = tf.constant([[3.0, 1.0, 3.0, 3.0], [2.0, 2.0, 2.0, 2.0], [1.0, 2.0, 3.0, 4.0]])
    lengths = tf.constant([4, 0, 3])
    fn = OPS[op]
    testing.assert_matches_loop(lambda i: fn(xs[i, :lengths[i]] if ragged else xs[i]), 3,
                                graph=True, ragged_outputs=True)
