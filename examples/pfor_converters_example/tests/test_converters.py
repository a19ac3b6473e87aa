"""The example pack's converters match the sequential loop for every input layout, with
no fallback (the testing kit checks with fallback="error")."""

import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing
from pfor_core.testing import strategies


@settings(deadline=None)
@given(st.data(), strategies.shapes(max_rank=3), strategies.dtypes())
def test_dawsn_matches_loop(data, shape, dtype):
    # One input: drawn stacked (the layouts strategy requires a stacked input).
    testing.check_inputs(data, tf.math.special.dawsn, [shape], dtype)


@settings(deadline=None)
@given(st.data(), strategies.shapes(min_rank=1, max_rank=3, min_side=1),
       strategies.shapes(max_rank=2))
def test_gather_matches_loop_for_every_layout(data, params_shape, indices_shape):
    rows = params_shape[0]
    gather = lambda p, i: tf.raw_ops.Gather(params=p, indices=i)  # noqa: E731
    # Values in [0, rows - 1]: valid row numbers for the indices (params: any values).
    testing.check_inputs(data, gather, [params_shape, indices_shape],
                         [tf.float32, tf.int32], low=0, high=rows - 1)
