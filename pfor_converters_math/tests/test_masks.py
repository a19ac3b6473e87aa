"""One-argument tf.where and GatherV2 by ragged indices (masks.py) against the
loop, with no fallback: masks of rank 1 and 2, stacked and ragged, rows with no true
element; gathers of stacked and invariant params, with gradients; tf.boolean_mask
(with the ragged consumers' Squeeze)."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing

MAX_N = 4


def check_rows(body, n):
    """pfor with ragged outputs, eagerly, in a tf.function of run-time iters, and in
    chunks of 2, equals the loop's rows; nothing falls back."""
    testing.assert_matches_loop(body, n, ragged=True, modes=testing.RUN_MODES)


def test_where_of_a_ragged_mask():
    masks = tf.constant([[True, False, True], [False, True, True], [True, True, False]])
    lengths = tf.constant([2, 0, 3])
    check_rows(lambda i: tf.where(masks[i, :lengths[i]]), 3)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(0, MAX_N), stacked=st.booleans(), axis=st.sampled_from([0, 1]),
       seed=st.integers(0, 2**16))
def test_gather_by_ragged_indices(n, stacked, axis, seed):
    rng = np.random.default_rng(seed)
    xs = tf.constant(rng.normal(size=[MAX_N, 3, 3]), tf.float32)
    picks = tf.constant(rng.random([MAX_N, 3]) < 0.5)

    def body(i):
        params = tf.gather(xs, i) if stacked else xs[0]
        index = tf.where(tf.gather(picks, i))[:, 0]
        return tf.gather(params, index, axis=axis)

    check_rows(body, n)
    if n:
        with tf.GradientTape() as tape:
            tape.watch(xs)
            out = pf.pfor(body, n, fallback="error", ragged_outputs=True)
            flat = out.flat_values if isinstance(out, tf.RaggedTensor) else out
            got = tape.gradient(tf.reduce_sum(tf.sin(flat)), xs)
        with tf.GradientTape() as tape:
            tape.watch(xs)
            want = tape.gradient(tf.add_n([tf.reduce_sum(tf.sin(body(tf.constant(i))))
                                           for i in range(n)]), xs)
        got = tf.zeros_like(xs) if got is None else tf.convert_to_tensor(got)
        want = tf.zeros_like(xs) if want is None else tf.convert_to_tensor(want)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


X = tf.constant([[1.0, -2.0, 3.0], [-1.0, -1.0, -1.0], [0.0, 5.0, -6.0]])


def test_boolean_mask_converts_where_and_gather():
    """Until Squeeze of ragged values lands, the rest of boolean_mask is converted and
    the result is the loop's."""
    body = lambda i: tf.boolean_mask(X[i], X[i] > 0)  # noqa: E731
    rows = {r.op_type: r for r in pf.explain(body, 3).rows}
    assert rows["Where"].how == "converter" and rows["GatherV2"].how == "converter"
    got = pf.pfor(body, 3, fallback="loop", ragged_outputs=True)
    testing.assert_rows_match(got, [body(tf.constant(i)) for i in range(3)])


def test_boolean_mask():
    check_rows(lambda i: tf.boolean_mask(X[i], X[i] > 0), 3)
    check_rows(lambda i: tf.boolean_mask(X, X[:, i] > 0), 3)


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_gather_of_ragged_params_by_stacked_indices(data):
    """Ragged params (rows of their own lengths) by per-iteration indices: along the
    dimension that varies (checked against each iteration's size) or along one that
    does not, with batch_dims, with the indices of another rank, and with the same
    indices in every iteration."""
    n = data.draw(st.integers(1, MAX_N), label="n")
    lengths = data.draw(testing.lengths_strategy(n, 4), label="lengths")
    along_ragged = data.draw(st.booleans(), label="along the varying dimension")
    same_index = data.draw(st.booleans(), label="the same indices in every iteration")
    batch_dims = data.draw(st.sampled_from([0, 1]), label="batch_dims")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    rng = np.random.default_rng(seed)
    xs = tf.constant(rng.normal(size=[MAX_N, 3, 4]), tf.float32)
    if along_ragged:  # (no position to gather in an empty row)
        lengths = [max(v, 1) for v in lengths]
    length_of = tf.constant(lengths)
    # positions inside every iteration's own size (out of range: the test below)
    picks = tf.constant(rng.integers(0, 2**16, size=[MAX_N, 3, 2]), tf.int32)

    def body(i):
        params = tf.gather(xs, i)[:, :tf.gather(length_of, i)]  # [3, L_i]
        j = 0 if same_index else i
        if along_ragged:  # (the same indices: inside the shortest row)
            size = min(lengths[:n]) if same_index else tf.gather(length_of, i)
            index = tf.gather(picks, j) % size  # [3, 2]
            return tf.gather(params, index if batch_dims else index[0], axis=1,
                             batch_dims=batch_dims)
        index = tf.gather(picks, j)[:, 0] % 3  # [3]
        return tf.gather(params, index, axis=0)

    check_rows(body, n)  # (nothing falls back)


def test_gather_of_ragged_params_out_of_each_iterations_size_fails_like_the_loop():
    xs = tf.reshape(tf.range(12.0), [3, 4])
    lengths = tf.constant([4, 1, 3])

    def body(i):
        return tf.gather(tf.gather(xs, i)[:tf.gather(lengths, i)], i + 1)

    with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
        pf.pfor(body, 3, fallback="error")
    with pytest.raises(tf.errors.InvalidArgumentError):
        [body(tf.constant(j)) for j in range(3)]
