"""TensorArrays and stacks of the first kind (TensorArrayV3 & co, StackV2 & co) under
pfor, against the sequential loop with fallback="error": arrays the body creates (one
array, every element stacked), arrays created outside (a stacked index reads with a
gather and writes with a scatter), gradient arrays, and what is refused."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing

R = tf.raw_ops
MODES = ["eager", "graph"]


def _values(n, element, seed):
    rng = np.random.default_rng(seed)
    return tf.constant(rng.standard_normal([max(n, 1), 4] + element)[:n], tf.float32)


@settings(max_examples=20)
@given(st.data(), st.integers(0, 4), st.sampled_from([[], [2], [2, 3]]),
       st.integers(0, 2**16))
def test_an_array_the_body_creates(data, n, element, seed):
    """Writes and scatters at invariant indices of stacked or invariant values, reads and
    gathers at invariant or per-iteration indices, the size, a close."""
    x = _values(n, element, seed)
    write_stacked, scatter_stacked, read_stacked, gather_stacked = (
        data.draw(st.booleans(), label=what) for what in
        ("write a stacked value", "scatter a stacked value", "read at i", "gather at i"))
    shared = tf.ones([2] + element)

    def body(i):
        rows = tf.gather(x, i)
        handle, flow = R.TensorArrayV3(size=3, dtype=tf.float32, element_shape=element,
                                       clear_after_read=False)
        flow = R.TensorArrayWriteV3(handle=handle, index=0,
                                    value=rows[0] if write_stacked else shared[0],
                                    flow_in=flow)
        flow = R.TensorArrayScatterV3(handle=handle, indices=[2, 1],
                                      value=rows[1:3] if scatter_stacked else shared,
                                      flow_in=flow)
        index = i % 3 if read_stacked else 1
        read = R.TensorArrayReadV3(handle=handle, index=index, flow_in=flow,
                                   dtype=tf.float32)
        indices = tf.stack([2 - i % 3, 0, i % 2]) if gather_stacked else [2, 0]
        gathered = R.TensorArrayGatherV3(handle=handle, indices=indices, flow_in=flow,
                                         dtype=tf.float32, element_shape=element)
        size = R.TensorArraySizeV3(handle=handle, flow_in=flow)
        with tf.control_dependencies([read, gathered]):
            closed = R.TensorArrayCloseV3(handle=handle)
        with tf.control_dependencies([closed]):
            return read * 2.0, gathered, size

    mode = data.draw(st.sampled_from(MODES), label="mode")
    testing.assert_matches_loop(body, n, graph=mode == "graph")


def _outside(x):
    """An array made outside the loop, element k = x[k]."""
    handle, flow = R.TensorArrayV3(size=x.shape[0], dtype=x.dtype, element_shape=x.shape[1:],
                                   clear_after_read=False)
    return handle, R.TensorArrayScatterV3(handle=handle, indices=tf.range(x.shape[0]),
                                          value=x, flow_in=flow)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_an_array_created_outside(n):
    """Reads and gathers at invariant and per-iteration indices; writes and scatters at
    per-iteration indices (each iteration its own elements, as in the loop)."""
    x = _values(4, [], n)[:, :3]  # element k: x[k], of shape [3]

    def reader(handle, flow):
        def body(i):
            return (R.TensorArrayReadV3(handle=handle, index=i, flow_in=flow, dtype=tf.float32),
                    R.TensorArrayReadV3(handle=handle, index=2, flow_in=flow, dtype=tf.float32),
                    R.TensorArrayGatherV3(handle=handle, indices=tf.stack([i, 3 - i]),
                                          flow_in=flow, dtype=tf.float32, element_shape=[3]),
                    R.TensorArrayGatherV3(handle=handle, indices=[1, 0], flow_in=flow,
                                          dtype=tf.float32, element_shape=[3]))
        return body

    def write(handle, flow, i):
        flow = R.TensorArrayWriteV3(handle=handle, index=i, value=tf.gather(x, i) * 2.0,
                                    flow_in=flow)
        return R.TensorArrayScatterV3(handle=handle, indices=tf.reshape(i + 4, [1]),
                                      value=tf.gather(x, i)[None], flow_in=flow)

    def everything(handle, flow):
        return R.TensorArrayGatherV3(handle=handle, indices=tf.range(8), flow_in=flow,
                                     dtype=tf.float32, element_shape=[3])

    @tf.function(autograph=False)
    def run():
        got = pf.pfor(reader(*_outside(x)), n, fallback="error")
        expected = [reader(*_outside(x))(tf.constant(i)) for i in range(n)]
        handle, flow = R.TensorArrayV3(size=8, dtype=tf.float32, element_shape=[3])
        flow = pf.pfor(lambda i: write(handle, flow, i), n, fallback="error")
        written = everything(handle, flow[0] if n else flow) if n else tf.zeros([0])
        handle, flow = R.TensorArrayV3(size=8, dtype=tf.float32, element_shape=[3])
        for i in range(n):
            flow = write(handle, flow, tf.constant(i))
        written_loop = everything(handle, flow) if n else tf.zeros([0])
        return got, expected, written, written_loop

    got, expected, written, written_loop = run()
    testing.assert_same_results(got, tf.nest.map_structure(lambda *r: tf.stack(r), *expected)
                                if n else None)
    # Rows 4..7 are written only by iterations below n; the rest stays zero in both.
    testing.assert_allclose(written, written_loop)


def test_a_gradient_array_of_an_array_the_body_creates():
    x = _values(4, [2], 1)

    def body(i):
        rows = tf.gather(x, i)
        handle, flow = R.TensorArrayV3(size=2, dtype=tf.float32, element_shape=[2])
        flow = R.TensorArrayScatterV3(handle=handle, indices=[0, 1], value=rows[:2],
                                      flow_in=flow)
        grad, grad_flow = R.TensorArrayGradV3(handle=handle, flow_in=flow, source="grad")
        grad_flow = R.TensorArrayWriteV3(handle=grad, index=0, value=rows[2] * 2.0,
                                         flow_in=grad_flow)
        grad_flow = R.TensorArrayWriteV3(handle=grad, index=1, value=tf.ones([2]),
                                         flow_in=grad_flow)
        return R.TensorArrayGatherV3(handle=grad, indices=[1, 0], flow_in=grad_flow,
                                     dtype=tf.float32, element_shape=[2])

    testing.assert_matches_loop(body, 4, graph=True)


def test_a_gradient_array_of_an_array_created_outside():
    """Its elements get the iteration axis (TensorArrayGradWithShape)."""
    x = _values(4, [], 2)[:, :3]

    def make_body(handle, flow):
        def body(i):
            grad, grad_flow = R.TensorArrayGradV3(handle=handle, flow_in=flow, source="g")
            grad_flow = R.TensorArrayWriteV3(handle=grad, index=1, value=tf.gather(x, i),
                                             flow_in=grad_flow)
            return R.TensorArrayReadV3(handle=grad, index=1, flow_in=grad_flow,
                                       dtype=tf.float32)
        return body

    @tf.function(autograph=False)
    def run():
        got = pf.pfor(make_body(*_outside(x)), 4, fallback="error")
        expected = [make_body(*_outside(x))(tf.constant(i)) for i in range(4)]
        return got, tf.stack(expected)

    got, expected = run()
    testing.assert_allclose(got, expected)


def test_a_per_iteration_write_index_is_refused():
    def body(i):
        handle, flow = R.TensorArrayV3(size=4, dtype=tf.int32)
        flow = R.TensorArrayWriteV3(handle=handle, index=i, value=i, flow_in=flow)
        return R.TensorArrayReadV3(handle=handle, index=i, flow_in=flow, dtype=tf.int32)

    with pytest.raises(pf.ConversionError, match="per-iteration index"):
        pf.pfor(body, 3, fallback="error")


def test_a_per_iteration_size_is_refused():
    def body(i):
        handle, flow = R.TensorArrayV3(size=i + 1, dtype=tf.int32)
        return R.TensorArraySizeV3(handle=handle, flow_in=flow)

    for fallback in ("error", "loop"):  # the fallback loop cannot return array handles
        with pytest.raises(pf.ConversionError, match="size differs between iterations"):
            pf.pfor(body, 3, fallback=fallback)


def test_an_array_used_where_only_some_iterations_go_fails():
    """Rows are checked: an array of all iterations read in a branch of some of them."""
    def body(i):
        handle, flow = R.TensorArrayV3(size=1, dtype=tf.float32, element_shape=[])
        flow = R.TensorArrayWriteV3(handle=handle, index=0, value=tf.cast(i, tf.float32),
                                    flow_in=flow)
        return tf.cond(i > 0, lambda: R.TensorArrayReadV3(
            handle=handle, index=0, flow_in=flow, dtype=tf.float32), lambda: -1.0)

    with pytest.raises(tf.errors.InvalidArgumentError, match="only some iterations take"):
        pf.pfor(body, 3, fallback="error")


@settings(max_examples=20)
@given(st.data(), st.integers(0, 4), st.sampled_from([[], [3]]), st.integers(0, 2**16))
def test_a_stack_the_body_creates(data, n, element, seed):
    x = _values(n, element, seed)
    first_stacked, second_stacked, bound_stacked = (
        data.draw(st.booleans(), label=what) for what in
        ("push a stacked value first", "then a stacked value", "per-iteration max_size"))

    def body(i):
        rows = tf.gather(x, i)
        bound = 2 + i if bound_stacked else -1
        handle = R.StackV2(max_size=bound, elem_type=tf.float32)
        first = R.StackPushV2(handle=handle,
                              elem=rows[0] if first_stacked else tf.ones(element))
        with tf.control_dependencies([first]):
            second = R.StackPushV2(handle=handle,
                                   elem=rows[1] if second_stacked else tf.zeros(element))
        with tf.control_dependencies([second]):
            top = R.StackPopV2(handle=handle, elem_type=tf.float32)
        with tf.control_dependencies([top]):
            below = R.StackPopV2(handle=handle, elem_type=tf.float32)
        with tf.control_dependencies([below]):
            closed = R.StackCloseV2(handle=handle)
        with tf.control_dependencies([closed]):
            return top * 2.0, below, first, second

    mode = data.draw(st.sampled_from(MODES), label="mode")
    testing.assert_matches_loop(body, n, graph=mode == "graph")


def test_a_stack_created_outside_is_pushed_and_popped_in_the_loops_order():
    """The iterations push to / pop from one stack one after the other: the fallback."""
    @tf.function(autograph=False)
    def run(use_pfor):
        handle = R.StackV2(max_size=-1, elem_type=tf.int32)
        pushes = [R.StackPushV2(handle=handle, elem=tf.constant(k)) for k in (10, 20, 30)]
        with tf.control_dependencies(pushes[-1:]):
            def body(i):
                return R.StackPopV2(handle=handle, elem_type=tf.int32) + i * 0
            if use_pfor:
                return pf.pfor(body, 3, fallback="loop")
            return tf.stack([body(tf.constant(i)) for i in range(3)])

    np.testing.assert_array_equal(run(True), run(False))
