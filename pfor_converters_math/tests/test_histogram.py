"""HistogramFixedWidth against the sequential loop with no fallback: values and range
stacked or invariant, a fixed or per-iteration number of bins (ragged counts), values
on bin edges and outside the range, int and float values; bad ranges and NaN fail like
the loop. Also Bincount of an invariant input with per-iteration weights."""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing

iters = st.sampled_from([0, 1, 2, 3, 3])


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_histogram_fixed_width(data):
    shape = data.draw(st.lists(st.integers(0, 4), max_size=2), label="shape")
    n = data.draw(iters, label="n")
    stacked = [data.draw(st.booleans()), data.draw(st.booleans())]
    if not any(stacked):
        stacked[data.draw(st.integers(0, 1))] = True
    dtype = data.draw(st.sampled_from([tf.float32, tf.float64, tf.int32, tf.int64]))
    out = data.draw(st.sampled_from([tf.int32, tf.int64]), label="output dtype")
    nbins = data.draw(st.integers(1, 6), label="nbins")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    # Values on a grid of quarter steps, so many land on bin edges and range ends.
    x = tf.cast(tf.constant(rng.integers(-8, 24, [n] * stacked[0] + shape) / 4), dtype)
    low = rng.integers(-2, 2, [n] * stacked[1])
    ranges = tf.cast(tf.constant(np.stack([low, low + rng.integers(1, 5, low.shape)], -1)),
                     dtype)

    def fn(v, r):
        return tf.histogram_fixed_width(v, r, nbins, dtype=out)

    testing.check(data, fn, [x, ranges], stacked=stacked, n=n)


def test_histogram_with_per_iteration_bins_is_ragged():
    x = tf.constant([[0.0, 0.5, 1.0, 2.5], [3.0, -1.0, 0.25, 9.0], [1.0, 1.0, 1.0, 1.0]])
    bins = tf.constant([1, 4, 2])
    loop_fn = lambda i: tf.histogram_fixed_width(x[i], [0.0, 2.0], bins[i])  # noqa: E731
    testing.assert_matches_loop(loop_fn, 3, graph=True, ragged_outputs=True)
    testing.assert_matches_loop(
        lambda i: tf.histogram_fixed_width(x[0], tf.stack([-1.0, tf.cast(i, tf.float32) + 1]),
                                           bins[i]), 3, ragged_outputs=True)


def test_histogram_bad_inputs_fail_like_the_loop():
    x = tf.constant([[0.0, 1.0], [np.nan, 1.0]])
    ranges = tf.constant([[0.0, 1.0], [1.0, 1.0]])
    testing.assert_fails_like_loop(lambda i: tf.histogram_fixed_width(x[0], ranges[i], 3), 2,
                                   match="value_range")
    testing.assert_fails_like_loop(lambda i: tf.histogram_fixed_width(x[i], [0.0, 1.0], 3), 2,
                                   match="NaN")
    bins = tf.constant([2, 0])
    testing.assert_fails_like_loop(lambda i: tf.histogram_fixed_width(x[0], [0.0, 1.0],
                                                                      bins[i]), 2,
                                   match="nbins")


@settings(max_examples=10, deadline=None)
@given(n=iters, binary=st.booleans(), dense=st.booleans(), seed=st.integers(0, 99))
def test_bincount_of_an_invariant_input_with_per_iteration_weights(n, binary, dense, seed):
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.integers(0, 5, [2, 4]), tf.int32)
    w = tf.constant(rng.normal(size=[3, 2, 4]), tf.float32)

    def loop_fn(i):
        if dense:
            return tf.raw_ops.DenseBincount(input=x, size=4, weights=w[i],
                                            binary_output=binary)
        return tf.raw_ops.Bincount(arr=x[0], size=4, weights=w[i, 0])

    testing.assert_matches_loop(loop_fn, n, graph=True)
