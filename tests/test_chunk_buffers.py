"""Chunked outputs assembled in place (chunk_buffers.py): the same values as one piece,
gradients through them, the output held once at the peak, and the places that keep
TensorArrays (XLA, an outer pfor, chunks of different sizes)."""

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import api, testing


def _op_types(fn, jit_compile=False):
    graph = tf.function(fn, jit_compile=jit_compile).get_concrete_function().graph
    types = set()
    for g in [graph] + [f.graph for f in graph._functions.values()  # pylint: disable=protected-access
                        if hasattr(f, "graph")]:
        types |= {op.type for op in g.get_operations()}
    return types


X = tf.constant(np.random.default_rng(0).normal(size=[12, 5]), tf.float32)


def _body(i):
    row = tf.gather(X, i)
    return {"outer": row[:, None] * row[None, :],
            "count": tf.cast(tf.reduce_sum(tf.cast(row > 0, tf.int32)), tf.int64),
            "positive": row > 0,
            "complex": tf.complex(row, -row),
            "index": i}


@pytest.mark.parametrize("k", [3, 4, 6])
def test_chunks_written_in_place_equal_one_piece(k):
    whole = pf.pfor(_body, 12, fallback="error")
    got = tf.function(lambda: pf.pfor(_body, 12, fallback="error", parallel_iterations=k))()
    assert "InplaceUpdate" in _op_types(
        lambda: pf.pfor(_body, 12, fallback="error", parallel_iterations=k))
    assert got["outer"].shape == [12, 5, 5] and got["positive"].dtype == tf.bool
    np.testing.assert_array_equal(got["index"], np.arange(12))
    for key in whole:
        np.testing.assert_array_equal(got[key], whole[key])
    testing.assert_matches_loop(lambda i: _body(i)["outer"], 12, parallel_iterations=k)


def test_gradients_through_chunks_written_in_place():
    w = tf.Variable(np.random.default_rng(1).normal(size=[5, 3]).astype(np.float32))

    def grads(k):
        with tf.GradientTape() as tape:
            y = pf.pfor(lambda i: tf.tanh(tf.gather(X, i)[None] @ w)[0] ** 2, 12,
                        fallback="error", parallel_iterations=k)
            loss = tf.reduce_sum(y * tf.range(1., 13.)[:, None])
        return tape.gradient(loss, w)

    with tf.GradientTape() as tape:
        rows = [tf.tanh(X[j][None] @ w)[0] ** 2 * (j + 1.) for j in range(12)]
        loss = tf.add_n([tf.reduce_sum(r) for r in rows])
    want = tape.gradient(loss, w)
    assert want.shape == [5, 3]
    testing.assert_allclose(grads(4), want, rtol=1e-5, atol=1e-6)
    testing.assert_allclose(tf.function(lambda: grads(4))(), want, rtol=1e-5, atol=1e-6)


def _peak(fn):
    fn()
    tf.config.experimental.reset_memory_stats("CPU:0")
    before = tf.config.experimental.get_memory_info("CPU:0")["current"]
    out = fn()
    return tf.config.experimental.get_memory_info("CPU:0")["peak"] - before, out


def test_a_chunked_output_is_held_once_at_the_peak():
    x = tf.random.normal([64, 256], seed=3)
    body = lambda i: tf.gather(x, i)[:, None] * tf.gather(x, i)[None, :]  # 256 KiB a row
    output = 64 * 256 * 256 * 4
    fn = tf.function(lambda: pf.pfor(body, 64, fallback="error", parallel_iterations=8))
    peak, got = _peak(fn)
    assert peak < 1.5 * output, (peak, output)
    testing.assert_allclose(got, x[:, :, None] * x[:, None, :], rtol=0, atol=0)


def test_tensor_arrays_where_chunks_differ_in_size_or_an_outer_pfor_converts_them():
    fn = lambda: pf.pfor(lambda i: tf.gather(X, i) * 2., 12, fallback="error",
                         parallel_iterations=5)
    assert "InplaceUpdate" not in _op_types(fn)
    testing.assert_allclose(fn(), X * 2., rtol=0, atol=0)

    def outer(j):
        inner = pf.pfor(lambda i: tf.gather(X, i) * tf.cast(j, tf.float32), 12,
                        fallback="error", parallel_iterations=4)
        return tf.reduce_sum(inner, 0)

    got = pf.pfor(outer, 3, fallback="error")
    assert got.shape == [3, 5]
    testing.assert_allclose(got, tf.range(3.)[:, None] * tf.reduce_sum(X, 0)[None],
                            rtol=1e-5, atol=1e-5)


def test_xla_keeps_its_tensor_arrays():
    fn = lambda: pf.pfor(lambda i: tf.gather(X, i) ** 2, 12, fallback="error",
                         parallel_iterations=4)
    assert "InplaceUpdate" not in _op_types(fn, jit_compile=True)
    got = tf.function(fn, jit_compile=True)()  # rows of a run-time start, static size
    testing.assert_allclose(got, X ** 2, rtol=1e-6, atol=0)


def _steps(i):
    """Rows whose length the body does not know statically (a while loop's stack)."""
    array = tf.TensorArray(tf.int32, size=tf.math.floormod(tf.constant(7), 4),
                           element_shape=[])
    _, array = tf.while_loop(lambda t, a: t < a.size(),
                             lambda t, a: (t + 1, a.write(t, i * t)), (0, array))
    return array.stack()


@pytest.mark.parametrize("n", [6, 7])
def test_xla_chunks_of_outputs_without_a_static_shape_in_the_body(n):
    counts = lambda i: tf.math.bincount(tf.gather(X, i) > 0, minlength=2, maxlength=2,
                                        dtype=tf.int32)
    fn = lambda: pf.pfor(lambda i: (_steps(i), counts(tf.cast(i, tf.int32))), n,
                         fallback="error", parallel_iterations=2)
    steps, bins = tf.function(fn, jit_compile=True)()
    assert steps.shape == [n, 3] and bins.shape == [n, 2]
    np.testing.assert_array_equal(steps, np.arange(n)[:, None] * np.arange(3)[None])
    np.testing.assert_array_equal(bins, tf.stack([counts(j) for j in range(n)]))


def test_xla_chunks_share_a_draw_under_randomness_same():
    fn = lambda: pf.pfor(lambda i: tf.random.uniform([2]), 5, fallback="error",
                         randomness="same", parallel_iterations=2)
    got = tf.function(fn, jit_compile=True)()
    assert got.shape == [5, 2]
    np.testing.assert_array_equal(got, tf.tile(got[:1], [5, 1]))


def test_balanced_chunks_prefer_a_size_that_divides_the_iterations():
    balanced = api._balanced  # pylint: disable=protected-access
    assert balanced(124, 4096) == 64  # 34 chunks needed, 64 divide 4096
    assert balanced(124, 1000) == 100
    assert balanced(50, 97) == 49  # 97 is prime: two chunks of 49 and 48
    assert balanced(300, 256) == 300
