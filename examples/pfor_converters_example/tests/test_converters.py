"""The example pack's converter matches the sequential loop, for every input invariance."""

import hypothesis.strategies as st
import numpy as np
import tensorflow as tf
from hypothesis import given

from pfor_core import testing


@given(shape=st.lists(st.integers(0, 3), max_size=3), n=st.integers(0, 4),
       stacked=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]))
def test_dawsn_matches_loop(shape, n, stacked, dtype):
    rng = np.random.default_rng(0)
    x = rng.normal(size=([n] if stacked else []) + shape).astype(dtype)
    testing.check_op(tf.math.special.dawsn, [x], stacked=[stacked], n=n)
