"""Property tests for the sparse segment reductions (SparseSegment{Sum,Mean,SqrtN}, with
and without NumSegments) and their gradient ops: every layout of data, indices and
segment ids against the sequential loop, with fallback="error"."""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing

OPS = ("Sum", "Mean", "SqrtN")
FLOATS = (tf.float32, tf.float64)
INTS = (tf.int32, tf.int64)


def forward(kind, with_num):
    op = getattr(tf.raw_ops, f"SparseSegment{kind}" + ("WithNumSegments" if with_num else ""))
    if with_num:
        return lambda d, i, s, num: op(data=d, indices=i, segment_ids=s, num_segments=num)
    return lambda d, i, s: op(data=d, indices=i, segment_ids=s)


def grad_op(kind):
    op = getattr(tf.raw_ops, f"SparseSegment{kind}Grad")
    return lambda g, i, s, dim0: op(grad=g, indices=i, segment_ids=s, output_dim0=dim0)


def sorted_ids(rng, k, top):
    return np.sort(rng.integers(0, top + 1, size=k)) if top >= 0 else np.zeros([k], int)


def layout(n, rng, make, stacked, dtype):
    """A value for one input: ``make()`` per iteration when stacked, once when not."""
    if stacked:
        return tf.constant(np.stack([make() for _ in range(n)]) if n else
                           np.zeros([0] + list(np.shape(make()))), dtype)
    return tf.constant(make(), dtype)


@st.composite
def case(draw, *, ids_layout):
    """n, a seed and the stacked flags of (data, indices, ids); ids_layout: "U", "S" or
    "*" (drawn); at least one input is stacked."""
    n = draw(st.integers(0, 4))
    flags = draw(st.sampled_from([(a, b, c) for a in (0, 1) for b in (0, 1) for c in (0, 1)
                                  if (a or b or c) and (ids_layout == "*" or
                                                        c == (ids_layout == "S"))]))
    return n, draw(st.integers(0, 2**16)), [bool(f) for f in flags]


def inputs(data, n, seed, stacked, *, ids_top=None, num=None):
    """data [d0, 2], indices and sorted segment ids of length k, per iteration or shared."""
    rng = np.random.default_rng(seed)
    d0 = data.draw(st.integers(1, 4), label="rows of data")
    k = data.draw(st.integers(0, 5), label="elements")
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    top = data.draw(st.integers(0, 3), label="largest id") if ids_top is None else ids_top
    values = layout(n, rng, lambda: rng.standard_normal([d0, 2]), stacked[0], dtype)
    indices = layout(n, rng, lambda: rng.integers(0, d0, size=k), stacked[1],
                     data.draw(st.sampled_from(INTS), label="indices dtype"))
    per_iteration_top = lambda: top if num is None else int(rng.integers(0, num))  # noqa: E731
    ids = layout(n, rng, lambda: sorted_ids(rng, k, per_iteration_top()), stacked[2],
                 data.draw(st.sampled_from(INTS), label="ids dtype"))
    return [values, indices, ids]


@given(st.data(), case(ids_layout="U"), st.sampled_from(OPS))
def test_sparse_segment_with_invariant_ids(data, drawn, kind):
    n, seed, stacked = drawn
    args = inputs(data, n, seed, stacked)
    testing.check(data, forward(kind, False), args, stacked=stacked, n=n)


@settings(max_examples=20)
@given(st.data(), case(ids_layout="S"), st.sampled_from(OPS))
def test_sparse_segment_with_stacked_ids_is_ragged(data, drawn, kind):
    """Each iteration has max(ids) + 1 segments: a ragged result."""
    n, seed, stacked = drawn
    rng = np.random.default_rng(seed + 1)
    tops = iter(rng.integers(0, 4, size=64).tolist())
    args = inputs(data, n, seed, stacked, ids_top=next(tops))
    # Rows of differing largest ids: rebuild the ids per iteration with their own top.
    k = args[2].shape[-1]
    args[2] = tf.constant(np.stack([sorted_ids(rng, k, next(tops)) for _ in range(n)])
                          if n else np.zeros([0, k]), args[2].dtype)
    mode = data.draw(st.sampled_from(["eager", "graph"]), label="mode")
    testing.check_op(forward(kind, False), args, stacked=stacked, n=n, mode=mode,
                     ragged_outputs=True)


@given(st.data(), case(ids_layout="*"), st.sampled_from(OPS))
def test_sparse_segment_with_num_segments(data, drawn, kind):
    n, seed, stacked = drawn
    num = data.draw(st.integers(1, 4), label="num_segments")
    args = inputs(data, n, seed, stacked, num=num)
    num_type = data.draw(st.sampled_from(INTS), label="num_segments dtype")
    testing.check(data, forward(kind, True), args + [tf.constant(num, num_type)],
                  stacked=stacked + [False], n=n)


@given(st.data(), st.sampled_from(OPS))
def test_sparse_segment_grad(data, kind):
    n = data.draw(st.integers(0, 4), label="n")
    stacked = data.draw(st.sampled_from(testing.invariance_combinations(3)), label="stacked")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    segments = data.draw(st.integers(1, 3), label="rows of grad")
    dim0 = data.draw(st.integers(1, 4), label="output_dim0")
    # At least one element: with none, TensorFlow's kernel leaves its output unset.
    k = data.draw(st.integers(1, 5), label="elements")
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    # The gradient ops take ids in any order (no sorting needed).
    args = [layout(n, rng, lambda: rng.standard_normal([segments, 3]), stacked[0], dtype),
            layout(n, rng, lambda: rng.integers(0, dim0, size=k), stacked[1],
                   data.draw(st.sampled_from(INTS), label="indices dtype")),
            layout(n, rng, lambda: rng.integers(0, segments, size=k), stacked[2],
                   data.draw(st.sampled_from(INTS), label="ids dtype")),
            tf.constant(dim0)]
    testing.check(data, grad_op(kind), args, stacked=list(stacked) + [False], n=n)


@given(st.integers(1, 3), st.sampled_from(OPS))
def test_jacobian_of_a_sparse_segment_reduction(n, kind):
    """The jacobian's body differentiates the op: its gradient op with a stacked grad."""
    x = tf.constant(np.random.default_rng(n).standard_normal([4, 2]))
    indices, ids = tf.constant([3, 0, 0, 2]), tf.constant([0, 0, 2, 2])
    fn = getattr(tf.sparse, {"Sum": "segment_sum", "Mean": "segment_mean",
                             "SqrtN": "segment_sqrt_n"}[kind])
    got = pf.jacobian(lambda v: fn(v[:n + 1], indices % (n + 1), ids), x, fallback="error")
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = fn(x[:n + 1], indices % (n + 1), ids)
    testing.assert_allclose(got, tape.jacobian(y, x, experimental_use_pfor=False))


ROWS = tf.constant(np.arange(24.0).reshape([3, 4, 2]))


def test_an_index_outside_an_iterations_data_fails_like_the_loop():
    indices = tf.constant([[0, 1], [3, 4], [0, 0]])  # 4: no row 4 in a 4-row data
    testing.assert_fails_like_loop(lambda i: tf.raw_ops.SparseSegmentSum(
        data=tf.gather(ROWS, i), indices=tf.gather(indices, i), segment_ids=[0, 1]), 3)


def test_a_negative_id_fails_like_the_loop():
    ids = tf.constant([[0, 1], [-1, 0], [0, 0]])
    testing.assert_fails_like_loop(lambda i: tf.raw_ops.SparseSegmentMean(
        data=tf.gather(ROWS, i), indices=[0, 1], segment_ids=tf.gather(ids, i)), 3)


def test_an_id_at_num_segments_fails_like_the_loop():
    ids = tf.constant([[0, 1], [0, 2], [0, 0]])
    testing.assert_fails_like_loop(lambda i: tf.raw_ops.SparseSegmentSqrtNWithNumSegments(
        data=tf.gather(ROWS, i), indices=[0, 1], segment_ids=tf.gather(ids, i),
        num_segments=2), 3)


def test_a_gradient_index_at_output_dim0_fails_like_the_loop():
    indices = tf.constant([[0, 1], [1, 2], [0, 0]])
    testing.assert_fails_like_loop(lambda i: tf.raw_ops.SparseSegmentSumGrad(
        grad=tf.gather(ROWS, i), indices=tf.gather(indices, i), segment_ids=[0, 1],
        output_dim0=2), 3)


def test_a_gradient_id_beyond_the_grad_rows_fails_like_the_loop():
    ids = tf.constant([[0, 3], [4, 0], [0, 0]])
    testing.assert_fails_like_loop(lambda i: tf.raw_ops.SparseSegmentMeanGrad(
        grad=tf.gather(ROWS, i), indices=[0, 1], segment_ids=tf.gather(ids, i),
        output_dim0=2), 3)
