"""BiasAdd against the sequential loop, every invariance mix, both data formats."""

import numpy as np
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

from pfor_core import testing


@given(rank=st.integers(2, 4), channels=st.integers(1, 3), n=st.integers(0, 3),
       stacked=st.tuples(st.booleans(), st.booleans()).filter(any),
       channels_first=st.booleans(), seed=st.integers(0, 99))
def test_bias_add(rank, channels, n, stacked, channels_first, seed):
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

    got = testing.check_op(op, [tf.constant(value), tf.constant(bias)], stacked=list(stacked), n=n)
    want = testing.sequential(testing.loop_fn_for(reference_op, [tf.constant(value), tf.constant(bias)],
                                                  list(stacked)), n)
    if want is not None:
        testing.assert_allclose(got, want)
