"""tf.dynamic_partition with per-iteration partitions (partition.py) against the
loop, with no fallback: partitions that are empty in some iterations, matrices of
partitions, ragged data, invariant inputs, with gradients (also feeding a top_k with a
per-iteration k); bad partitions fail like the loop."""

import functools

import numpy as np
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing

MAX_N, WIDTH = 4, 5


# pfor eagerly, in a tf.function of run-time iters and in chunks of 2 against one run of
# the loop (ragged results row by row); nothing falls back. Property tests draw one of
# the modes per example instead (the examples cover all three).
check = functools.partial(testing.assert_matches_loop, modes=testing.RUN_MODES,
                          ragged_outputs=True)


@settings(max_examples=10, deadline=None)
@given(n=st.integers(0, MAX_N), count=st.integers(1, 3),
       data=st.sampled_from(["stacked", "invariant", "ragged", "matrix"]),
       inner=st.booleans(), seed=st.integers(0, 2**16),
       mode=st.sampled_from(testing.RUN_MODES))
def test_dynamic_partition(n, count, data, inner, seed, mode):
    rng = np.random.default_rng(seed)
    shape = [MAX_N, 2, WIDTH] if data == "matrix" else [MAX_N, WIDTH]
    xs = tf.constant(rng.normal(size=shape + ([3] if inner else [])), tf.float32)
    parts = tf.constant(rng.integers(0, count, size=shape), tf.int32)
    lengths = tf.constant(rng.integers(0, WIDTH + 1, size=MAX_N), tf.int32)

    def body(i):
        if data == "ragged":
            return tf.dynamic_partition(xs[i, :lengths[i]], parts[i, :lengths[i]], count)
        return tf.dynamic_partition(xs[0] if data == "invariant" else xs[i], parts[i], count)

    check(body, n, modes=(mode,))
    if n:
        testing.assert_gradients_match(body, [xs], n, ragged=True)


def test_partitions_out_of_range_fail_like_the_loop():
    xs = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    parts = tf.constant([[0, 1], [2, 0]])
    testing.assert_fails_like_loop(lambda i: tf.dynamic_partition(xs[i], parts[i], 2), 2)


def test_partitions_and_top_k_feed_fixed_size_results():
    xs = tf.constant([[3.0, 1.0, 2.0, 5.0], [1.0, 1.0, 1.0, 0.0], [0.0, 9.0, 8.0, 7.0]])
    parts = tf.constant([[0, 1, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0]])

    def body(i):
        low, high = tf.dynamic_partition(xs[i], parts[i], 2)
        k = tf.size(low)
        return tf.reduce_sum(high) + tf.reduce_sum(tf.math.top_k(xs[i], k=k).values)

    testing.assert_matches_loop(body, 3, graph=True)


def test_dynamic_partition_of_ragged_data():
    xs = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    parts = tf.constant([[0, 2, 2], [0, 1, 1], [1, 1, 0]])
    lengths = tf.constant([3, 0, 2])
    check(lambda i: tf.dynamic_partition(xs[i, :lengths[i]], parts[i, :lengths[i]], 3), 3)
