"""Sorted segment reductions with per-iteration ids (ragged_segments.py) against the loop,
with no fallback: a number of segments that differs per iteration, empty segments
between others, no element at all, stacked / invariant / ragged data, with gradients;
a negative or unsorted id fails like the loop."""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing
import pfor_core as pf

MAX_N, WIDTH = 4, 5

OPS = {"sum": tf.math.segment_sum, "mean": tf.math.segment_mean,
       "max": tf.math.segment_max, "min": tf.math.segment_min,
       "prod": tf.math.segment_prod}


def check(body, n):
    """pfor eagerly, in a tf.function of run-time iters, and in chunks of 2 equals the
    loop (ragged results row by row); nothing falls back."""
    testing.assert_matches_loop(body, n, graph=True, ragged_outputs=True)
    testing.assert_matches_loop(body, n, ragged_outputs=True, parallel_iterations=2)


def check_gradient(body, source, n):
    """The gradient of a sum of sines of the ragged result equals the loop's."""
    with tf.GradientTape() as tape:
        tape.watch(source)
        out = pf.pfor(body, n, fallback="error", ragged_outputs=True)
        flat = out.flat_values if isinstance(out, tf.RaggedTensor) else out
        got = tape.gradient(tf.reduce_sum(tf.sin(flat)), source)
    with tf.GradientTape() as tape:
        tape.watch(source)
        total = tf.add_n([tf.reduce_sum(tf.sin(body(tf.constant(i)))) for i in range(n)])
        want = tape.gradient(total, source)
    np.testing.assert_allclose(tf.convert_to_tensor(got).numpy(),
                               tf.convert_to_tensor(want).numpy(), rtol=1e-4, atol=1e-5)


def sorted_ids(rng, shape):
    """Sorted ids from 0 with gaps (empty segments) and repeats."""
    steps = rng.integers(0, 3, size=shape)  # the first is the first id
    return np.cumsum(steps, axis=-1)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(0, MAX_N), op=st.sampled_from(sorted(OPS)),
       data=st.sampled_from(["stacked", "invariant", "ragged"]), inner=st.booleans(),
       width=st.sampled_from([0, 1, WIDTH]), seed=st.integers(0, 2**16))
def test_segment_reduction_with_per_iteration_ids(n, op, data, inner, width, seed):
    rng = np.random.default_rng(seed)
    xs = tf.constant(rng.normal(size=[MAX_N, width] + ([2] if inner else [])), tf.float32)
    ids = tf.constant(sorted_ids(rng, [MAX_N, width]), tf.int32)
    lengths = tf.constant(rng.integers(0, width + 1, size=MAX_N), tf.int32)
    fn = OPS[op]

    def body(i):
        if data == "ragged":
            return fn(xs[i, :lengths[i]], ids[i, :lengths[i]])
        return fn(xs[i] if data == "stacked" else xs[0], ids[i])

    check(body, n)
    if n:
        check_gradient(body, xs, n)


def test_int64_ids_and_integer_data():
    xs = tf.constant([[1, 2, 3], [4, 5, 6]], tf.int64)
    ids = tf.constant([[0, 0, 3], [1, 1, 1]], tf.int64)
    check(lambda i: tf.math.segment_sum(xs[i], ids[i]), 2)
    check(lambda i: tf.math.segment_max(xs[i], ids[i]), 2)


def test_bad_ids_fail_like_the_loop():
    xs = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    negative = tf.constant([[0, 0, 1], [-1, 0, 0]])
    unsorted = tf.constant([[0, 0, 1], [1, 0, 0]])
    testing.assert_fails_like_loop(lambda i: tf.math.segment_sum(xs[i], negative[i]), 2)
    testing.assert_fails_like_loop(lambda i: tf.math.segment_sum(xs[i], unsorted[i]), 2)


def test_ragged_data_and_ids():
    xs = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    ids = tf.constant([[0, 2, 2], [0, 1, 1], [1, 1, 3]])
    lengths = tf.constant([3, 0, 2])
    for fn in OPS.values():
        check(lambda i: fn(xs[i, :lengths[i]], ids[i, :lengths[i]]), 3)


def test_unsorted_segments_of_ragged_data_by_ids_of_one_shape():
    """Data whose shape the body does not know statically (x[:n_i]) by ids of one shape:
    the loop needs them to match, so they are of one shape (checked when it runs)."""
    xs = tf.reshape(tf.range(12.0), [3, 4])
    ids = tf.constant([0, 2, 2])
    lengths = tf.constant([3, 3, 3])
    for fn in (tf.math.unsorted_segment_sum, tf.math.unsorted_segment_max,
               tf.math.unsorted_segment_min, tf.math.unsorted_segment_prod):
        check(lambda i: fn(xs[i, :lengths[i]], ids, 3), 3)  # noqa: B023
    testing.assert_fails_like_loop(
        lambda i: tf.math.unsorted_segment_sum(xs[i, :tf.constant([3, 2, 3])[i]], ids, 3), 3)
