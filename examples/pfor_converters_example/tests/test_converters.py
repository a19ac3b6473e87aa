"""The example pack's converters match the sequential loop for every input layout, with
no fallback (the testing kit checks with fallback="error"), and they are the ones that
convert: registered with a higher priority, they win over the math pack's."""

import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing
from pfor_core.testing import strategies

PACK = "pfor-converters-example"


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


def test_this_pack_wins_over_the_first_party_converters():
    x = tf.random.normal([4, 3])
    report = pf.explain(lambda i: tf.math.special.dawsn(
        tf.raw_ops.Gather(params=x, indices=i)), 4)
    taken = {r.op_type: (r.converter, r.pack) for r in report.rows}
    assert taken["Dawsn"] == ("pfor_converters_example.special.convert_dawsn", PACK), str(report)
    assert taken["Gather"] == ("pfor_converters_example.gather.convert_gather_invariant_params", PACK), str(report)
    # The math pack's converter is still registered: the backup if this one declines.
    packs = [e.pack for e in pf.default_registry().entries("Dawsn")]
    assert packs[0] == PACK and "pfor-converters-math" in packs[1:], packs
