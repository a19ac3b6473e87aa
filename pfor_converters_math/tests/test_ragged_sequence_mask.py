"""tf.sequence_mask without maxlen (its width is each iteration's largest length, so it
differs per iteration) against the loop, with no fallback: Range with a per-iteration
limit (range.py) compared by the ragged consumers; lengths of rank 1 and 2, all
zero, and the mask used in a fixed-size result."""

import functools

import numpy as np
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing

MAX_N = 4


# pfor eagerly, in a tf.function of run-time iters and in chunks of 2 against one run of
# the loop (ragged results row by row); nothing falls back. Property tests draw one of
# the modes per example instead (the examples cover all three).
check = functools.partial(testing.assert_matches_loop, modes=testing.RUN_MODES,
                          ragged_outputs=True)


@settings(max_examples=16, deadline=None)
@given(n=st.integers(0, MAX_N), shape=st.lists(st.integers(0, 3), min_size=1, max_size=2),
       dtype=st.sampled_from([tf.bool, tf.float32, tf.int32]), seed=st.integers(0, 2**16),
       mode=st.sampled_from(testing.RUN_MODES))
def test_sequence_mask_without_maxlen(n, shape, dtype, seed, mode):
    rng = np.random.default_rng(seed)
    lengths = tf.constant(rng.integers(0, 5, size=[MAX_N] + shape), tf.int32)
    check(lambda i: tf.sequence_mask(lengths[i], dtype=dtype), n, modes=(mode,))


def test_sequence_mask_of_zero_lengths_and_a_masked_sum():
    lengths = tf.constant([[0, 0], [2, 1], [0, 3]])
    check(lambda i: tf.sequence_mask(lengths[i]), 3)
    # The mask weighs a row of the iteration's own width: a fixed-size result.
    xs = tf.constant(np.arange(9, dtype=np.float32).reshape(3, 3))

    def body(i):
        mask = tf.sequence_mask(lengths[i], dtype=tf.float32)
        width = tf.shape(mask)[1]
        return tf.reduce_sum(mask * xs[i, :width], axis=1)

    testing.assert_matches_loop(body, 3, graph=True)
