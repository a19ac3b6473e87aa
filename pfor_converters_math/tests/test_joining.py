"""Property tests of the joining and splitting converters against the sequential loop.

Every check runs with fallback="error", so passing also means nothing fell back.
Stacked arguments carry one row per iteration; invariant ones are shared.

ConcatV2, Pack, Pad and PadV2 of ragged values (x[:n_i]): along the varying dimension and
others, with stacked and invariant operands, padding by invariant and per-iteration
amounts (to a fixed size), gradients.
"""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorflow.python.ops import gen_array_ops

import pfor_core as pf
from pfor_core import testing

ITERS = st.sampled_from([0, 1, 2, 3])
DIMS = st.lists(st.integers(0, 4), max_size=4)


def make(rng, shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 5, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def flags(data, count):
    return testing.draw_stacked(data, count)


# Modes for testing.check: eager, or inside a tf.function whose inputs have unknown
# dims and values (the converters' dynamic paths).
EAGER, EAGER_OR_UNKNOWN = ("eager",), ("eager", "unknown_shapes")


def seed(data):
    return np.random.default_rng(data.draw(st.integers(0, 99)))


def args_for(rng, shapes, stacked, n, dtype=np.float32):
    return [make(rng, ([n] if s else []) + list(shape), dtype)
            for shape, s in zip(shapes, stacked)]


@given(data=st.data(), shape=st.lists(st.integers(0, 4), min_size=1, max_size=4), n=ITERS,
       count=st.integers(2, 3), v1=st.booleans())
@settings(max_examples=30)
def test_concat(data, shape, n, count, v1):
    """Mixed stacked and invariant values; negative axes; the v1 op (axis first)."""
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1))
    shapes = []
    for _ in range(count):
        s = list(shape)
        s[axis] = data.draw(st.integers(0, 3))
        shapes.append(s)
    stacked = flags(data, count)
    values = args_for(seed(data), shapes, stacked, n)

    def op(k, *xs):
        if v1:
            return gen_array_ops.concat(k, list(xs))
        return tf.concat(list(xs), k)

    got = testing.check(data, op, [np.int32(axis)] + values,
                  stacked=[False] + stacked, n=n, modes=EAGER_OR_UNKNOWN)
    testing.assert_rows(got, n)


@given(data=st.data(), shape=DIMS, n=ITERS, count=st.integers(1, 3))
def test_stack(data, shape, n, count):
    rank = len(shape)
    axis = data.draw(st.integers(-rank - 1, rank))
    stacked = flags(data, count)
    values = args_for(seed(data), [shape] * count, stacked, n, np.int32)
    got = testing.check(data, lambda *xs: tf.stack(list(xs), axis), values,
                  stacked=stacked, n=n, modes=EAGER_OR_UNKNOWN)
    testing.assert_rows(got, n)


@given(data=st.data(), shape=st.lists(st.integers(0, 4), min_size=1, max_size=4), n=ITERS)
def test_unstack(data, shape, n):
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1))
    (x,) = args_for(seed(data), [shape], [True], n)
    count = shape[axis]
    got = testing.check(data, lambda a: tf.unstack(a, count, axis=axis), [x],
                  stacked=[True], n=n, modes=EAGER_OR_UNKNOWN)
    testing.assert_rows(got, n)


@given(data=st.data(), shape=st.lists(st.integers(0, 4), min_size=1, max_size=4), n=ITERS,
       by_sizes=st.booleans())
def test_split(data, shape, n, by_sizes):
    """Split into equal parts or by sizes (SplitV, maybe with one -1)."""
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1))
    dim = shape[axis]
    if by_sizes:
        cuts = sorted(data.draw(st.lists(st.integers(0, dim), max_size=3)))
        sizes = np.diff([0] + cuts + [dim]).tolist()
        if len(sizes) > 1 and data.draw(st.booleans()):  # one output may not be -1
            sizes[data.draw(st.integers(0, len(sizes) - 1))] = -1
        (x,) = args_for(seed(data), [shape], [True], n)
        got = testing.check(data, lambda a, s, k: tf.split(a, s, axis=k, num=len(sizes)),
                      [x, np.asarray(sizes, np.int32), np.int32(axis)],
                      stacked=[True, False, False], n=n, modes=EAGER_OR_UNKNOWN)
        testing.assert_rows(got, n)
    else:
        parts = data.draw(st.sampled_from([k for k in (1, 2, 3, 4) if dim % k == 0]))
        (x,) = args_for(seed(data), [shape], [True], n)
        got = testing.check(data, lambda a, k: tf.split(a, parts, axis=k), [x, np.int32(axis)],
                      stacked=[True, False], n=n, modes=EAGER_OR_UNKNOWN)
        testing.assert_rows(got, n)


WIDTH, D = 4, 2


def _values(data, shape):
    size = int(np.prod(shape))
    return tf.constant(np.asarray(data.draw(st.lists(
        st.floats(-2, 2, width=32), min_size=size, max_size=size), label="values"),
        np.float32).reshape(shape))


def _lengths(data, n):
    return tf.constant(data.draw(testing.lengths_strategy(n, WIDTH), label="lengths"), tf.int32)


# r, q: ragged [L_i, D] and [M_i, D]; r2: ragged like r (same lengths); s: stacked [2, D];
# u: invariant [1, D].
BODIES = {
    "concat_ragged_axis": lambda r, r2, q, s, u: tf.concat([r, q], 0),
    "concat_mixed": lambda r, r2, q, s, u: tf.concat([u, r, s, q], 0),
    "concat_invariant_first": lambda r, r2, q, s, u: tf.concat([u, r], 0),
    "concat_stacked_last": lambda r, r2, q, s, u: tf.concat([r, s], 0),
    "concat_fixed_axis": lambda r, r2, q, s, u: tf.concat([r, r2, r], 1),
    "stack": lambda r, r2, q, s, u: tf.stack([r, r2], 1),
    "stack_front": lambda r, r2, q, s, u: tf.stack([r, r2, r]),
    "pad": lambda r, r2, q, s, u: tf.pad(r, [[1, 2], [0, 1]]),
    "pad_constant": lambda r, r2, q, s, u: tf.pad(r, [[0, 1], [2, 0]], constant_values=3.0),
    "pad_to_size": lambda r, r2, q, s, u: tf.pad(r, [[0, WIDTH + 1 - tf.shape(r)[0]], [0, 0]]),
    "pad_stacked": lambda r, r2, q, s, u: tf.pad(
        r, tf.stack([[tf.shape(q)[0], 1], [1, 0]]), constant_values=-1.0),
}


FIXED = {"pad_to_size"}


@pytest.mark.parametrize("name", sorted(BODIES))
@settings(max_examples=3)
@given(data=st.data())
def test_joining(name, data):
    n = data.draw(st.integers(0, 4), label="n")
    a, b = _lengths(data, n), _lengths(data, n)
    x, y, z = (_values(data, [n, WIDTH, D]) for _ in range(3))
    s, u = _values(data, [n, 2, D]), _values(data, [1, D])
    body = BODIES[name]
    testing.assert_matches_loop(
        lambda i: body(testing.rows(x, a, i), testing.rows(y, a, i), testing.rows(z, b, i),
                       tf.gather(s, i), u),
        n, ragged=name not in FIXED, modes=testing.draw_modes(data))


def test_concat_of_other_sizes_along_a_fixed_axis_fails_like_the_loop():
    x = tf.ones([3, WIDTH, D])
    a, b = tf.constant([2, 3, 0]), tf.constant([2, 1, 0])
    testing.assert_fails_like_loop(
        lambda i: tf.concat([testing.rows(x, a, i), testing.rows(x, b, i)], 1), 3,
        match="differ")


def test_concat_of_a_varying_dimension_with_a_fixed_one_falls_back():
    x, s = tf.ones([2, WIDTH, D]), tf.ones([2, 3, D])
    n = tf.constant([3, 3])
    report = pf.explain(lambda i: tf.concat([testing.rows(x, n, i), tf.gather(s, i)], 1), 2)
    assert [r.op_type for r in report.fallbacks] == ["ConcatV2"]


@settings(max_examples=10)
@given(data=st.data())
def test_gradients(data):
    n = data.draw(st.integers(0, 4), label="n")
    a, b = _lengths(data, n), _lengths(data, n)
    x, z = _values(data, [n, WIDTH, D]), _values(data, [n, WIDTH, D])
    s, u = _values(data, [n, 2, D]), _values(data, [1, D])
    name = data.draw(st.sampled_from(["concat_mixed", "stack", "pad_constant", "pad_stacked",
                                      "concat_fixed_axis"]), label="body")
    body = BODIES[name]
    testing.assert_gradients_match(
        lambda i: tf.reduce_sum(tf.sqrt(tf.abs(body(testing.rows(x, a, i), testing.rows(x, a, i),
                                                    testing.rows(z, b, i), tf.gather(s, i), u))
                                        + 1.0), 0),
        [x, z, s, u], n, chunked=data.draw(st.booleans(), label="chunked"))


# Split and SplitV of a value whose shape differs between iterations, along a dimension
# that does not vary: each part keeps the lengths (no fallback).
SPLIT_XS = tf.reshape(tf.range(60.0), [3, 4, 5])
SPLIT_LENGTHS = tf.constant([4, 0, 2])


def test_split_along_a_dimension_that_does_not_vary():
    for axis in (1, -1):
        testing.assert_matches_loop(
            lambda i: tf.split(SPLIT_XS[i, :SPLIT_LENGTHS[i], :4], 2, axis=axis), 3,  # noqa: B023
            modes=testing.RUN_MODES, ragged_outputs=True)


def test_split_v_along_a_dimension_that_does_not_vary():
    testing.assert_matches_loop(
        lambda i: tf.split(SPLIT_XS[i, :SPLIT_LENGTHS[i]], [1, 3, 1], axis=1), 3,
        modes=testing.RUN_MODES, ragged_outputs=True)


def test_split_along_the_dimension_that_varies_falls_back_like_the_loop():
    testing.assert_matches_loop(lambda i: tf.split(SPLIT_XS[i, :SPLIT_LENGTHS[i] * 0 + 2], 2, axis=0), 3,
                                modes=testing.RUN_MODES, ragged_outputs=True, fallback="loop")


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_drawn_splits_of_values_whose_rows_differ_per_iteration(data):
    """Split / SplitV (sizes maybe with one -1) along a dimension that does not vary,
    of rows x[i, :len_i] of drawn lengths (0 included), each part then summed over the
    varying rows (so nonzero padding would show), and its gradients: as the loop."""
    n = data.draw(st.integers(0, 4), label="n")
    lengths = tf.constant(data.draw(testing.lengths_strategy(n, 3), label="lengths"), tf.int32)
    width = data.draw(st.sampled_from([2, 4, 6]), label="width")
    rng = np.random.default_rng(data.draw(st.integers(0, 9), label="seed"))
    x = tf.constant(rng.normal(size=[n, 3, width]).astype(np.float32))
    axis = data.draw(st.sampled_from([1, -1]), label="axis")
    if data.draw(st.booleans(), label="by sizes"):
        sizes = [1, width - 2, 1]
        if data.draw(st.booleans(), label="one -1"):
            sizes[data.draw(st.integers(0, 2), label="which")] = -1
        parts = sizes
    else:
        parts = 2

    def body(i):
        split = tf.split(testing.rows(x, lengths, i), parts, axis=axis)
        return tf.add_n([tf.reduce_sum(tf.reduce_sum(p, 0) * float(k + 1))
                         for k, p in enumerate(split)]), split[0]
    testing.assert_matches_loop(body, n, modes=testing.draw_modes(data), ragged_outputs=True)
    if n:
        testing.assert_gradients_match(lambda i: body(i)[0], [x], n)
