"""Property tests of the converters that make values of a given shape (Fill, BroadcastTo,
Tile, OneHot) against the sequential loop.

Every check runs with fallback="error", so passing also means nothing fell back.
Stacked arguments carry one row per iteration; invariant ones are shared. Fill,
BroadcastTo and Tile with per-iteration shapes (ragged results) against the loop, with
no fallback: sizes that differ and include 0, values invariant or per iteration, chunks,
and the gradient of a reduction over a ragged value (which tiles or broadcasts the
upstream gradient to the value's per-iteration shape).
"""

import functools

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing


ITERS = st.sampled_from([0, 1, 2, 3])
DIMS = st.lists(st.integers(0, 4), max_size=4)


# Modes for testing.check: eager, or inside a tf.function whose inputs have unknown
# dims and values (the converters' dynamic paths).
EAGER, EAGER_OR_UNKNOWN = ("eager",), ("eager", "unknown_shapes")


def arg(rng, shape, stacked, n, dtype=np.float32):
    return testing.random_values(rng, ([n] if stacked else []) + list(shape), dtype)


def rows(value, n):
    """A stacked argument whose every row is ``value`` (stacked, yet the same)."""
    return np.broadcast_to(np.asarray(value), [n] + list(np.shape(value))).copy()


@given(data=st.data(), dims=DIMS, n=st.integers(0, 5),
       chunk=st.sampled_from([None, 2]))
def test_fill(data, dims, n, chunk):
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    value = arg(rng, [], True, n)
    if chunk:
        testing.assert_matches_loop(lambda i: tf.fill(dims, tf.gather(value, i)), n,
                                    graph=True, parallel_iterations=chunk)
    else:
        testing.check(data, lambda v, d: tf.fill(d, v), [value, np.asarray(dims, np.int32)],
                      stacked=[True, False], n=n, modes=EAGER_OR_UNKNOWN)


@given(data=st.data(), target=DIMS, n=ITERS, stacked=st.sampled_from(["x", "shape", "both"]))
def test_broadcast_to(data, target, n, stacked):
    """x's shape is a suffix of the target with some dims 1; a stacked target is one
    the body's shape inference proves (its first entry fixed by x's, of size >= 2)."""
    rank = data.draw(st.integers(0, len(target)))
    shape = [1 if data.draw(st.booleans()) else d for d in target[len(target) - rank:]]
    x_stacked = stacked != "shape"
    if stacked != "x":
        if len(target) == 0 or rank != len(target) or target[0] < 2:
            stacked, x_stacked = "x", True
        else:
            shape[0] = target[0]
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = arg(rng, shape, x_stacked, n, np.int32)
    if stacked == "x":
        testing.check(data, tf.broadcast_to, [x, np.asarray(target, np.int32)],
                      stacked=[True, False], n=n, modes=EAGER_OR_UNKNOWN)
        return
    first = rows(np.int32(target[0]), n)

    def loop_fn(i):
        value = tf.gather(x, i) if x_stacked else x
        return tf.broadcast_to(value, tf.stack([tf.gather(first, i)] + target[1:]))

    testing.assert_matches_loop(loop_fn, n)


@given(data=st.data(), shape=DIMS, n=ITERS)
def test_tile(data, shape, n):
    multiples = data.draw(st.lists(st.integers(0, 3), min_size=len(shape),
                                   max_size=len(shape)))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = arg(rng, shape, True, n)
    testing.check(data, tf.tile, [x, np.asarray(multiples, np.int32)],
                  stacked=[True, False], n=n, modes=EAGER_OR_UNKNOWN)


@given(data=st.data(), shape=st.lists(st.integers(0, 3), min_size=1, max_size=3), n=ITERS,
       x_stacked=st.booleans())
def test_tile_stacked_multiples_on_empty_axes(data, shape, n, x_stacked):
    """Stacked multiples are allowed where the static output shape proves them: on
    axes whose input is empty, any multiple gives an empty axis."""
    shape[0] = 0
    multiples = data.draw(st.lists(st.integers(0, 3), min_size=len(shape),
                                   max_size=len(shape)))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = arg(rng, shape, x_stacked, n)
    varying = rng.integers(0, 4, size=[n]).astype(np.int32)

    def loop_fn(i):
        value = tf.gather(x, i) if x_stacked else x
        return tf.tile(value, tf.stack([tf.gather(varying, i)] + multiples[1:]))

    testing.assert_matches_loop(loop_fn, n)


@given(data=st.data(), shape=st.lists(st.integers(0, 3), max_size=3), n=ITERS,
       depth=st.integers(0, 4), dtype=st.sampled_from([np.float32, np.int32]))
@settings(max_examples=30)
def test_one_hot(data, shape, n, depth, dtype):
    axis = data.draw(st.integers(-1, len(shape)))
    stacked = [data.draw(st.booleans()) for _ in range(3)]
    if not any(stacked):
        stacked[0] = True
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    indices = rng.integers(-1, depth + 1, size=([n] if stacked[0] else []) + shape)
    on = arg(rng, [], stacked[1], n, dtype)
    off = arg(rng, [], stacked[2], n, dtype)
    testing.check(data, lambda j, a, b: tf.one_hot(j, depth, a, b, axis=axis),
                  [indices.astype(np.int32), on, off], stacked=stacked, n=n,
                  modes=EAGER_OR_UNKNOWN)


MAX_N = 4


# pfor eagerly, in a tf.function of run-time iters and in chunks of 2 against one run of
# the loop (ragged results row by row); nothing falls back. Property tests draw one of
# the modes per example instead (the examples cover all three).
check = functools.partial(testing.assert_matches_loop, modes=testing.RUN_MODES,
                          ragged_outputs=True)


sizes = st.lists(st.integers(0, 3), min_size=MAX_N, max_size=MAX_N)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(0, MAX_N), k=sizes, stacked_value=st.booleans(), fixed=st.booleans(),
       mode=st.sampled_from(testing.RUN_MODES))
def test_ragged_fill(n, k, stacked_value, fixed, mode):
    k = tf.constant(k)
    values = tf.constant([1.5, -2., 3., 0.5])

    def body(i):
        value = tf.gather(values, i) if stacked_value else values[0]
        dims = tf.stack([tf.gather(k, i), 2]) if fixed else tf.stack([tf.gather(k, i), k[0] + i])
        return tf.fill(dims, value)

    check(body, n, modes=(mode,))


@settings(max_examples=12, deadline=None)
@given(n=st.integers(0, MAX_N), k=sizes, stacked=st.booleans(), row=st.booleans(),
       mode=st.sampled_from(testing.RUN_MODES))
def test_ragged_broadcast_to(n, k, stacked, row, mode):
    k = tf.constant(k)
    x = tf.reshape(tf.range(8, dtype=tf.float32), [MAX_N, 2])

    def body(i):
        value = tf.gather(x, i) if stacked else x[1]
        value = value[None] if row else value
        return tf.broadcast_to(value, tf.stack([tf.gather(k, i), 2]))

    check(body, n, modes=(mode,))


@settings(max_examples=12, deadline=None)
@given(n=st.integers(0, MAX_N), k=sizes, stacked=st.booleans(),
       mode=st.sampled_from(testing.RUN_MODES))
def test_ragged_tile(n, k, stacked, mode):
    k = tf.constant(k)
    x = tf.reshape(tf.range(8, dtype=tf.float32), [MAX_N, 2])

    def body(i):
        value = tf.gather(x, i) if stacked else x[1]
        return tf.tile(value, tf.reshape(tf.gather(k, i), [1]))

    check(body, n, modes=(mode,))


def test_negative_dims_fail_like_the_loop():
    k = tf.constant([2, -1])
    testing.assert_fails_like_loop(lambda i: tf.fill(tf.reshape(tf.gather(k, i), [1]), 1.), 2,
                                   ragged_outputs=True)


@pytest.mark.parametrize("reduce", [tf.reduce_sum, tf.reduce_mean, tf.reduce_max])
def test_gradient_of_a_reduction_over_a_ragged_value(reduce):
    x = tf.constant([[1., -2., 3.], [4., 5., 6.], [-1., 2., 0.5]])
    k = tf.constant([2, 0, 3])

    def total(x):
        return tf.reduce_sum(pf.pfor(lambda i: reduce(tf.gather(x, i)[:tf.gather(k, i)] ** 2),
                                     3, fallback="error"))

    def loop_total(x):
        return tf.add_n([reduce(x[i][:k[i]] ** 2) for i in range(3)])

    with tf.GradientTape() as tape:
        tape.watch(x)
        got = total(x)
    with tf.GradientTape() as tape2:
        tape2.watch(x)
        want = loop_total(x)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    grad, want_grad = tape.gradient(got, x), tape2.gradient(want, x)
    np.testing.assert_allclose(tf.convert_to_tensor(grad), tf.convert_to_tensor(want_grad),
                               rtol=1e-6, equal_nan=True)
