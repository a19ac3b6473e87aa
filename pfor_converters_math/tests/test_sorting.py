"""Property tests for sorting and searching: TopKV2 (tf.sort / tf.argsort / tf.math.top_k),
NthElement, LowerBound / UpperBound (tf.searchsorted).

tf.math.top_k with a per-iteration k against the loop, with no fallback: k = 0, ties,
invariant inputs, with gradients; a bad k fails like the loop."""

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


def values(rng, shape, dtype, ties):
    """Ties (a small integer range) exercise the index order of equal values."""
    raw = rng.integers(-3, 4, size=shape) if ties else rng.standard_normal(shape) * 10
    return tf.cast(raw, dtype)


def assert_converted(loop_fn, n, op_types):
    """Our op types convert (no fallback); ops of other packs may still fall back, so
    fallback is allowed only when the report shows something else needs it."""
    report = pf.explain(loop_fn, n)
    ours = [r for r in report.rows if r.op_type in op_types]
    assert ours and all(r.how == "converter" for r in ours), str(report)
    testing.assert_matches_loop(loop_fn, n, fallback="loop" if report.fallbacks else "error")


def shape_with_last(data, min_last=0):
    lead = data.draw(st.lists(st.integers(0, 3), max_size=2))
    return lead + [data.draw(st.integers(min_last, 5))]


@given(st.data())
def test_top_k(data):
    shape = shape_with_last(data)
    k = data.draw(st.integers(0, shape[-1]))
    sort = data.draw(st.booleans())
    dtype = data.draw(st.sampled_from(DTYPES))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = values(rng, [n] + shape, dtype, ties=data.draw(st.booleans()))
    testing.check(data, lambda a: tf.math.top_k(a, k=k, sorted=sort), [x], stacked=[True], n=n)


@given(st.data())
def test_nth_element(data):
    shape = shape_with_last(data, min_last=1)
    nth = data.draw(st.integers(0, shape[-1] - 1))
    reverse = data.draw(st.booleans())
    dtype = data.draw(st.sampled_from(DTYPES))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = values(rng, [n] + shape, dtype, ties=data.draw(st.booleans()))
    testing.check(data, lambda a: tf.raw_ops.NthElement(input=a, n=nth, reverse=reverse), [x],
                  stacked=[True], n=n)


@settings(max_examples=MANY)
@given(st.data())
def test_sort_and_argsort(data):
    shape = shape_with_last(data)
    axis = data.draw(st.sampled_from([-1, len(shape) - 1, 0]))
    direction = data.draw(st.sampled_from(["ASCENDING", "DESCENDING"]))
    fn = data.draw(st.sampled_from(["sort", "argsort"]))
    dtype = data.draw(st.sampled_from(DTYPES))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = values(rng, [n] + shape, dtype, ties=data.draw(st.booleans()))

    def body(a):
        if fn == "sort":
            return tf.sort(a, axis=axis, direction=direction)
        return tf.argsort(a, axis=axis, direction=direction, stable=True)

    assert_converted(testing.loop_fn_for(body, [x], [True]), n, {"TopKV2"})


@settings(max_examples=MANY)
@given(st.data())
def test_lower_and_upper_bound(data):
    op = data.draw(st.sampled_from([tf.raw_ops.LowerBound, tf.raw_ops.UpperBound]))
    rows = data.draw(st.sampled_from([1, 1, 2, 3]))
    m, k = data.draw(st.integers(0, 4)), data.draw(st.integers(0, 4))
    dtype = data.draw(st.sampled_from(DTYPES))
    out_type = data.draw(st.sampled_from([tf.int32, tf.int64]))
    stacked = data.draw(st.tuples(st.booleans(), st.booleans()).filter(any))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    ties = data.draw(st.booleans())
    sorted_rows = tf.sort(values(rng, [n] * stacked[0] + [rows, m], dtype, ties), axis=-1)
    vals = values(rng, [n] * stacked[1] + [rows, k], dtype, ties)
    testing.check(data, lambda s, v: op(sorted_inputs=s, values=v, out_type=out_type),
                  [sorted_rows, vals], stacked=stacked, n=n)


@given(st.data())
def test_searchsorted(data):
    """tf.searchsorted on vectors and matrices reshapes around the bound ops."""
    lead = data.draw(st.lists(st.integers(1, 3), max_size=1))
    m, k = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    side = data.draw(st.sampled_from(["left", "right"]))
    stacked = data.draw(st.tuples(st.booleans(), st.booleans()).filter(any))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    sorted_seq = tf.sort(values(rng, [n] * stacked[0] + lead + [m], tf.float32, True), -1)
    vals = values(rng, [n] * stacked[1] + lead + [k], tf.float32, True)
    loop_fn = testing.loop_fn_for(lambda s, v: tf.searchsorted(s, v, side=side),
                                  [sorted_seq, vals], stacked)
    assert_converted(loop_fn, n, {"LowerBound", "UpperBound"})


MAX_N, WIDTH = 4, 5


# pfor eagerly, in a tf.function of run-time iters and in chunks of 2 against one run of
# the loop (ragged results row by row); nothing falls back. Property tests draw one of
# the modes per example instead (the examples cover all three).
check = functools.partial(testing.assert_matches_loop, modes=testing.RUN_MODES,
                          ragged_outputs=True)


@settings(max_examples=10, deadline=None)
@given(n=st.integers(0, MAX_N), matrix=st.booleans(), stacked=st.booleans(),
       ties=st.booleans(), dtype=st.sampled_from([tf.float32, tf.int32]),
       seed=st.integers(0, 2**16), mode=st.sampled_from(testing.RUN_MODES))
def test_top_k_with_a_per_iteration_k(n, matrix, stacked, ties, dtype, seed, mode):
    rng = np.random.default_rng(seed)
    shape = [MAX_N, 2, WIDTH] if matrix else [MAX_N, WIDTH]
    values = rng.integers(0, 3, size=shape) if ties else rng.normal(size=shape) * 10
    xs = tf.constant(values, dtype)
    ks = tf.constant(rng.integers(0, WIDTH + 1, size=MAX_N), tf.int32)

    def body(i):
        return tuple(tf.math.top_k(xs[i] if stacked else xs[0], k=ks[i]))

    check(body, n, modes=(mode,))
    if n and dtype == tf.float32:
        testing.assert_gradients_match(body, [xs], n, ragged=True)


def test_top_k_of_k_out_of_range_fails_like_the_loop():
    xs = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    ks = tf.constant([1, 3])
    testing.assert_fails_like_loop(lambda i: tf.math.top_k(xs[i], k=ks[i]).values, 2)


def test_top_k_with_a_per_iteration_k_compiles_with_the_static_width():
    xs = tf.constant([[3.0, 1.0, 2.0, 5.0], [1.0, 1.0, 1.0, 0.0], [0.0, 9.0, 8.0, 7.0]])
    ks = tf.constant([2, 0, 4])

    def body(i):
        return tf.reduce_sum(tf.math.top_k(xs[i], k=ks[i]).values)

    got = tf.function(lambda: pf.pfor(body, 3, fallback="error"), jit_compile=True)()
    testing.assert_allclose(got, testing.sequential(body, 3))
