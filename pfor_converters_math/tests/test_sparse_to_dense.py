"""SparseToDense (tf.sparse.to_dense) of per-iteration sparse tensors against the loop,
with no fallback (sparse_to_dense.py): indices invariant, stacked or ragged; values
likewise or one scalar; a per-iteration dense shape (ragged results) or default; bad
indices fail as in the loop."""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing


def sorted_positions(rng, shape, count):
    """``count`` distinct row-major positions of ``shape``, in order, as [count, rank]."""
    size = int(np.prod(shape))
    flat = np.sort(rng.permutation(size)[:count])
    return np.stack(np.unravel_index(flat, shape), -1).reshape([count, len(shape)])


@settings(max_examples=30)
@given(st.data())
def test_sparse_to_dense_every_layout(data):
    n = data.draw(st.integers(0, 4), label="n")
    shape = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3), label="shape")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    layout = data.draw(st.sampled_from(["U", "S", "R"]), label="indices")
    scalar_value = data.draw(st.booleans(), label="scalar value")
    values_stacked = data.draw(st.booleans(), label="values stacked")
    shape_stacked = data.draw(st.booleans(), label="shape stacked")
    default_stacked = data.draw(st.booleans(), label="default stacked")
    size = int(np.prod(shape))
    # Per-iteration dense shapes: the given one, grown by up to one in each dimension.
    shapes = np.array(shape)[None] + (rng.integers(0, 2, size=[n + 1, len(shape)])
                                      if shape_stacked else 0)
    fixed = int(rng.integers(0, size + 1))
    counts = rng.integers(0, size + 1, size=n + 1) if layout == "R" else np.full(n + 1, fixed)
    positions = [sorted_positions(rng, shape if layout != "U" else shape, int(c))
                 for c in counts]
    if layout == "U":
        positions = [positions[0]] * (n + 1)
    width = int(counts.max())
    padded = np.zeros([n + 1, width, len(shape)], np.int64)
    for k, p in enumerate(positions):
        padded[k, :len(p)] = p
    indices = tf.constant(padded)
    counts_t = tf.constant(counts, tf.int32)
    value_table = tf.constant(rng.standard_normal([n + 1, width]), tf.float32)
    dense_shapes = tf.constant(shapes, tf.int64)
    defaults = tf.constant(rng.standard_normal(n + 1), tf.float32)

    def body(i):
        rows = i if layout != "U" else 0
        count = counts_t[i] if layout == "R" else fixed
        idx = indices[rows, :count]
        if scalar_value:
            vals = value_table[i if values_stacked else 0, 0] if width else tf.constant(1.0)
        else:
            vals = value_table[i if values_stacked else 0, :count]
        return tf.raw_ops.SparseToDense(
            sparse_indices=idx, output_shape=dense_shapes[i if shape_stacked else 0],
            sparse_values=vals, default_value=defaults[i if default_stacked else 0])

    testing.assert_matches_loop(body, n, graph=data.draw(st.booleans(), label="graph"),
                                ragged_outputs=True)


def test_sparse_to_dense_of_a_vector_with_positions():
    values = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    testing.assert_matches_loop(
        lambda i: tf.raw_ops.SparseToDense(sparse_indices=tf.constant([1, 3]) + i,
                                           output_shape=[6], sparse_values=values[i],
                                           default_value=-1.), 3, graph=True)


def test_index_outside_its_own_shape_fails_like_the_loop():
    """The largest shape would take [2, 0]; iteration 0's own shape [2, 2] does not."""
    shapes = tf.constant([[2, 2], [3, 2]], tf.int64)
    indices = tf.constant([[2, 0]], tf.int64)
    testing.assert_fails_like_loop(
        lambda i: tf.sparse.to_dense(tf.SparseTensor(indices, [1.0], shapes[i])), 2)


def test_unordered_indices_fail_like_the_loop():
    indices = tf.constant([[[1, 0], [0, 1]], [[0, 0], [0, 1]]], tf.int64)
    testing.assert_fails_like_loop(
        lambda i: tf.raw_ops.SparseToDense(sparse_indices=indices[i], output_shape=[2, 2],
                                           sparse_values=[1.0, 2.0], default_value=0.0), 2)
