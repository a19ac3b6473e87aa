"""RaggedTensorToVariant / RaggedTensorFromVariant (ragged_variants.py): ``tf.map_fn``
with a ``tf.RaggedTensorSpec`` output inside a loop body, against the loop, with no
fallback: elements whose lengths differ within and between iterations, empty ones,
ragged ranks 0 and 1, and a ragged pfor output."""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings, strategies as st
from pfor_core import testing


ROWS, WIDTH = 3, 4
FLAT = tf.RaggedTensorSpec([None], tf.float32)
NESTED = tf.RaggedTensorSpec([2, None], tf.float32, ragged_rank=1)


def _draw(data):
    n = data.draw(st.integers(0, 4), label="n")
    values = data.draw(st.lists(st.integers(-3, 3), min_size=n * ROWS * WIDTH,
                                max_size=n * ROWS * WIDTH), label="values")
    return n, tf.constant(np.asarray(values, np.float32).reshape([n, ROWS, WIDTH]))


def positives(row):
    """A row's positive entries: a different number in every row."""
    return tf.boolean_mask(row, row > 0)


def halves(row):
    """A row's positive entries as two rows, cut after the first half of them."""
    kept = positives(row)
    first = tf.size(kept) // 2
    return tf.RaggedTensor.from_row_lengths(
        kept, tf.cast(tf.stack([first, tf.size(kept) - first]), tf.int64))


BODIES = {
    "sum": lambda x: tf.reduce_sum(tf.map_fn(positives, x, fn_output_signature=FLAT).flat_values),
    "to_tensor": lambda x: tf.map_fn(positives, x, fn_output_signature=FLAT).to_tensor(
        shape=[ROWS, WIDTH]),
    "nested": lambda x: tf.map_fn(halves, x, fn_output_signature=NESTED).to_tensor(
        shape=[ROWS, 2, WIDTH]),
    "row_lengths": lambda x: tf.map_fn(positives, x, fn_output_signature=FLAT).row_lengths(),
}


@settings(max_examples=12, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(BODIES)))
def test_map_fn_with_ragged_outputs_in_the_body(data, name):
    n, x = _draw(data)
    testing.assert_matches_loop(lambda i: BODIES[name](tf.gather(x, i)), n,
                                modes=testing.draw_modes(data))


@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_map_fn_result_returned_as_a_ragged_output(data):
    """The body returns the map_fn's RaggedTensor: one more ragged dimension."""
    n, x = _draw(data)
    testing.assert_matches_loop(
             lambda i: tf.map_fn(positives, tf.gather(x, i), fn_output_signature=FLAT).flat_values,
             n, ragged=True, modes=testing.draw_modes(data))
