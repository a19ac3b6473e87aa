"""MatrixBandPart with per-iteration bounds, Roll with per-iteration shifts and axes,
ReverseSequence with invariant and per-iteration lengths: against the sequential loop,
every stacked/invariant mix, with no fallback; bad bounds, axes and lengths fail like
the loop."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing

iters = st.sampled_from([0, 1, 2, 3, 3])


def values(rng, shape, dtype=tf.float32):
    return tf.constant(rng.standard_normal(shape), dtype)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_band_part_per_iteration_bounds(data):
    """band_part(x, lower, upper) with lower and/or upper per iteration (negative: the
    whole triangle), batch axes of 0..2 dims, x stacked or invariant."""
    batch = data.draw(st.lists(st.integers(0, 2), max_size=2), label="batch")
    rows, cols = data.draw(st.integers(0, 4)), data.draw(st.integers(0, 4))
    n = data.draw(iters, label="n")
    stacked = [data.draw(st.booleans())] + testing.draw_stacked(data, 2)
    dtype = data.draw(st.sampled_from([tf.float32, tf.int64, tf.bool]), label="dtype")
    index = data.draw(st.sampled_from([tf.int32, tf.int64]), label="Tindex")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = values(rng, [n] * stacked[0] + batch + [rows, cols])
    x = x > 0 if dtype == tf.bool else tf.cast(x * 5, dtype)
    lower = tf.constant(rng.integers(-1, rows + 1, [n] * stacked[1]), index)
    upper = tf.constant(rng.integers(-1, cols + 1, [n] * stacked[2]), index)
    testing.check(data, tf.linalg.band_part, [x, lower, upper], stacked=stacked, n=n)


def test_band_part_bound_past_the_matrix_fails_like_the_loop():
    x = tf.zeros([3, 4])
    bounds = tf.constant([1, 5])
    testing.assert_fails_like_loop(lambda i: tf.linalg.band_part(x, bounds[i], 0), 2,
                                   match="num_lower")
    testing.assert_fails_like_loop(lambda i: tf.linalg.band_part(x, 0, bounds[i] + 1), 2,
                                   match="num_upper")


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_roll_per_iteration_shift_and_axis(data):
    """tf.roll with shifts and/or axes per iteration: scalars or vectors (repeated and
    negative axes included), x stacked or invariant, empty axes."""
    shape = data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=3), label="shape")
    rank = len(shape)
    count = data.draw(st.sampled_from([None, 1, 2, 3]), label="axes (None: scalar)")
    n = data.draw(iters, label="n")
    stacked = [data.draw(st.booleans())] + testing.draw_stacked(data, 2)
    dtype = data.draw(st.sampled_from([tf.int32, tf.int64]), label="dtype")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    k = [] if count is None else [count]
    x = values(rng, [n] * stacked[0] + shape)
    shift = tf.constant(rng.integers(-7, 8, [n] * stacked[1] + k), dtype)
    axis = tf.constant(rng.integers(-rank, rank, [n] * stacked[2] + k), dtype)
    testing.check(data, tf.roll, [x, shift, axis], stacked=stacked, n=n)


def test_roll_axis_out_of_range_fails_like_the_loop():
    x = tf.zeros([3, 4])
    axes = tf.constant([1, 2])
    testing.assert_fails_like_loop(lambda i: tf.roll(x, 1, axes[i]), 2, match="out of range")


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_reverse_sequence(data):
    """tf.reverse_sequence: lengths invariant or per iteration, input stacked or
    invariant, batch axis before or after the sequence axis, rank 2 to 4."""
    rank = data.draw(st.integers(2, 4), label="rank")
    seq, batch = data.draw(st.permutations(range(rank)), label="axes")[:2]
    shape = [data.draw(st.integers(0, 3)) for _ in range(rank)]
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 2)
    dtype = data.draw(st.sampled_from([tf.int32, tf.int64]), label="lengths dtype")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = values(rng, [n] * stacked[0] + shape)
    lengths = tf.constant(rng.integers(0, shape[seq] + 1, [n] * stacked[1] + [shape[batch]]),
                          dtype)

    def fn(a, lens):
        return tf.reverse_sequence(a, lens, seq_axis=seq, batch_axis=batch)

    testing.check(data, fn, [x, lengths], stacked=stacked, n=n)


@pytest.mark.parametrize("bad", [-1, 4])
def test_reverse_sequence_bad_length_fails_like_the_loop(bad):
    x = tf.zeros([2, 3])
    lengths = tf.constant([[1, 2], [bad, 0]])
    testing.assert_fails_like_loop(lambda i: tf.reverse_sequence(x, lengths[i], 1, 0), 2)
