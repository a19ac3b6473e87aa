"""Elementwise ops of ragged values (x[:n_i]) against the sequential loop: unary ops,
broadcasting against invariant, stacked and other ragged operands, run-time checks of
the sizes, gradients free of the padding's NaN."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing

WIDTH = 5


def _values(data, shape, low=-2.0, high=2.0):
    return tf.constant(np.asarray(data.draw(st.lists(
        st.floats(low, high, width=32), min_size=int(np.prod(shape)),
        max_size=int(np.prod(shape))), label="values"), np.float32).reshape(shape))


def _ragged(data, n, inner=(), lengths=None):
    """A ragged operand: (x, lengths) for testing.rows(x, lengths, i)."""
    if lengths is None:
        lengths = tf.constant(data.draw(testing.lengths_strategy(n, WIDTH), label="lengths"),
                              tf.int32)
    return _values(data, [n, WIDTH, *inner]), lengths


UNARY = {
    "exp": tf.exp, "log": lambda r: tf.math.log(tf.abs(r) + 0.1), "log_raw": tf.math.log,
    "sqrt": lambda r: tf.sqrt(tf.abs(r)), "abs": tf.abs, "reciprocal": tf.math.reciprocal,
    "cast": lambda r: tf.cast(r * 3, tf.int32), "sigmoid": tf.sigmoid,
    "zeros_like": tf.zeros_like, "ones_like": tf.ones_like,
    "not": lambda r: tf.logical_not(r > 0), "floor": tf.floor,
}


@settings(max_examples=24)
@given(data=st.data())
def test_unary(data):
    name = data.draw(st.sampled_from(sorted(UNARY)), label="op")
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _ragged(data, n, inner=(2,))
    testing.assert_matches_loop(lambda i: UNARY[name](testing.rows(x, lengths, i)), n, ragged=True,
                                modes=testing.draw_modes(data))


# Per-iteration shapes of the other operand against a ragged [L_i, 3]; per-iteration
# rank-1 ragged [L_i] against [] and [1].
OTHER_SHAPES = {2: [(), (3,), (1, 3), (1, 1)], 1: [(), (1,)]}
BINARY = {"add": tf.add, "mul": tf.multiply, "sub": tf.subtract, "div": tf.math.divide,
          "maximum": tf.maximum, "less": tf.less, "equal": tf.equal, "pow": tf.pow}


@pytest.mark.parametrize("pattern", ["RS", "SR", "RU", "UR", "RR"])
@settings(max_examples=8)
@given(data=st.data())
def test_binary(pattern, data):
    name = data.draw(st.sampled_from(sorted(BINARY)), label="op")
    n = data.draw(st.integers(0, 4), label="n")
    rank = data.draw(st.sampled_from([1, 2]), label="rank")
    inner = (3,) if rank == 2 else ()
    x, lengths = _ragged(data, n, inner)
    y, _ = _ragged(data, n, inner, lengths=lengths)
    shape = data.draw(st.sampled_from(OTHER_SHAPES[rank]), label="other shape")
    other = {"S": _values(data, [n, *shape]), "U": _values(data, list(shape))}
    op = BINARY[name]

    def operand(code, i, first):
        if code == "R":
            return testing.rows(x if first else y, lengths, i)
        return tf.gather(other["S"], i) if code == "S" else other["U"]

    def body(i):
        a, b = operand(pattern[0], i, True), operand(pattern[1], i, False)
        if name == "pow":
            a = tf.abs(a) + 0.5
        return op(a, b)

    testing.assert_matches_loop(body, n, ragged=True,
                                modes=testing.draw_modes(data))


@settings(max_examples=8)
@given(data=st.data())
def test_ragged_operands_broadcast_a_size_of_one(data):
    """x[:a_i] + y[:b_i] with b_i equal to a_i or 1 (the loop broadcasts the 1), other
    lengths tensors than the same one, of other padded widths."""
    n = data.draw(st.integers(0, 4), label="n")
    a = data.draw(testing.lengths_strategy(n, WIDTH), label="a")
    ones = data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="ones")
    b = [1 if o else k for o, k in zip(ones, a)]
    if data.draw(st.booleans(), label="swap"):
        a, b = b, a
    x, y = _values(data, [n, WIDTH, 2]), _values(data, [n, WIDTH + 2, 2])
    a, b = tf.constant(a, tf.int32), tf.constant(b, tf.int32)
    testing.assert_matches_loop(lambda i: testing.rows(x, a, i) * testing.rows(y, b, i), n, ragged=True,
                                modes=testing.draw_modes(data))


def test_ragged_operands_of_other_sizes_fail_like_the_loop():
    x = tf.ones([3, WIDTH])
    a, b = tf.constant([2, 3, 0]), tf.constant([2, 4, 0])
    testing.assert_fails_like_loop(lambda i: testing.rows(x, a, i) + testing.rows(x, b, i), 3,
                                   match="do not broadcast")


def test_varying_dimension_against_a_stacked_fixed_size():
    """A ragged dimension against a stacked one of size 3: the loop's shapes agree when
    L_i is 1 or 3 (checked when it runs, the result is uniform), and fail otherwise."""
    x, s = tf.reshape(tf.range(2.0 * WIDTH), [2, WIDTH]), tf.reshape(tf.range(6.0), [2, 3])
    n = tf.constant([3, 1])
    testing.assert_matches_loop(lambda i: testing.rows(x, n, i) + tf.gather(s, i), 2, modes=testing.RUN_MODES)
    testing.assert_fails_like_loop(
        lambda i: testing.rows(x, tf.constant([3, 2]), i) + tf.gather(s, i), 2, match="broadcast")


@pytest.mark.parametrize("pattern", ["R**", "*R*", "**R", "RR*", "R*R", "*RR", "RRR"])
@settings(max_examples=3)
@given(data=st.data())
def test_select(pattern, data):
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _ragged(data, n, (2,))
    y, _ = _ragged(data, n, (2,), lengths=lengths)
    s = _values(data, [n, 2])
    u = _values(data, [2])
    codes = ["S" if data.draw(st.booleans(), label=f"stacked {k}") else "U"
             for k in range(3)]

    def body(i):
        values = []
        for k, code in enumerate(pattern):
            if code == "R":
                values.append(testing.rows(x if k != 1 else y, lengths, i))
            else:
                values.append(tf.gather(s, i) if codes[k] == "S" else u)
        return tf.where(values[0] > 0, values[1], values[2])

    testing.assert_matches_loop(body, n, ragged=True,
                                modes=testing.draw_modes(data))


@settings(max_examples=6)
@given(data=st.data())
def test_add_n_clip_and_same_shape_kernels(data):
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _ragged(data, n, (2,))
    y, _ = _ragged(data, n, (2,), lengths=lengths)

    def body(i):
        a, b = testing.rows(x, lengths, i), testing.rows(y, lengths, i)
        total = tf.math.add_n([a, b, a])
        clipped = tf.raw_ops.ClipByValue(t=total, clip_value_min=-1.0,
                                         clip_value_max=tf.gather(y[:, 0, 0], i))
        grad = tf.raw_ops.TanhGrad(y=tf.tanh(a), dy=b)
        return clipped + grad

    testing.assert_matches_loop(body, n, ragged=True,
                                modes=testing.draw_modes(data))


def test_add_n_of_other_sizes_fails_like_the_loop():
    x = tf.ones([3, WIDTH])
    a, b = tf.constant([2, 3, 0]), tf.constant([2, 1, 0])
    testing.assert_fails_like_loop(
        lambda i: tf.math.add_n([testing.rows(x, a, i), testing.rows(x, b, i)]), 3,
        error=(tf.errors.InvalidArgumentError, ValueError))


@pytest.mark.parametrize("kind", ["ragged", "stacked", "invariant"])
@settings(max_examples=3)
@given(data=st.data())
def test_same_shape_kernels_of_operands_fixed_where_another_varies(kind, data):
    """Operands that must have equal shapes, one varying in a dimension where another
    is fixed (a row count per iteration that happens to be the same everywhere, a
    stacked or invariant operand of a static size): checked there by the fixed size."""
    n = data.draw(st.integers(1, 4), label="n")
    x, lengths = _ragged(data, n, (3,))
    fixed = _values(data, [n, 3])
    rows = tf.fill([n], 3) + tf.zeros([n], tf.int32)  # the same in every iteration
    y = _values(data, [n, 3, WIDTH])

    def body(i):
        a = tf.transpose(testing.rows(x, lengths, i))  # [3, L_i]: varies in dim 1
        b = tf.gather(y, i)[:tf.gather(rows, i), :tf.gather(lengths, i)]  # varies in both
        if kind != "ragged":  # [3] against [L_i] where every L_i is 3
            a = tf.gather(fixed, i) if kind == "stacked" else fixed[0]
            b = testing.rows(x, rows, i)[:, 0]
        return (tf.math.add_n([a, b]) + tf.raw_ops.TanhGrad(y=tf.tanh(b), dy=a)
                + tf.raw_ops.SigmoidGrad(y=tf.sigmoid(a), dy=b))

    testing.assert_matches_loop(body, n, ragged=True, modes=testing.draw_modes(data))


def test_a_fixed_operand_against_other_sizes_fails_like_the_loop():
    x, s = tf.ones([2, WIDTH]), tf.ones([2, 3])
    testing.assert_fails_like_loop(
        lambda i: tf.math.add_n([testing.rows(x, tf.constant([3, 2]), i), tf.gather(s, i)]), 2,
        error=(tf.errors.InvalidArgumentError, ValueError))


GRADIENT_BODIES = {
    "log": lambda r, w: tf.reduce_sum(tf.math.log(tf.abs(r)) * w, 0),
    "sqrt": lambda r, w: tf.reduce_sum(tf.sqrt(tf.abs(r)) * w, 0),
    "reciprocal": lambda r, w: tf.reduce_sum(1.0 / r + w, 0),
    "ratio": lambda r, w: tf.reduce_sum(r / (r * r + w * w), 0),
    "select": lambda r, w: tf.reduce_sum(tf.where(r > 0, tf.exp(r), r * w), 0),
}


@settings(max_examples=10)
@given(data=st.data())
def test_gradients(data):
    name = data.draw(st.sampled_from(sorted(GRADIENT_BODIES)), label="body")
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _ragged(data, n, (2,))
    w = _values(data, [2]) + 3.0
    chunked = data.draw(st.booleans(), label="chunked")
    testing.assert_gradients_match(lambda i: GRADIENT_BODIES[name](testing.rows(x, lengths, i), w),
                                   [x, w], n, chunked=chunked)


# -- Ragged operands of equal per-iteration sizes --------------------------------------
# Two operands that vary in the same dimension, their lengths equal per iteration but
# held by different tensors (as TFP's Bates.log_prob makes them: a tf.range of a row's
# total count against a tf.repeat by its counts), in the shapes that meet there: the
# same rank, a dimension of size 1 against the varying one, other ranks, a varying
# dimension against a fixed size. Also while a tf.compat.v1 graph is built, where a
# tensor's == is object identity (it failed the size check on equal sizes).

def _equal_sizes_body(kind, x, y, lengths):
    """A body from numpy inputs (constants made inside it, so it builds in any graph)."""

    def rows(values, i, dim=0):  # a fresh lengths tensor per call: equal, not the same
        count = tf.gather(tf.constant(lengths, tf.int32), i)
        row = tf.gather(tf.constant(values), i)
        return row[:count] if dim == 0 else row[:, :count]

    def body(i):
        if kind == "same rank":  # [L_i, 2] and [L_i, 2]
            return rows(x, i) * rows(y, i) - rows(y, i)
        if kind == "size one":  # [L_i, 1] against [L_i, 2]
            return rows(x, i)[:, :1] + rows(y, i)
        if kind == "other ranks":  # [L_i] against [2, L_i]
            return rows(x, i)[:, 0] - rows(np.swapaxes(y, 1, 2), i, dim=1)
        if kind == "fixed size":  # [L_i, 2] against a stacked [2, 2] (L_i is 1 or 2)
            return rows(x, i) + tf.gather(tf.constant(y), i)[:2]
        counts = tf.gather(tf.constant(lengths, tf.int32), i)  # "range and repeat"
        k = tf.cast(tf.range(counts), tf.float32)
        return k - tf.repeat(tf.gather(tf.constant(x[:, 0, :1]), i), tf.reshape(counts, [1]))

    return body


def _pfor_in_a_v1_graph(body, n):
    """``pf.pfor(body, n, fallback="error", ragged_outputs=True)`` built in a
    tf.compat.v1 graph and run in a session, as an eager tf.RaggedTensor."""
    import pfor_core as pf  # pylint: disable=import-outside-toplevel

    with tf.Graph().as_default():
        out = pf.pfor(body, n, fallback="error", ragged_outputs=True)
        with tf.compat.v1.Session() as session:
            value = session.run(out)
    if isinstance(value, np.ndarray):
        return tf.constant(value)
    return tf.RaggedTensor.from_nested_row_splits(value.flat_values,
                                                  value.nested_row_splits)


@pytest.mark.parametrize("kind", ["same rank", "size one", "other ranks", "fixed size",
                                  "range and repeat"])
@settings(max_examples=4)
@given(data=st.data())
def test_ragged_operands_of_equal_sizes_broadcast(kind, data):
    n = data.draw(st.integers(0, 4), label="n")
    sizes = st.sampled_from([1, 2]) if kind == "fixed size" else st.integers(0, WIDTH)
    lengths = data.draw(st.lists(sizes, min_size=n, max_size=n), label="lengths")
    x = _values(data, [n, WIDTH, 2]).numpy()
    y = _values(data, [n, WIDTH, 2]).numpy()
    body = _equal_sizes_body(kind, x, y, lengths)
    testing.assert_matches_loop(body, n, ragged=True, modes=testing.draw_modes(data))
    expected = [body(tf.constant(j)) for j in range(n)]
    testing.assert_rows_match(_pfor_in_a_v1_graph(body, n), expected, where=" (v1 graph)")


def test_bates_log_prob_in_a_v1_graph():
    """TFP's Bates.log_prob sums a segmented range (a tf.range of each value's number
    of terms against a tf.repeat by them): the same as tf.map_fn's, per-example total
    counts too, eagerly and in a tf.compat.v1 graph."""
    pytest.importorskip("tf_keras")
    tfd = pytest.importorskip("tensorflow_probability").distributions
    import pfor_core as pf  # pylint: disable=import-outside-toplevel

    values = np.array([[0.2, 0.45], [0.7, 0.1], [0.3, 0.95]], np.float32)
    counts = np.array([4.0, 7.0, 2.0], np.float32)

    def log_prob(args):
        value, count = args
        return tfd.Bates(total_count=count, low=0.0, high=1.0).log_prob(value)

    elems = (tf.constant(values), tf.constant(counts))
    want = tf.map_fn(log_prob, elems, fn_output_signature=tf.float32)
    testing.assert_allclose(pf.vectorized_map(log_prob, elems, fallback="error"), want,
                            atol=1e-5)
    with tf.Graph().as_default():
        got = pf.vectorized_map(log_prob, (tf.constant(values), tf.constant(counts)),
                                fallback="error")
        with tf.compat.v1.Session() as session:
            got = session.run(got)
    testing.assert_allclose(tf.constant(got), want, atol=1e-5)
