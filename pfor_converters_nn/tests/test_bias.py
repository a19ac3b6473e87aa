"""BiasAdd against the sequential loop, every invariance mix, both data formats (ragged
values: test_activations.py, beside the activations they share their cases with)."""

import numpy as np
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

from pfor_core import testing


@given(rank=st.integers(2, 4), channels=st.integers(1, 3), n=st.integers(0, 3),
       stacked=st.tuples(st.booleans(), st.booleans()).filter(any),
       channels_first=st.booleans(), mode=st.sampled_from(testing.DRAWN_MODES),
       seed=st.integers(0, 99))
def test_bias_add(rank, channels, n, stacked, channels_first, mode, seed):
    if channels_first and rank < 3:
        channels_first = False  # NCHW needs a spatial axis on CPU
    rng = np.random.default_rng(seed)
    shape = [2] * rank
    shape[1 if channels_first else -1] = channels
    value = rng.standard_normal(([n] if stacked[0] else []) + shape).astype(np.float32)
    bias = rng.standard_normal(([n] if stacked[1] else []) + [channels]).astype(np.float32)
    fmt = "NCHW" if channels_first else "NHWC"

    def reference_op(v, b):
        # The CPU kernel has no NCHW BiasAdd for every rank: compare with the formula.
        if channels_first:
            return v + tf.reshape(b, [channels] + [1] * (rank - 2))
        return tf.nn.bias_add(v, b)

    def op(v, b):
        return tf.nn.bias_add(v, b, data_format=fmt)

    got = testing.check_op(op, [tf.constant(value), tf.constant(bias)], stacked=list(stacked),
                           n=n, mode=mode)
    want = testing.sequential(testing.loop_fn_for(reference_op, [tf.constant(value), tf.constant(bias)],
                                                  list(stacked)), n)
    if want is not None:
        testing.assert_allclose(got, want)


@given(rank=st.integers(2, 4), channels=st.integers(1, 3), n=st.sampled_from([0, 1, 2, 3]),
       channels_first=st.booleans(), mode=st.sampled_from(testing.DRAWN_MODES),
       seed=st.integers(0, 99))
def test_bias_add_grad(rank, channels, n, channels_first, mode, seed):
    """BiasAddGrad directly (stacked gradient), both data formats, and as the gradient
    of BiasAdd taken inside the body with a stacked or invariant bias."""
    if channels_first and rank < 3:
        channels_first = False  # NCHW needs a spatial axis
    rng = np.random.default_rng(seed)
    shape = [2] * rank
    shape[1 if channels_first else -1] = channels
    grad = tf.constant(rng.standard_normal([n] + shape).astype(np.float32))
    fmt = "NCHW" if channels_first else "NHWC"
    testing.check_op(lambda g: tf.raw_ops.BiasAddGrad(out_backprop=g, data_format=fmt),
                     [grad], stacked=[True], n=n, mode=mode)
    bias_stacked = bool(seed % 2)
    bias = tf.constant(rng.standard_normal([n] * bias_stacked + [shape[-1]]), tf.float32)

    def body(v, b):
        with tf.GradientTape() as tape:
            tape.watch(b)
            loss = tf.reduce_sum(tf.nn.bias_add(v, b) * v)
        return tape.gradient(loss, b)

    testing.check_op(body, [grad, bias], stacked=[True, bias_stacked], n=n, mode=mode)
