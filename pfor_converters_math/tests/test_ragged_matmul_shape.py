"""Matrix products and shape ops of ragged values (x[:n_i]) against the sequential
loop: R x U as one matmul, R x R contracting over the varying dimension (attention),
einsum, Shape/Size/Rank, ExpandDims, Squeeze, Reshape, Transpose, gradients."""

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


# Bodies of r = x[:n_i] ([L_i, D]), s = a stacked [D, 2], u = an invariant [D, 2].
MATMUL = {
    "r_u": lambda r, s, u: r @ u,
    "r_u_t": lambda r, s, u: tf.matmul(r, tf.transpose(u), transpose_b=True),
    "r_u_chain": lambda r, s, u: tf.nn.relu(tf.reshape(tf.transpose(
        tf.reshape(r @ u, [-1, 2, 1]), [0, 2, 1]), [-1, 2]) @ tf.transpose(u)) @ u,
    "u_r": lambda r, s, u: tf.matmul(u, r, transpose_a=True, transpose_b=True),
    "r_s": lambda r, s, u: tf.matmul(r, s),
    "s_r": lambda r, s, u: tf.matmul(s, r, transpose_a=True, transpose_b=True),
    "r_r": lambda r, s, u: tf.matmul(r, r, transpose_b=True),
    "r_r_contract": lambda r, s, u: tf.matmul(r, r, transpose_a=True),
    "attention": lambda r, s, u: tf.matmul(tf.nn.softmax(tf.matmul(r, r, transpose_b=True)), r),
    "batch_r_u": lambda r, s, u: tf.matmul(tf.stack([r, 2 * r]), u),
    "batch_u_r": lambda r, s, u: tf.matmul(tf.stack([u, u]), tf.stack([r, r]),
                                           adjoint_a=True, adjoint_b=True),
    "batch_r_s": lambda r, s, u: tf.matmul(tf.stack([r, r]), tf.stack([s, s])),
    "batch_s_r": lambda r, s, u: tf.matmul(tf.stack([s, s]), tf.stack([r, r]),
                                           adjoint_a=True, adjoint_b=True),
    "batch_r_r": lambda r, s, u: tf.matmul(tf.stack([r, r]), tf.stack([r, -r]), adjoint_b=True),
    "einsum_r_u": lambda r, s, u: tf.einsum("ld,de->le", r, u),
    "einsum_u_r": lambda r, s, u: tf.einsum("de,ld->el", u, r),
    "einsum_s_r": lambda r, s, u: tf.einsum("de,ld->le", s, r),
    "einsum_r_s": lambda r, s, u: tf.einsum("ld,de->el", r, s),
    "einsum_r_r": lambda r, s, u: tf.einsum("ld,kd->lk", r, r),
    "einsum_contract": lambda r, s, u: tf.einsum("ld,le->de", r, r),
    "einsum_one": lambda r, s, u: tf.einsum("ld->dl", r),
}
FIXED = {"r_r_contract", "einsum_contract"}  # no varying dimension left


@pytest.mark.parametrize("name", sorted(MATMUL))
@settings(max_examples=3)
@given(data=st.data())
def test_matmul(name, data):
    n, lengths, x = _draw(data)
    s, u = _values(data, [n, D, 2]), _values(data, [D, 2])
    testing.assert_matches_loop(
             lambda i: MATMUL[name](testing.rows(x, lengths, i), tf.gather(s, i), u), n,
             ragged=name not in FIXED, modes=testing.draw_modes(data))


def test_ragged_rows_times_invariant_under_xla():
    # Packing the rows needs their run-time count; under XLA the padded product runs.
    x, u = tf.reshape(tf.range(2 * WIDTH * D, dtype=tf.float32), [2, WIDTH, D]), tf.ones([D, 2])
    lengths = tf.constant([3, 0])
    body = lambda i: tf.reduce_sum(testing.rows(x, lengths, i) @ u, 0)  # noqa: E731
    got = tf.function(lambda: pf.pfor(body, 2, fallback="error"), jit_compile=True)()
    testing.assert_rows_match(got, [body(0), body(1)])


def test_matmul_of_a_varying_dimension_against_a_fixed_one_falls_back():
    x, y = tf.ones([2, WIDTH, D]), tf.ones([2, D, WIDTH])
    n = tf.constant([WIDTH, WIDTH])
    report = pf.explain(lambda i: tf.matmul(tf.gather(y, i), testing.rows(x, n, i)), 2)
    assert [r.op_type for r in report.fallbacks] == ["MatMul"]


def test_contraction_over_other_sizes_fails_like_the_loop():
    x = tf.ones([3, WIDTH, D])
    a, b = tf.constant([2, 3, 0]), tf.constant([2, 4, 0])
    testing.assert_fails_like_loop(
        lambda i: tf.matmul(testing.rows(x, a, i), testing.rows(x, b, i), transpose_a=True), 3,
        match="differ")


@settings(max_examples=10)
@given(data=st.data())
def test_matmul_gradients(data):
    n, lengths, x = _draw(data)
    u = _values(data, [D, 2])
    name = data.draw(st.sampled_from(["r_u", "r_u_chain", "attention", "einsum_r_r",
                                      "r_r_contract"]))
    testing.assert_gradients_match(
             lambda i: tf.reduce_sum(MATMUL[name](testing.rows(x, lengths, i), None, u) ** 2),
             [x, u], n, chunked=data.draw(st.booleans(), label="chunked"))


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
