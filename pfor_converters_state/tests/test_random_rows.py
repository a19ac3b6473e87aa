"""Random ops with per-iteration rows or parameters, with no fallback: RandomShuffle
(an independent permutation per iteration, or one shared under randomness="same"),
RandomUniformInt with per-iteration bounds (each row within its own bounds, uniform),
StatelessMultinomial with per-iteration logits or seeds (exactly the loop's draws)."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing


def run(body, n, graph, **kwargs):
    if graph:
        return tf.function(lambda k: pf.pfor(body, k, fallback="error", **kwargs),
                           autograph=False)(tf.constant(n)).numpy()
    return pf.pfor(body, n, fallback="error", **kwargs).numpy()


@given(n=st.integers(0, 4), rest=st.lists(st.integers(0, 3), max_size=2),
       size=st.integers(0, 10), stacked=st.booleans(), mode=st.sampled_from(["different", "same"]),
       graph=st.booleans(), chunks=st.booleans())
def test_shuffle_permutes_each_row(n, rest, size, stacked, mode, graph, chunks):
    """Every row is a permutation of its iteration's value along the first axis; under
    "same" every iteration applies one permutation; under "different" they differ."""
    shape = [size] + rest
    per_row = int(np.prod(shape))
    # Distinct values: iteration i's value is base + 1000 i.
    base = tf.reshape(tf.range(per_row, dtype=tf.float32), shape)
    values = base[None] + 1000.0 * tf.reshape(tf.range(n, dtype=tf.float32), [n] + [1] * len(shape))
    body = (lambda i: tf.random.shuffle(values[i])) if stacked else (
        lambda i: tf.random.shuffle(base))
    kwargs = {"parallel_iterations": 2} if chunks else {}
    got = run(body, n, graph, randomness=mode, **kwargs)
    assert got.shape == (n, *shape)
    offsets = (1000.0 * np.arange(n) if stacked else np.zeros(n)).reshape([n] + [1] * len(shape))
    local = got - offsets  # each row as a shuffle of base
    inner = int(np.prod(rest))
    flat_base = base.numpy().reshape([size, inner])
    for row in local.reshape([n, size, inner]):
        assert sorted(map(tuple, row)) == sorted(map(tuple, flat_base))
    if mode == "same" and not chunks or mode == "same" and not stacked:
        assert all(np.array_equal(row, local[0]) for row in local)
    elif mode == "different" and size >= 9 and n >= 2:
        assert not all(np.array_equal(row, local[0]) for row in local)


def test_shuffle_permutations_are_uniform():
    values = tf.constant([0.0, 1.0, 2.0])
    got = pf.pfor(lambda i: tf.random.shuffle(values), 1200, fallback="error").numpy()
    _, counts = np.unique(got, axis=0, return_counts=True)
    assert len(counts) == 6 and counts.min() > 140 and counts.max() < 260, counts


def test_shuffle_of_a_scalar_and_error_mode():
    x = tf.constant([1.0, 2.0])
    testing.assert_matches_loop(lambda i: tf.random.shuffle(x[i]), 2)
    with pytest.raises(pf.ConversionError, match="randomness='error'"):
        pf.pfor(lambda i: tf.random.shuffle(x), 2, randomness="error")


@settings(max_examples=15)  # each example converts and runs a loop (suite time)
@given(n=st.integers(0, 4), which=st.sampled_from(["min", "max", "both"]),
       dtype=st.sampled_from([tf.int32, tf.int64]), shape=st.lists(st.integers(0, 3), max_size=2),
       graph=st.booleans(), seed=st.integers(0, 2**16))
def test_uniform_int_within_per_iteration_bounds(n, which, dtype, shape, graph, seed):
    rng = np.random.default_rng(seed)
    low = tf.constant(rng.integers(-50, 50, size=n), dtype)
    span = tf.constant(rng.integers(1, 5, size=n), dtype)

    def body(i):
        lo = low[i] if which != "max" else tf.constant(-60, dtype)
        hi = low[i] + span[i] if which != "min" else tf.constant(60, dtype)
        return tf.random.uniform(shape, lo, hi, dtype=dtype)

    got = run(body, n, graph)
    assert got.shape == (n, *shape) and got.dtype == dtype.as_numpy_dtype
    lo = low.numpy() if which != "max" else np.full(n, -60)
    hi = low.numpy() + span.numpy() if which != "min" else np.full(n, 60)
    for row, a, b in zip(got.reshape([n, int(np.prod(shape))]), lo, hi):
        assert np.all((a <= row) & (row < b)), (row, a, b)


def test_uniform_int_rows_are_uniform_and_independent():
    low = tf.constant([0, 100, -7])
    got = pf.pfor(lambda i: tf.random.uniform([4000], low[i], low[i] + 4, dtype=tf.int32), 3,
                  fallback="error").numpy()
    for row, lo in zip(got, low.numpy()):
        counts = np.bincount(row - lo, minlength=4)
        assert len(counts) == 4 and counts.min() > 850 and counts.max() < 1150, counts
    # Rows draw from their own streams: the offsets of rows 0 and 2 do not coincide.
    assert np.mean(got[0] == got[2] + 7) < 0.4


def test_uniform_int_bad_bounds_fail_like_the_loop():
    low = tf.constant([0, 5])
    testing.assert_fails_like_loop(
        lambda i: tf.random.uniform([3], low[i], 3, dtype=tf.int32), 2)


def test_uniform_int_per_iteration_bounds_under_same_fall_back():
    low = tf.constant([0, 5])
    body = lambda i: tf.random.uniform([3], low[i], 9, dtype=tf.int32)  # noqa: E731
    with pytest.raises(pf.ConversionError, match="RandomUniformInt"):
        pf.pfor(body, 2, randomness="same", fallback="error")


@settings(max_examples=20)
@given(st.data())
def test_stateless_categorical_is_the_loops_draw(data):
    """Per-iteration logits and/or seeds: every iteration's draw exactly as alone."""
    n = data.draw(st.integers(0, 4), label="n")
    batch = data.draw(st.integers(0, 3), label="batch")
    classes = data.draw(st.integers(1, 6), label="classes")
    samples = data.draw(st.integers(0, 8), label="samples")
    stacked = testing.draw_stacked(data, 2)
    dtype = data.draw(st.sampled_from([tf.int32, tf.int64]), label="dtype")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    raw = rng.standard_normal([n + 1, batch, classes]) * 3
    if data.draw(st.booleans(), label="with -inf"):
        raw[rng.random(raw.shape) < 0.3] = -np.inf
    logits = tf.constant(raw, data.draw(st.sampled_from([tf.float32, tf.float64])))
    seeds = tf.constant(rng.integers(-2**40, 2**40, size=[n + 1, 2]), tf.int64)

    def body(i):
        return tf.random.stateless_categorical(logits[i if stacked[0] else 0], samples,
                                               seeds[i if stacked[1] else 0], dtype=dtype)

    testing.assert_matches_loop(body, n, graph=data.draw(st.booleans(), label="graph"))


def test_stateless_categorical_large_draws_fall_back_exactly():
    """Rows the kernel may split into shards draw elsewhere in the stream: those run in
    the loop (exact), and fallback="error" names why."""
    logits = tf.zeros([2, 4, 1000])
    body = lambda i: tf.random.stateless_categorical(logits[i], 500, [1, 2])  # noqa: E731
    testing.assert_matches_loop(body, 2, fallback="loop")
    with pytest.raises(pf.ConversionError, match="shards"):
        pf.pfor(body, 2, fallback="error")
