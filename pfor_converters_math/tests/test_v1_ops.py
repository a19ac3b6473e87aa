"""Property tests for the first versions of ops whose later versions the pack converts:
Gather (rows of params; GatherV2 on axis 0) and TopK (k an attr; TopKV2 takes it as an
input), against the sequential loop with fallback="error".

TensorFlow no longer builds TopK (removed in GraphDef version 7), but a graph imported
from an old GraphDef still holds it: the test body imports one. Its CPU kernel no longer
runs either (registered with an attr the op lost), so the reference loop for it runs
tf.math.top_k (TopKV2), which computes the same.
"""

import numpy as np
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

from tensorflow.core.framework import graph_pb2

import pfor_core as pf
from pfor_core import testing
from pfor_core.testing import strategies


def gather_v1(params, indices):
    return tf.raw_ops.Gather(params=params, indices=indices)


@given(st.data(), strategies.shapes(min_rank=1, max_rank=3, min_side=1),
       strategies.shapes(max_rank=2), strategies.dtypes("float32", "int32"))
def test_gather_v1_for_every_layout(data, params_shape, indices_shape, dtype):
    index_type = data.draw(st.sampled_from([tf.int32, tf.int64]), label="index dtype")
    # Values in [0, rows - 1]: valid row numbers for the indices (params: any values).
    testing.check_inputs(data, gather_v1, [params_shape, indices_shape], [dtype, index_type],
                         low=0, high=params_shape[0] - 1)


@given(st.data(), strategies.iters(), strategies.shapes(min_rank=1, max_rank=2))
def test_gather_v1_by_the_loop_index_is_a_slice(data, n, row_shape):
    params = tf.reshape(tf.range(float(np.prod([n + 2] + row_shape))), [n + 2] + row_shape)

    def body(i):
        return gather_v1(params, i)

    rows = [r for r in pf.explain(body, n).rows if r.op_type == "Gather"]
    assert [r.converter for r in rows] == [
        "pfor_converters_math.slicing.gather.convert_gather_v1_invariant_params"]
    mode = data.draw(st.sampled_from(["eager", "graph"]), label="mode")
    testing.assert_matches_loop(body, n, graph=mode == "graph")


def test_gather_v1_out_of_range_fails_like_the_loop():
    params = tf.ones([3, 2, 2])
    indices = tf.constant([[0], [2], [2]])
    # Stacked params, stacked indices 2 >= 2 rows of an iteration's params: a batched
    # gather must not take a row of another iteration instead.
    testing.assert_fails_like_loop(
        lambda i: gather_v1(tf.gather(params, i), tf.gather(indices, i)), 3)


def old_graph_def(op_type, dtype, **attrs):
    """A GraphDef of producer version 6 computing ``op_type`` of a placeholder ``x``."""
    graph_def = graph_pb2.GraphDef()
    graph_def.versions.producer = 6
    x = graph_def.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = dtype.as_datatype_enum
    node = graph_def.node.add(name="op", op=op_type, input=["x"])
    node.attr["T"].type = dtype.as_datatype_enum
    for key, value in attrs.items():
        if isinstance(value, bool):
            node.attr[key].b = value
        else:
            node.attr[key].i = value
    return graph_def


def top_k_v1(a, k, sort):
    """TopK (v1) of ``a``, from an imported old graph (in a tf.function when eager:
    graphs are imported into graphs)."""
    graph_def = old_graph_def("TopK", a.dtype, k=k, sorted=sort)

    def imported(x):
        return tuple(tf.graph_util.import_graph_def(
            graph_def, input_map={"x": x}, return_elements=["op:0", "op:1"], name="old"))

    if tf.executing_eagerly():
        return tf.function(imported, autograph=False)(a)
    return imported(a)


@given(st.data(), strategies.iters(),
       st.lists(st.integers(0, 3), max_size=2), st.integers(0, 5),
       st.sampled_from([tf.float32, tf.float64, tf.int32]))
def test_top_k_v1(data, n, lead, last, dtype):
    k = data.draw(st.integers(0, last), label="k")
    sort = data.draw(st.booleans(), label="sorted")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    # A small integer range makes ties, which exercise the order of equal values.
    x = tf.cast(rng.integers(-3, 4, size=[n] + lead + [last]), dtype)
    graph = data.draw(st.booleans(), label="in a tf.function")
    run = lambda: pf.pfor(lambda i: top_k_v1(tf.gather(x, i), k, sort), n,  # noqa: E731
                          fallback="error")
    got = tf.function(run, autograph=False)() if graph else run()
    testing.assert_rows(got, n)
    expected = testing.sequential(
        lambda i: tuple(tf.math.top_k(tf.gather(x, i), k, sorted=sort)), n)
    testing.assert_same_results(got, expected)
