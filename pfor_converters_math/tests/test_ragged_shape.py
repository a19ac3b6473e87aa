"""Shape ops of ragged values (x[:n_i]) against the sequential loop: Shape/Size/Rank,
ExpandDims, Squeeze, Reshape, Transpose, gradients."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing

WIDTH, D = 5, 3


def _values(data, shape):
    size = int(np.prod(shape))
    return tf.constant(np.asarray(data.draw(st.lists(
        st.floats(-2, 2, width=32), min_size=size, max_size=size), label="values"),
        np.float32).reshape(shape))


def _draw(data):
    n = data.draw(st.integers(0, 4), label="n")
    lengths = tf.constant(data.draw(testing.lengths_strategy(n, WIDTH), label="lengths"), tf.int32)
    return n, lengths, _values(data, [n, WIDTH, D])



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


def test_reshape_flattening_a_varying_dimension_with_others():
    x = tf.ones([2, WIDTH, D])
    n = tf.constant([2, 4])
    testing.assert_matches_loop(lambda i: tf.reshape(testing.rows(x, n, i), [-1]), 2, graph=True,
                                ragged_outputs=True)


def test_reshape_across_the_varying_dimension_falls_back():
    x = tf.ones([2, WIDTH, D])
    n = tf.constant([2, 4])
    report = pf.explain(lambda i: tf.reshape(testing.rows(x, n, i), [-1, 2]), 2)
    assert [r.op_type for r in report.fallbacks] == ["Reshape"]
    got = pf.pfor(lambda i: tf.reduce_sum(tf.reshape(testing.rows(x, n, i), [-1, 2])), 2,
                  fallback="loop")
    assert got.numpy().tolist() == [6.0, 12.0]


@settings(max_examples=6)
@given(data=st.data())
def test_shape_op_gradients(data):
    n, lengths, x = _draw(data)
    testing.assert_gradients_match(
             lambda i: tf.reduce_sum(SHAPED["heads"](testing.rows(x, lengths, i)) ** 2, [0, 1]),
             [x], n, chunked=data.draw(st.booleans(), label="chunked"))
