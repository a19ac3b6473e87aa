"""Property tests for XlaEinsum and XlaSharding against the sequential loop, with
fallback="error"; the sharding of a stacked value keeps the iteration axis unsplit."""

import numpy as np
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st
from tensorflow.compiler.tf2xla.ops import gen_xla_ops
from tensorflow.compiler.xla import xla_data_pb2

import pfor_core as pf
from pfor_core import testing
from pfor_core.testing import strategies

# equation -> per-iteration shapes of the operands (sizes picked to be distinct).
EQUATIONS = {
    "ab,bc->ac": ([2, 3], [3, 4]),
    "ab,ab->a": ([2, 3], [2, 3]),
    "abc,cd->abd": ([2, 1, 3], [3, 2]),
    "...ab,bc->...ac": ([2, 2, 3], [3, 4]),
    "a,b->ab": ([3], [2]),
    "ij,j->i": ([2, 3], [3]),
}


@given(st.data(), st.sampled_from(sorted(EQUATIONS)))
def test_xla_einsum_for_every_layout(data, equation):
    shapes = EQUATIONS[equation]
    testing.check_inputs(data, lambda a, b: gen_xla_ops.xla_einsum(a, b, equation),
                         list(shapes), tf.float32)


def test_xla_einsum_compiled():
    x, y = tf.random.normal([3, 2, 3]), tf.random.normal([3, 4])

    @tf.function(jit_compile=True)
    def both():
        body = lambda i: gen_xla_ops.xla_einsum(tf.gather(x, i), y, "ab,bc->ac")  # noqa: E731
        return pf.pfor(body, 3, fallback="error"), tf.stack([body(i) for i in range(3)])

    got, expected = both()
    testing.assert_allclose(got, expected)


def tiled(counts):
    """A tiled sharding with ``counts`` tiles per dimension (devices in order)."""
    return xla_data_pb2.OpSharding(
        type=xla_data_pb2.OpSharding.OTHER, tile_assignment_dimensions=counts,
        tile_assignment_devices=list(range(int(np.prod(counts)))))


SHARDINGS = {
    "none": None,
    "replicated": xla_data_pb2.OpSharding(type=xla_data_pb2.OpSharding.REPLICATED),
    "maximal": xla_data_pb2.OpSharding(type=xla_data_pb2.OpSharding.MAXIMAL,
                                       tile_assignment_dimensions=[1],
                                       tile_assignment_devices=[0]),
    "tiled": tiled([2, 1]),
    "tiled, last replicated": xla_data_pb2.OpSharding(
        type=xla_data_pb2.OpSharding.OTHER, tile_assignment_dimensions=[1, 2, 2],
        tile_assignment_devices=[0, 1, 2, 3], replicate_on_last_tile_dim=True),
}


def _shard(x, kind, unspecified):
    proto = SHARDINGS[kind]
    return gen_xla_ops.xla_sharding(
        x, sharding=b"" if proto is None else proto.SerializeToString(),
        unspecified_dims=unspecified)


def _tile_counts(serialized):
    return list(xla_data_pb2.OpSharding.FromString(serialized).tile_assignment_dimensions)


@given(st.data(), strategies.iters(), st.sampled_from(sorted(SHARDINGS)),
       st.sampled_from([[], [1]]))
def test_xla_sharding(data, n, kind, unspecified):
    x = tf.random.normal([n, 4, 2])
    body = lambda i: _shard(tf.gather(x, i), kind, unspecified)  # noqa: E731
    mode = data.draw(st.sampled_from(["eager", "graph"]), label="mode")
    testing.assert_matches_loop(body, n, graph=mode == "graph")
    graph = tf.function(lambda: pf.pfor(body, max(n, 1), fallback="error")).get_concrete_function(
    ).graph
    (op,) = [o for o in graph.get_operations() if o.type == "XlaSharding"]
    assert op.get_attr("unspecified_dims") == [d + 1 for d in unspecified]
    proto = SHARDINGS[kind]
    if proto is None:
        assert op.get_attr("sharding") == b""
    else:
        before = _tile_counts(proto.SerializeToString())
        after = _tile_counts(op.get_attr("sharding"))
        assert after == ([1] + before if kind.startswith("tiled") else before), after
