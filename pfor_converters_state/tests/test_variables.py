"""Variables under pfor: commutative updates give the sequential loop's final state,
reads after an update see all iterations' updates (SIMD, documented), writes of a
stacked value are refused, invariant writes run once."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing


def _pair(value):
    """Two variables with the same initial value: one for pfor, one for the loop."""
    return tf.Variable(value), tf.Variable(value)


def _run_both(make_body, init, n, **pfor_kwargs):
    """pfor and the sequential loop of ``make_body(var)``, each on its own variable;
    returns (pfor result, loop result, pfor variable, loop variable)."""
    var_p, var_s = _pair(init)
    got = pf.pfor(make_body(var_p), n, fallback="error", **pfor_kwargs)
    expected = testing.sequential(make_body(var_s), n)
    return got, expected, var_p, var_s


def test_assign_add_stacked_value_matches_loop():
    x = tf.constant(np.arange(12.0).reshape(4, 3))

    def make_body(var):
        def body(i):
            row = tf.gather(x, i)
            var.assign_add(row)
            return row * 2.0
        return body

    got, expected, var_p, var_s = _run_both(make_body, tf.ones([3], tf.float64), 4)
    testing.assert_same_results(got, expected)
    testing.assert_allclose(var_p, var_s, what="variable")


@pytest.mark.parametrize("op", ["assign_add", "assign_sub"])
def test_detached_invariant_update_runs_for_every_iteration(op):
    def make_body(var):
        def body(i):
            getattr(var, op)(tf.constant([1, 2], tf.int32))  # nobody reads it
            return i * 2
        return body

    got, expected, var_p, var_s = _run_both(make_body, tf.constant([5, 5]), 6)
    testing.assert_same_results(got, expected)
    testing.assert_allclose(var_p, var_s, what="variable")


def test_update_with_runtime_iters_and_chunks():
    x = tf.constant(np.arange(7.0))

    def make_body(var):
        def body(i):
            var.assign_add(tf.gather(x, i))
            var.assign_sub(1.0)
            return i
        return body

    var_p, var_s = _pair(tf.constant(0.0, tf.float64))
    run = tf.function(lambda n: pf.pfor(make_body(var_p), n, fallback="error",
                                        parallel_iterations=3), autograph=False)
    run(tf.constant(7))
    testing.sequential(make_body(var_s), 7)
    testing.assert_allclose(var_p, var_s, what="variable")


def test_read_after_update_sees_all_iterations():
    """SIMD semantics: the read ordered after the (one, combined) update sees every
    iteration's update; the sequential loop's iteration j would see only 0..j."""
    x = tf.constant([1.0, 2.0, 4.0, 8.0], tf.float64)
    var = tf.Variable(tf.constant(100.0, tf.float64))

    def body(i):
        var.assign_add(tf.gather(x, i))
        return var.read_value() * 1.0

    got = pf.pfor(body, 4, fallback="error")
    simd = tf.fill([4], 100.0 + tf.reduce_sum(x))
    testing.assert_allclose(got, simd)
    testing.assert_allclose(var, tf.constant(115.0, tf.float64), what="variable")


def _then_index(_, i):
    return i


def test_invariant_assign_runs_once_and_stacked_assign_is_refused():
    var_p, var_s = _pair(tf.constant([0.0, 0.0]))

    def invariant_body(var):
        def body(i):
            var.assign([3.0, 4.0])
            return i
        return body

    pf.pfor(invariant_body(var_p), 3, fallback="error")
    testing.sequential(invariant_body(var_s), 3)
    testing.assert_allclose(var_p, var_s, what="variable")

    x = tf.ones([3, 2])
    with pytest.raises(pf.ConversionError, match="AssignVariableOp.*assign_add"):
        pf.pfor(lambda i: _then_index(var_p.assign(tf.gather(x, i)), i), 3, fallback="loop")


def test_stacked_scatter_update_is_refused():
    var = tf.Variable(tf.zeros([4]))
    with pytest.raises(pf.ConversionError, match="ResourceScatterUpdate"):
        pf.pfor(lambda i: _then_index(var.scatter_update(tf.IndexedSlices(tf.ones([1]), [i])),
                                      i), 3, fallback="loop")


def test_invariant_scatter_update_runs_once():
    var_p, var_s = _pair(tf.zeros([4]))

    def make_body(var):
        def body(i):
            var.scatter_update(tf.IndexedSlices(tf.constant([7.0, 9.0]), [2, 0]))
            return i
        return body

    pf.pfor(make_body(var_p), 3, fallback="error")
    testing.sequential(make_body(var_s), 3)
    testing.assert_allclose(var_p, var_s, what="variable")


@pytest.mark.parametrize("n", [0, 5])
def test_embedding_lookup_with_stacked_ids(n):
    table = tf.Variable(np.arange(24.0).reshape(6, 4).astype(np.float32))
    ids = tf.constant(np.arange(2 * max(n, 1)).reshape(max(n, 1), 2)[:n] % 6, tf.int32)
    testing.assert_matches_loop(lambda i: tf.nn.embedding_lookup(table, tf.gather(ids, i)),
                                n, graph=True)


@given(data=st.data())
def test_gather_property(data):
    rows = data.draw(st.integers(1, 4))
    rest = data.draw(st.lists(st.integers(0, 3), max_size=2))
    index_shape = data.draw(st.lists(st.integers(0, 3), max_size=2))
    n = data.draw(st.integers(0, 4))
    seed = data.draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    table = tf.Variable(rng.normal(size=[rows] + rest))
    ids = tf.constant(rng.integers(0, rows, size=[n] + index_shape), tf.int32)
    shared = ids[0] if n else tf.zeros(index_shape, tf.int32)
    # Stacked ids gather per iteration; invariant ones (the op is stateful, so it is
    # converted too) read once, added to a per-iteration value.
    testing.assert_matches_loop(
        lambda i: (tf.gather(table, tf.gather(ids, i)),
                   tf.gather(table, shared) + tf.cast(i, tf.float64)), n)


_DTYPES = [np.int32, np.float64]


@given(data=st.data())
def test_assign_add_property(data):
    dtype = data.draw(st.sampled_from(_DTYPES))
    shape = data.draw(st.lists(st.integers(0, 3), max_size=3))
    n = data.draw(st.integers(0, 4))
    stacked = data.draw(st.booleans())
    op = data.draw(st.sampled_from(["assign_add", "assign_sub"]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    values = tf.constant((rng.normal(size=[n] + shape) * 10).astype(dtype))
    shared = tf.constant((rng.normal(size=shape) * 10).astype(dtype))

    def make_body(var):
        def body(i):
            getattr(var, op)(tf.gather(values, i) if stacked else shared)
            return i
        return body

    _, _, var_p, var_s = _run_both(make_body, tf.zeros(shape, dtype), n)
    testing.assert_allclose(var_p, var_s, what="variable")


@given(data=st.data())
def test_scatter_add_property(data):
    dtype = data.draw(st.sampled_from(_DTYPES))
    rows = data.draw(st.integers(1, 4))
    rest = data.draw(st.lists(st.integers(0, 3), max_size=2))
    index_shape = data.draw(st.lists(st.integers(0, 3), max_size=2))
    n = data.draw(st.integers(0, 4))
    stacked_indices, stacked_updates = data.draw(st.booleans()), data.draw(st.booleans())
    op = data.draw(st.sampled_from(["scatter_add", "scatter_sub"]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))

    def draw(stacked, make):
        return tf.constant(make([n] + index_shape if stacked else index_shape))

    indices = draw(stacked_indices, lambda s: rng.integers(0, rows, size=s).astype(np.int32))
    updates = draw(stacked_updates,
                   lambda s: (rng.normal(size=s + rest) * 10).astype(dtype))

    def make_body(var):
        def body(i):
            idx = tf.gather(indices, i) if stacked_indices else indices
            upd = tf.gather(updates, i) if stacked_updates else updates
            getattr(var, op)(tf.IndexedSlices(upd, idx))
            return i
        return body

    _, _, var_p, var_s = _run_both(make_body, tf.zeros([rows] + rest, dtype), n)
    testing.assert_allclose(var_p, var_s, what="variable")


def test_handle_created_in_the_body_is_invariant():
    x = tf.constant([1.0, 2.0, 3.0])

    def body(i):
        handle = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[],
                                        shared_name="pfor_test_body_handle")
        tf.raw_ops.AssignVariableOp(resource=handle, value=tf.constant(5.0))
        value = tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.float32)
        return value * tf.gather(x, i)

    testing.assert_matches_loop(body, 3)


@given(n=st.integers(0, 4), shape=st.lists(st.integers(0, 3), max_size=3))
def test_variable_shape_is_invariant(n, shape):
    """tf.shape of a variable (what gradients of a read emit) needs no loop."""
    var = tf.Variable(tf.zeros(shape))
    x = tf.random.stateless_normal([max(n, 1)], seed=[1, 2])

    def body(i):
        return tf.raw_ops.VariableShape(input=var.handle) * tf.cast(
            tf.gather(x, i) > 0, tf.int32)

    testing.assert_matches_loop(body, n, graph=True)


@given(st.data(), st.integers(0, 4), st.booleans())
def test_var_is_initialized_is_read_once(data, n, initialized):
    """VarIsInitializedOp (Keras and v1 code check it in bodies): invariant, one op."""
    x = tf.constant(np.arange(2.0 * max(n, 1)).reshape(-1, 2)[:n])
    if initialized:
        handle = tf.Variable([1.0, 2.0]).handle
    else:  # a handle to a variable nobody assigned yet
        handle = tf.raw_ops.VarHandleOp(dtype=tf.float64, shape=[2],
                                        shared_name=f"never_assigned_{n}")

    def body(i):
        ready = tf.raw_ops.VarIsInitializedOp(resource=handle)
        row = tf.gather(x, i)
        return tf.where(ready, row, -row), ready

    mode = data.draw(st.sampled_from(["eager", "graph"]), label="mode")
    testing.assert_matches_loop(body, n, graph=mode == "graph")
    rows = [r for r in pf.explain(body, max(n, 1)).rows if r.op_type == "VarIsInitializedOp"]
    assert [(r.how, r.stacked) for r in rows] == [("converter", False)], rows
