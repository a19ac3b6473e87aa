"""Chunked loops make outputs of expanding ops (outer products) once, after the chunks,
from the small values the chunks return (chunk_tails.py): the same results as one
piece and as the loop, with no fallback, in every way a chunked loop runs."""

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import chunk_tails, testing

RNG = np.random.default_rng(11)
X = tf.constant(RNG.normal(size=[10, 32]), tf.float32)
W = tf.Variable(RNG.normal(size=[32, 24]).astype(np.float32) * 0.3)
V = tf.Variable(RNG.normal(size=[24, 8]).astype(np.float32) * 0.3)


@pytest.fixture
def split(monkeypatch):
    """What chunk_tails.split decided, per call: the op types made after the chunks."""
    seen = []
    real = chunk_tails.split

    def spy(body):
        tails = real(body)
        seen.append(None if tails is None else [op and op.type for op in tails.ops])
        return tails

    monkeypatch.setattr(chunk_tails, "split", spy)
    return seen


def _loss(xi):
    h = tf.tanh(xi[None] @ W)
    return tf.reduce_sum((h @ V) ** 2)


def _per_example(i):
    xi = tf.gather(X, i)
    with tf.GradientTape() as tape:
        loss = _loss(xi)
    dw, dv = tape.gradient(loss, [W, V])
    return {"w": dw, "v": dv, "loss": loss}


@pytest.mark.parametrize("k", [2, 3, 5])
def test_per_example_gradients_in_chunks(k, split):
    got = testing.assert_matches_loop(_per_example, 10, graph=True, parallel_iterations=k,
                                      rtol=1e-4, atol=1e-5)
    assert split[0] == [None, "MatMul", "MatMul"]  # loss kept; dv, dw made after the chunks
    whole = pf.pfor(_per_example, 10, fallback="error")
    for key in ("w", "v", "loss"):
        testing.assert_allclose(got[key], whole[key], rtol=1e-4, atol=1e-5)
    assert got["w"].shape == (10, 32, 24) and got["v"].shape == (10, 24, 8)


def test_outer_products_by_broadcasting_and_inputs_shared(split):
    c = tf.constant(RNG.normal(size=[8]), tf.float32)  # xi: 32 floats

    def body(i):
        xi = tf.gather(X, i)
        return xi[:, None] * xi[None, :], xi[:, None] * c, tf.reduce_sum(xi)

    got = testing.assert_matches_loop(body, 10, parallel_iterations=4)
    assert split[0] == ["Mul", "Mul", None]
    assert got[0].shape == (10, 32, 32) and got[1].shape == (10, 32, 8)


def test_small_outputs_stay_in_the_chunks(split):
    def body(i):
        xi = tf.gather(X, i)
        return tf.linalg.matvec(W, xi[:24]) * 2.0

    testing.assert_matches_loop(body, 10, parallel_iterations=3)
    assert split == [None]


def test_under_xla_with_a_rest_chunk(split):
    fn = tf.function(lambda: pf.pfor(_per_example, 10, fallback="error",
                                     parallel_iterations=4), jit_compile=True)
    got, want = fn(), testing.sequential(_per_example, 10)
    for key in ("w", "v", "loss"):
        testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-5)
    assert split[0] == [None, "MatMul", "MatMul"]


def test_gradients_through_outputs_made_after_the_chunks(split):
    def total(k):
        with tf.GradientTape() as tape:
            out = pf.pfor(_per_example, 10, fallback="error", parallel_iterations=k)
            value = tf.reduce_sum(tf.sin(out["w"])) + tf.reduce_sum(out["v"] ** 2)
        return tape.gradient(value, [W, V])

    chunked, whole = total(4), total(None)
    assert split[0] == [None, "MatMul", "MatMul"]
    for a, b in zip(chunked, whole):
        testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_per_example_gradients_with_a_budget(split):
    xs = tf.constant(RNG.normal(size=[64, 32]), tf.float32)
    got = pf.per_example_gradients(_loss, [W, V], xs, fallback="error",
                                   memory_budget=8 << 10)
    want = pf.per_example_gradients(_loss, [W, V], xs, fallback="error")
    assert split and split[-1] is not None and "MatMul" in split[-1]
    for a, b in zip(got, want):
        testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
