"""tf.math.bincount (counting.py) against the loop, with no fallback: a number of
bins per iteration (max(x) + 1, or a per-iteration minlength/maxlength), with and
without weights, binary_output, rows of a matrix (axis=-1), invariant and ragged
inputs, rows with no element; a negative value fails like the loop.

HistogramFixedWidth against the sequential loop with no fallback: values and range
stacked or invariant, a fixed or per-iteration number of bins (ragged counts), values
on bin edges and outside the range, int and float values; bad ranges and NaN fail like
the loop. Also Bincount of an invariant input with per-iteration weights."""

import functools

import numpy as np
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


@settings(max_examples=24, deadline=None)
@given(n=st.integers(0, MAX_N), matrix=st.booleans(),
       weights=st.sampled_from([None, "stacked", "invariant"]), binary=st.booleans(),
       bounds=st.sampled_from([None, "min", "max", "both", "fixed"]),
       dtype=st.sampled_from([tf.float32, tf.int64, tf.float64]), seed=st.integers(0, 2**16),
       mode=st.sampled_from(testing.RUN_MODES))
def test_bincount(n, matrix, weights, binary, bounds, dtype, seed, mode):
    rng = np.random.default_rng(seed)
    shape = [MAX_N, 2, WIDTH] if matrix else [MAX_N, WIDTH]
    xs = tf.constant(rng.integers(0, rng.integers(1, 7), size=shape), tf.int32)
    ws = tf.constant(rng.integers(-3, 4, size=shape), dtype)
    binary = binary and weights is None  # tf.math.bincount takes one of the two
    minimum = tf.constant(rng.integers(0, 8, size=MAX_N), tf.int32)
    maximum = tf.constant(rng.integers(0, 8, size=MAX_N), tf.int32)

    def body(i):
        kwargs = dict(binary_output=binary, axis=-1 if matrix else None,
                      dtype=dtype if weights is None else tf.int32)
        if weights:
            kwargs["weights"] = ws[i] if weights == "stacked" else ws[0]
        if bounds in ("min", "both"):
            kwargs["minlength"] = minimum[i]
        if bounds in ("max", "both"):
            kwargs["maxlength"] = maximum[i]
        if bounds == "fixed":
            kwargs["minlength"] = kwargs["maxlength"] = 4
        return tf.math.bincount(xs[i], **kwargs)

    check(body, n, modes=(mode,))


def test_bincount_of_an_invariant_input_with_a_per_iteration_minlength():
    x = tf.constant([1, 1, 3])
    check(lambda i: tf.math.bincount(x, minlength=2 * i), 4)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(0, MAX_N), weighted=st.booleans(), per_iteration_size=st.booleans(),
       seed=st.integers(0, 2**16), mode=st.sampled_from(testing.RUN_MODES))
def test_dense_bincount_of_a_ragged_input(n, weighted, per_iteration_size, seed, mode):
    rng = np.random.default_rng(seed)
    xs = tf.constant(rng.integers(0, 6, size=[MAX_N, WIDTH]), tf.int32)
    ws = tf.constant(rng.normal(size=[MAX_N, WIDTH]), tf.float32)
    lengths = tf.constant(rng.integers(0, WIDTH + 1, size=MAX_N), tf.int32)
    sizes = tf.constant(rng.integers(0, 7, size=MAX_N), tf.int32)

    def body(i):
        x = xs[i, :lengths[i]]
        weights = ws[i, :lengths[i]] if weighted else tf.zeros([0], tf.float32)
        size = sizes[i] if per_iteration_size else 4
        return tf.raw_ops.DenseBincount(input=x, size=size, weights=weights)

    check(body, n, modes=(mode,))


def test_the_old_bincount_op():
    xs = tf.constant([[0, 3, 5, 1], [2, 2, 2, 9]])
    sizes = tf.constant([4, 0])
    check(lambda i: tf.raw_ops.Bincount(arr=xs[i], size=sizes[i], weights=tf.zeros([0])), 2)


def test_a_negative_value_fails_like_the_loop():
    xs = tf.constant([[0, 3], [2, -1]])
    testing.assert_fails_like_loop(lambda i: tf.raw_ops.DenseBincount(
        input=xs[i], size=xs[i][0] + 2, weights=tf.zeros([0])), 2, match="non-negative")


def test_bincount_of_a_ragged_input_sized_by_its_own_max():
    xs = tf.constant([[0, 3, 5, 1], [2, 2, 2, 0], [4, 4, 0, 1]])
    lengths = tf.constant([4, 0, 2])
    check(lambda i: tf.math.bincount(xs[i, :lengths[i]]), 3)
    check(lambda i: tf.math.bincount(xs[i, :lengths[i]], weights=tf.cast(
        xs[i, :lengths[i]], tf.float32) * 0.5), 3)


def test_clamped_size_is_one_size_and_compiles_in_a_loop_under_xla():
    """minlength == maxlength makes every iteration's size the same: stacked counts,
    also inside a per-iteration while loop under XLA (issue 17 item 9)."""
    x = tf.constant([[0, 1, 1], [2, 0, 2], [1, 1, 1]])

    def body(i):
        return tf.while_loop(
            lambda t, a: t < i,
            lambda t, a: (t + 1, a + tf.math.bincount(tf.gather(x, i), minlength=3,
                                                       maxlength=3)),
            (0, tf.zeros([3], tf.int32)))[1]

    testing.assert_matches_loop(body, 3, modes=("eager", "xla"))


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
