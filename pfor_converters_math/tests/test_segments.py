"""Property tests for segment reductions and scatters.

Sorted segment reductions with per-iteration ids against the loop, with no fallback: a
number of segments that differs per iteration, empty segments between others, no
element at all, stacked / invariant / ragged data, with gradients; a negative or unsorted
id fails like the loop.
"""

import functools

import numpy as np
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing

# Tests that sample among many op types or attrs get more examples (each is cheap).
MANY = 35


iters = st.sampled_from([0, 1, 2, 3, 4, 3])
DTYPES = [tf.float32, tf.float64, tf.int32]
SORTED = [tf.math.segment_sum, tf.math.segment_mean, tf.math.segment_max,
          tf.math.segment_min, tf.math.segment_prod]
UNSORTED = [tf.math.unsorted_segment_sum, tf.math.unsorted_segment_max,
            tf.math.unsorted_segment_min, tf.math.unsorted_segment_prod]


def values(rng, shape, dtype):
    return tf.cast(rng.integers(-4, 5, size=shape), dtype)


def draw_dtype(data, op=None):
    dtypes = [tf.float32, tf.float64] if op is tf.math.segment_mean else DTYPES
    return data.draw(st.sampled_from(dtypes))


@settings(max_examples=MANY)
@given(st.data())
def test_sorted_segments(data):
    """Stacked data, invariant sorted ids (gaps leave empty segments)."""
    op = data.draw(st.sampled_from(SORTED))
    d0 = data.draw(st.integers(0, 5))
    ids = sorted(data.draw(st.lists(st.integers(0, 3), min_size=d0, max_size=d0)))
    rest = data.draw(st.lists(st.integers(0, 3), max_size=2))
    dtype = draw_dtype(data, op)
    id_type = data.draw(st.sampled_from([tf.int32, tf.int64]))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = values(rng, [n, d0] + rest, dtype)
    ids = tf.constant(ids, id_type, shape=[d0])
    testing.check(data, op, [x, ids], stacked=[True, False], n=n)


def test_sorted_segments_with_stacked_ids_convert():
    """Per-iteration max(id)+1 may differ: stacked ids make a ragged value
    (segments.convert_segment_ragged), here of one size in every iteration."""
    x = tf.ones([3, 4])
    ids = tf.constant([[0, 0, 1, 1], [0, 1, 1, 1], [0, 0, 0, 1]])
    loop_fn = testing.loop_fn_for(tf.math.segment_sum, [x, ids], [True, True])
    assert not pf.explain(loop_fn, 3).fallbacks
    testing.assert_matches_loop(loop_fn, 3, graph=True)


@given(st.data())
def test_sorted_segments_dynamic_ids(data):
    """Ids computed in the body from an outer tensor whose value is not static."""
    op = data.draw(st.sampled_from(SORTED))
    d0 = data.draw(st.integers(1, 4))
    ids = sorted(data.draw(st.lists(st.integers(0, 3), min_size=d0, max_size=d0)))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = values(rng, [n, d0, 2], tf.float32)
    ids_var = tf.Variable(ids)  # read in the body: not a constant

    def loop_fn(i):
        return op(tf.gather(x, i), ids_var.read_value())

    testing.assert_matches_loop(loop_fn, n, graph=True)


@settings(max_examples=MANY)
@given(st.data())
def test_unsorted_segments(data):
    op = data.draw(st.sampled_from(UNSORTED))
    id_shape = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=2))
    rest = data.draw(st.lists(st.integers(0, 3), max_size=1))
    num = data.draw(st.integers(0, 4))
    dtype = draw_dtype(data)
    id_type = data.draw(st.sampled_from([tf.int32, tf.int64]))
    stacked = data.draw(st.tuples(st.booleans(), st.booleans()).filter(any))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = values(rng, [n] * stacked[0] + id_shape + rest, dtype)
    # -1 (dropped) and every valid segment.
    ids = tf.constant(rng.integers(-1, num, size=[n] * stacked[1] + id_shape), id_type)
    testing.check(data, lambda a, b: op(a, b, num), [x, ids], stacked=stacked, n=n)


def _scatter_case(data, rng, n, stacked, unique):
    """Indices ``[I..., r]`` into a shape, updates ``[I..., shape[r:]]``."""
    shape = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    depth = data.draw(st.integers(1, len(shape)))
    count = data.draw(st.integers(0, 4))
    cells = int(np.prod(shape[:depth]))
    if unique:
        count = min(count, cells)

    def index_rows():
        flat = rng.permutation(cells)[:count] if unique else rng.integers(0, cells, count)
        return np.stack(np.unravel_index(flat, shape[:depth]), -1).reshape([count, depth])

    index_lead = data.draw(st.sampled_from([[], [1]]))  # an extra index batch axis
    rows = [index_rows() for _ in range(n if stacked[0] else 1)]
    indices = np.stack(rows + [np.zeros([count, depth], int)])[:len(rows)]
    indices = indices.reshape([n] * stacked[0] + index_lead + [count, depth])
    updates_shape = [n] * stacked[1] + index_lead + [count] + shape[depth:]
    return shape, indices, updates_shape


@settings(max_examples=MANY)
@given(st.data())
def test_scatter_nd(data):
    dtype = draw_dtype(data)
    id_type = data.draw(st.sampled_from([tf.int32, tf.int64]))
    stacked = data.draw(st.tuples(st.booleans(), st.booleans()).filter(any))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    shape, indices, updates_shape = _scatter_case(data, rng, n, stacked, unique=False)
    args = [tf.constant(indices, id_type), values(rng, updates_shape, dtype)]
    testing.check(data, lambda i, u: tf.scatter_nd(i, u, shape), args, stacked=stacked, n=n)


TENSOR_SCATTERS = {
    "update": tf.tensor_scatter_nd_update, "add": tf.tensor_scatter_nd_add,
    "sub": tf.tensor_scatter_nd_sub, "max": tf.tensor_scatter_nd_max,
    "min": tf.tensor_scatter_nd_min,
    "non_aliasing_add": lambda t, i, u: tf.raw_ops.ScatterNdNonAliasingAdd(
        input=t, indices=i, updates=u),
}


@settings(max_examples=MANY)
@given(st.data())
def test_tensor_scatter(data):
    name = data.draw(st.sampled_from(sorted(TENSOR_SCATTERS)))
    dtype = draw_dtype(data)
    id_type = data.draw(st.sampled_from([tf.int32, tf.int64]))
    stacked = data.draw(st.tuples(st.booleans(), st.booleans(), st.booleans()).filter(any))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    # Update with repeated indices has no defined winner: keep indices unique there.
    shape, indices, updates_shape = _scatter_case(data, rng, n, stacked[1:],
                                                  unique=name == "update")
    tensor = values(rng, [n] * stacked[0] + shape, dtype)
    args = [tensor, tf.constant(indices, id_type), values(rng, updates_shape, dtype)]
    testing.check(data, TENSOR_SCATTERS[name], args, stacked=stacked, n=n)


# -- validation the offset would lose ---------------------------------------------------
@settings(max_examples=8)
@given(st.data())
def test_unsorted_segment_id_out_of_range_fails_like_loop(data):
    """An id >= num_segments fails the loop's kernel; offset per iteration it would be a
    valid id of the next iteration's block, so pfor checks it (stacked or invariant)."""
    op = data.draw(st.sampled_from(UNSORTED + [tf.math.unsorted_segment_mean]))
    stacked_ids = data.draw(st.booleans())
    n = data.draw(st.integers(1, 3))
    bad = data.draw(st.integers(0, n - 1)) if stacked_ids else None
    x = tf.reshape(tf.range(n * 3, dtype=tf.float32), [n, 3])
    rows = [[0, 1, 2]] * n
    if stacked_ids:
        rows[bad] = [0, 3, 1]  # 3 == num_segments
    ids = tf.constant(rows) if stacked_ids else tf.constant([2, 0, 3])

    def loop_fn(i):
        return op(tf.gather(x, i), tf.gather(ids, i) if stacked_ids else ids, 3)

    testing.assert_fails_like_loop(loop_fn, n, match="out of range")


@settings(max_examples=10)
@given(st.data())
def test_unsorted_segment_ids_in_range_and_negative_match_loop(data):
    """Negative ids are dropped by the kernel (and by pfor); ids below num_segments
    pass the check. With no iterations, invariant bad ids are never checked."""
    op = data.draw(st.sampled_from(UNSORTED))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = values(rng, [n, 4, 2], tf.float32)
    ids = tf.constant(rng.integers(-2, 3, size=[n, 4]), tf.int32)
    testing.check(data, op, [x, ids, 3], stacked=[True, True, False], n=n)
    bad = tf.constant([0, 5, 1, 2])
    testing.assert_matches_loop(lambda i: op(tf.ones([4]) * tf.cast(i, tf.float32), bad, 3),
                                0, graph=True)


MAX_N, WIDTH = 4, 5


OPS = {"sum": tf.math.segment_sum, "mean": tf.math.segment_mean,
       "max": tf.math.segment_max, "min": tf.math.segment_min,
       "prod": tf.math.segment_prod}


# pfor eagerly, in a tf.function of run-time iters and in chunks of 2 against one run of
# the loop (ragged results row by row); nothing falls back. Property tests draw one of
# the modes per example instead (the examples cover all three).
check = functools.partial(testing.assert_matches_loop, modes=testing.RUN_MODES,
                          ragged_outputs=True)


def sorted_ids(rng, shape):
    """Sorted ids from 0 with gaps (empty segments) and repeats."""
    steps = rng.integers(0, 3, size=shape)  # the first is the first id
    return np.cumsum(steps, axis=-1)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(0, MAX_N), op=st.sampled_from(sorted(OPS)),
       data=st.sampled_from(["stacked", "invariant", "ragged"]), inner=st.booleans(),
       width=st.sampled_from([0, 1, WIDTH]), seed=st.integers(0, 2**16),
       mode=st.sampled_from(testing.RUN_MODES))
def test_segment_reduction_with_per_iteration_ids(n, op, data, inner, width, seed, mode):
    rng = np.random.default_rng(seed)
    xs = tf.constant(rng.normal(size=[MAX_N, width] + ([2] if inner else [])), tf.float32)
    ids = tf.constant(sorted_ids(rng, [MAX_N, width]), tf.int32)
    lengths = tf.constant(rng.integers(0, width + 1, size=MAX_N), tf.int32)
    fn = OPS[op]

    def body(i):
        if data == "ragged":
            return fn(xs[i, :lengths[i]], ids[i, :lengths[i]])
        return fn(xs[i] if data == "stacked" else xs[0], ids[i])

    check(body, n, modes=(mode,))
    if n:
        testing.assert_gradients_match(body, [xs], n, ragged=True)


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


def test_unsorted_segments_of_data_ragged_beyond_the_ids():
    """Rows whose own width differs per iteration (a gradient of a ragged value's rows
    summed by ids, as pf.dag_map's gradient inside pfor makes): the sums keep the width."""
    xs = tf.reshape(tf.range(36.0) - 10., [3, 4, 3])
    ids = tf.constant([[0, 2, 2, 1], [1, 1, 0, 0], [2, 0, 0, 2]])
    rows, widths, counts = tf.constant([4, 0, 3]), tf.constant([2, 3, 1]), tf.constant([3, 2, 4])
    for fn in UNSORTED:
        check(lambda i: fn(xs[i, :rows[i], :widths[i]], ids[i, :rows[i]], 3), 3)  # noqa: B023
        check(lambda i: fn(xs[i, :rows[i], :widths[i]], ids[i, :rows[i]],  # noqa: B023
                           counts[i]), 3)


@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_message_passing_over_a_graph_per_iteration_is_lean(data):
    """Rounds of gather, segment sum by destination and add over graphs of drawn sizes
    (empty ones too): as the loop, and the ragged values keep their zero padding by
    construction (num_segments is the nodes' own row count: the add sees one lengths
    tensor), so no op masks a full-size value again."""
    n = data.draw(st.integers(0, 4), label="n")
    sizes = [data.draw(st.integers(0, 4)) for _ in range(n)]
    edges = [data.draw(st.integers(0, 6)) if s else 0 for s in sizes]
    rng = np.random.default_rng(data.draw(st.integers(0, 9)))
    nodes = tf.RaggedTensor.from_row_lengths(
        rng.normal(size=[sum(sizes), 3]).astype(np.float32), tf.constant(sizes, tf.int64))
    links = tf.RaggedTensor.from_row_lengths(
        np.concatenate([rng.integers(0, max(s, 1), size=[e, 2]) for s, e in zip(sizes, edges)]
                       + [np.zeros([0, 2], np.int64)]).astype(np.int32),
        tf.constant(edges, tf.int64))
    weights = tf.constant(rng.normal(size=[3, 3]).astype(np.float32))

    def one(graph):
        h, e = graph
        for _ in range(2):
            messages = tf.gather(h, e[:, 0]) @ weights
            h = tf.tanh(h + tf.math.unsorted_segment_sum(messages, e[:, 1], tf.shape(h)[0]))
        return tf.reduce_sum(h, 0)
    got = pf.vectorized_map(one, (nodes, links), fallback="error")
    for k in range(n):
        np.testing.assert_allclose(got[k], one((nodes[k], links[k])), rtol=1e-5, atol=1e-5)
    if n:
        graph = tf.function(lambda: pf.vectorized_map(one, (nodes, links), fallback="error")
                            ).get_concrete_function().graph
        masks = [op.name for op in graph.get_operations() if op.type == "SelectV2"
                 and op.outputs[0].dtype == tf.float32 and "RaggedGetItem" not in op.name]
        assert not masks, masks
