"""The ops gradients use on values whose shape differs between iterations
(reshape.py, elementwise.py, reductions.py, segments.py) against the loop,
with no fallback: Reshape to per-iteration shapes, BroadcastGradientArgs of
per-iteration shapes, Sum over the axes it gives (kept dims or reshaped back), and
UnsortedSegment* of ragged data by ragged ids."""

import functools

import numpy as np
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing

MAX_N = 4
X = tf.reshape(tf.range(MAX_N * 6, dtype=tf.float32) - 7., [MAX_N, 6])
sizes = st.lists(st.integers(0, 3), min_size=MAX_N, max_size=MAX_N)
THREES = tf.constant([3] * MAX_N)


# pfor eagerly, in a tf.function of run-time iters and in chunks of 2 against one run of
# the loop (ragged results row by row); nothing falls back. Property tests draw one of
# the modes per example instead (the examples cover all three).
check = functools.partial(testing.assert_matches_loop, modes=testing.RUN_MODES,
                          ragged_outputs=True)


def part(i, k):
    return tf.gather(X, i)[:tf.gather(k, i)]


@settings(max_examples=10, deadline=None)
@given(n=st.integers(0, MAX_N), k=sizes, data=st.sampled_from(["stacked", "invariant",
                                                                 "ragged"]),
       mode=st.sampled_from(testing.RUN_MODES))
def test_reshape_to_per_iteration_shapes(n, k, data, mode):
    k = tf.constant(k)

    def body(i):
        if data != "ragged":  # 6 values as k x (6 / k) (k in 1, 2, 3)
            rows = tf.maximum(tf.gather(k, i), 1)
            return tf.reshape(tf.gather(X, i) if data == "stacked" else X[1],
                              tf.stack([rows, -1]))
        return tf.reshape(tf.gather(X, i)[:2 * tf.gather(k, i)], tf.stack([tf.gather(k, i), 2]))

    check(body, n, modes=(mode,))


def test_reshape_of_an_invariant_value_to_per_iteration_shapes():
    """A sum's gradient reshapes its invariant incoming gradient so: each iteration
    gets the same elements in its own shape."""
    k = tf.constant([3, 1, 2])
    got = testing.assert_matches_loop(
        lambda i: tf.reshape(X[0], tf.stack([tf.gather(k, i), -1])), 3, ragged_outputs=True)
    assert [np.shape(row) for row in got.to_list()] == [(3, 2), (1, 6), (2, 3)]


@settings(max_examples=10, deadline=None)
@given(n=st.integers(0, MAX_N), k=sizes, other=st.sampled_from(["same", "scalar", "row"]),
       mode=st.sampled_from(testing.RUN_MODES))
def test_broadcast_gradient_args(n, k, other, mode):
    k = tf.constant(k)

    def body(i):
        s0 = tf.shape(tf.expand_dims(part(i, k), 0))  # [1, k_i]
        s1 = {"same": s0, "scalar": tf.constant([], tf.int32),
              "row": tf.constant([1], tf.int32)}[other]
        r0, r1 = tf.raw_ops.BroadcastGradientArgs(s0=s0, s1=s1)
        return r0, r1

    check(body, n, modes=(mode,))


def test_broadcast_gradient_args_of_an_invariant_shape():
    k = tf.constant([2, 0, 3])
    check(lambda i: tf.raw_ops.BroadcastGradientArgs(s0=tf.constant([1, 1], tf.int32),
                                                     s1=tf.shape(tf.expand_dims(part(i, k), 0))),
          3)


def test_sum_of_stacked_data_over_per_iteration_axes():
    k = tf.constant([2, 0, 1])
    y = tf.reshape(tf.range(18, dtype=tf.float32), [3, 2, 3])
    check(lambda i: tf.reduce_sum(tf.gather(y, i), tf.range(tf.gather(k, i)), keepdims=True), 3)


@settings(max_examples=10, deadline=None)
@given(n=st.integers(0, MAX_N), k=sizes, keepdims=st.booleans(),
       mode=st.sampled_from(testing.RUN_MODES))
def test_sum_over_per_iteration_axes(n, k, keepdims, mode):
    k = tf.constant(k)

    def body(i):
        x = tf.expand_dims(part(i, k), 0)  # [1, k_i]
        g = tf.broadcast_to(x, tf.stack([2, tf.shape(x)[1]]))
        r0, _ = tf.raw_ops.BroadcastGradientArgs(s0=tf.shape(x), s1=tf.shape(g))
        total = tf.reduce_sum(g, r0, keepdims=keepdims)
        return total if keepdims else tf.reshape(total, tf.shape(x))

    check(body, n, modes=(mode,))


@settings(max_examples=10, deadline=None)
@given(n=st.integers(0, MAX_N), k=sizes, per_iteration_count=st.booleans(),
       stacked_data=st.booleans(),
       op=st.sampled_from([tf.math.unsorted_segment_sum, tf.math.unsorted_segment_max]),
       mode=st.sampled_from(testing.RUN_MODES))
def test_unsorted_segments_of_ragged_ids(n, k, per_iteration_count, stacked_data, op, mode):
    k = tf.constant(k)
    ids = tf.constant([[0, 2, 2, 1, 0, 1], [1, 1, 0, 2, 2, 0], [2, 0, 1, 1, 0, 2],
                       [0, 0, 0, 0, 0, 0]], tf.int64)

    def body(i):
        segment = tf.gather(ids, i)[:tf.gather(k, i)]
        if stacked_data:  # three values, ids ragged in type (a range) but of length 3
            segment = tf.range(tf.gather(THREES, i), dtype=tf.int64) % 3
            return op(tf.gather(X, i)[:3], segment, 3 + tf.gather(k, i) * int(
                per_iteration_count))
        data = part(i, k)
        # ids go up to 2: a per-iteration count of at least 3 (the loop fails past it)
        count = tf.gather(k, i) + 3 if per_iteration_count else 3
        return op(data, segment, count)

    check(body, n, modes=(mode,))


def test_bad_segment_ids_fail_like_the_loop():
    ids = tf.constant([[0, 5, 1], [0, 1, 2]], tf.int64)
    k = tf.constant([3, 2])
    testing.assert_fails_like_loop(
        lambda i: tf.math.unsorted_segment_sum(part(i, k), tf.gather(ids, i)[:tf.gather(k, i)],
                                               3), 2)


def test_fewer_elements_than_the_shape_fail_like_the_loop():
    k = tf.constant([2, 3])
    testing.assert_fails_like_loop(
        lambda i: tf.reshape(part(i, k), tf.stack([tf.gather(k, i), 2])), 2,
        ragged_outputs=True)
