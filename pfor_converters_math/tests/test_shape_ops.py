"""Property tests of the shape queries (Shape, ShapeN, Size, Rank) against the
sequential loop.

Every check runs with fallback="error", so passing also means nothing fell back.
Stacked arguments carry one row per iteration; invariant ones are shared. Shape ops of
ragged values (x[:n_i]): Shape/Size/Rank, and with them ExpandDims, Squeeze, Reshape and
Transpose (one property test for all), gradients.
"""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from pfor_core import testing

ITERS = st.sampled_from([0, 1, 2, 3])
DIMS = st.lists(st.integers(0, 4), max_size=4)


def arg(rng, shape, stacked, n, dtype=np.float32):
    return testing.random_values(rng, ([n] if stacked else []) + list(shape), dtype)


@given(data=st.data(), shapes=st.lists(DIMS, min_size=1, max_size=3), n=ITERS,
       out_type=st.sampled_from([tf.int32, tf.int64]),
       unknown=st.sampled_from([None, "dims", "rank"]))
def test_shape_queries_are_invariant(data, shapes, n, out_type, unknown):
    stacked = [data.draw(st.booleans()) for _ in shapes]
    stacked[0] = True
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    args = [arg(rng, s, k, n) for s, k in zip(shapes, stacked)]

    def queries(*values):
        first = values[0]  # raw ops: tf.shape & co. fold static shapes into constants
        return (tf.raw_ops.Shape(input=first, out_type=out_type),
                tf.raw_ops.Size(input=first, out_type=out_type), tf.raw_ops.Rank(input=first),
                tf.shape_n(list(values), out_type=out_type))

    if unknown:
        testing.check_op_unknown_shapes(queries, args, stacked=stacked, n=n,
                                        known_rank=unknown == "dims")
    else:
        testing.check_op(queries, args, stacked=stacked, n=n)


@pytest.mark.parametrize("op_type", ["Reshape", "Fill", "BroadcastTo", "Tile"])
def test_stacked_shapes_not_known_statically(op_type):
    """A stacked target shape the body cannot prove the same in every iteration: Fill,
    BroadcastTo and Tile make ragged values (fill.py), and Reshape of an
    invariant value too (reshape.py), which are one shape after all here."""
    x = tf.reshape(tf.range(6.0), [2, 3])
    targets = tf.constant([[3, 2], [3, 2], [3, 2]])

    def loop_fn(i):
        target = tf.gather(targets, i)
        if op_type == "Reshape":
            return tf.reshape(x, target)
        if op_type == "Fill":
            return tf.fill(target, 1.0)
        if op_type == "BroadcastTo":
            return tf.broadcast_to(x[:1, :1], target)
        return tf.tile(x, target)

    got = testing.assert_matches_loop(loop_fn, 3, fallback="error")
    assert got.shape == ([3, 6, 6] if op_type == "Tile" else [3, 3, 2])


WIDTH, D = 5, 3


def _draw(data):
    return testing.draw_rows(data, width=WIDTH, inner=(D,))


SHAPE = {
    "shape": lambda r: tf.shape(r), "size": lambda r: tf.size(r),
    "rank": lambda r: tf.raw_ops.Rank(input=r) + 0 * tf.size(r),
    "shape_of_matrix": lambda r: tf.shape(tf.matmul(r, r, transpose_b=True), out_type=tf.int64),
}


SHAPED = {
    "expand_front": lambda r: tf.expand_dims(r, 0),
    "expand_back": lambda r: tf.expand_dims(r, -1),
    "squeeze": lambda r: tf.squeeze(tf.expand_dims(r, 1), [1]),
    "reshape_split": lambda r: tf.reshape(tf.concat([r, r], 1), [-1, 2, D]),
    "reshape_ones": lambda r: tf.reshape(r, [1, -1, 1, D]),
    "reshape_merge_back": lambda r: tf.reshape(tf.reshape(r, [-1, D, 1]), [-1, D]),
    "transpose": lambda r: tf.transpose(r),
    "transpose_3": lambda r: tf.transpose(tf.reshape(r, [-1, 1, D]), [2, 0, 1]),
    "heads": lambda r: tf.transpose(tf.reshape(tf.concat([r, r], 1), [-1, 2, D]), [1, 0, 2]),
}


@pytest.mark.parametrize("name", sorted(SHAPE) + sorted(SHAPED))
@settings(max_examples=3)
@given(data=st.data())
def test_shape_ops(name, data):
    n, lengths, x = _draw(data)
    fn = SHAPE.get(name) or SHAPED[name]
    testing.assert_matches_loop(lambda i: fn(testing.rows(x, lengths, i)), n, ragged=name in SHAPED,
                                modes=testing.draw_modes(data))


@settings(max_examples=6)
@given(data=st.data())
def test_shape_op_gradients(data):
    n, lengths, x = _draw(data)
    testing.assert_gradients_match(
             lambda i: tf.reduce_sum(SHAPED["heads"](testing.rows(x, lengths, i)) ** 2, [0, 1]),
             [x], n, chunked=data.draw(st.booleans(), label="chunked"))
