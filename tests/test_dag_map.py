"""pf.dag_map against plain recursion over drawn trees and DAGs (issue 30, part 2)."""

import functools
import re

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf

K, D = 2, 3
W = np.linspace(-1., 1., D * D, dtype=np.float32).reshape(D, D)


@st.composite
def dags(draw, max_nodes=7):
    """Children lists of a DAG whose nodes come in a drawn order: node v's children are
    drawn among the nodes placed before it, so there is no cycle; shared children and
    chains come out of the same draw."""
    n = draw(st.integers(0, max_nodes))
    order = draw(st.permutations(range(n)))
    kids = np.full([n, K], -1, np.int32)
    for pos, v in enumerate(order):
        for j in range(K):
            if pos and draw(st.booleans()):
                kids[v, j] = order[draw(st.integers(0, pos - 1))]
    x = draw(st.lists(st.floats(-2, 2, width=32), min_size=n * D, max_size=n * D))
    return np.array(x, np.float32).reshape(n, D), kids


def cell(x, child_states, child_mask):
    # The mask is used, so a wrong mask or non-zero padding shows in the result.
    weights = tf.cast(child_mask, tf.float32) + 1.
    return tf.tanh(tf.tensordot(x, W, 1) + tf.reduce_sum(child_states * weights[:, None], 0))


def recursion(x, kids):
    memo = {}

    def state(v):
        if v not in memo:
            cs = np.stack([state(c) if c >= 0 else np.zeros(D, np.float32) for c in kids[v]])
            mask = kids[v] >= 0
            memo[v] = np.tanh(x[v] @ W + ((mask + 1.)[:, None] * cs).sum(0))
        return memo[v]
    return np.stack([state(v) for v in range(len(x))]) if len(x) else np.zeros([0, D])


@settings(max_examples=25, deadline=None)
@given(dags(), st.sampled_from(["eager", "graph"]))
def test_matches_recursion(drawn, mode):
    x, kids = drawn
    run = (lambda f: f) if mode == "eager" else tf.function
    got = run(lambda x, kids: pf.dag_map(cell, x, kids, fallback="error"))(x, kids)
    np.testing.assert_allclose(got.numpy(), recursion(x, kids), rtol=1e-5, atol=1e-5)


def test_runs_one_call_per_level():
    # A full binary tree of depth 3 in post-order: 3 levels, so the cell is traced for
    # 3 pfor calls (plus the traces that find the state's shape), not one per node.
    kids = np.array([[-1, -1], [-1, -1], [0, 1], [-1, -1], [-1, -1], [3, 4], [2, 5]])
    calls = []

    def counting(x, cs, mask):
        calls.append(1)
        return cell(x, cs, mask)
    x = np.ones([7, D], np.float32)
    got = pf.dag_map(counting, x, kids, fallback="error")
    np.testing.assert_allclose(got.numpy(), recursion(x, kids), rtol=1e-5)
    assert len(calls) <= 3 + 4, len(calls)


def test_gradients_wrt_inputs_and_captured_variables():
    kids = tf.constant([[-1, -1], [-1, -1], [0, 1], [2, 1]])
    x = tf.random.stateless_normal([4, D], seed=[1, 2])
    v = tf.Variable(W)

    def var_cell(x, cs, mask):
        return tf.tanh(tf.tensordot(x, v, 1) + tf.reduce_sum(cs, 0))

    def loop(x):
        s = [None] * 4
        for node in range(4):
            cs = [s[c] if c >= 0 else tf.zeros([D]) for c in kids.numpy()[node]]
            s[node] = tf.tanh(x[node][None] @ v + tf.add_n(cs))[0]
        return tf.reduce_sum(s[3] ** 2)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        got = tf.reduce_sum(pf.dag_map(var_cell, x, kids, fallback="error")[3] ** 2)
        want = loop(x)
    for a, b in zip(tape.gradient(got, [x, v]), tape.gradient(want, [x, v])):
        np.testing.assert_allclose(tf.convert_to_tensor(a), b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kids, node", [([[1, -1], [2, -1], [0, -1]], None),
                                        ([[-1, -1], [0, 0], [1, 1], [3, -1]], 3)])
def test_a_cycle_names_the_node(kids, node):
    with pytest.raises(tf.errors.InvalidArgumentError, match="cycle") as e:
        pf.dag_map(cell, np.ones([len(kids), D], np.float32), np.array(kids, np.int32))
    if node is not None:
        assert re.search(rf"node\W+{node}\W+is on a cycle", e.value.message)


@pytest.mark.parametrize("bad", [5, -2])
def test_a_child_out_of_range_names_the_node(bad):
    kids = np.array([[-1, -1], [0, bad]], np.int32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"node\W+1\W+has a child outside"):
        pf.dag_map(cell, np.ones([2, D], np.float32), kids)


def test_bad_arguments_name_the_argument():
    x = np.ones([2, D], np.float32)
    with pytest.raises(TypeError, match="`cell` must be callable"):
        pf.dag_map(None, x, [[-1], [0]])
    with pytest.raises(TypeError, match="`children` must be an integer"):
        pf.dag_map(cell, x, [[-1.], [0.]])
    with pytest.raises(ValueError, match=r"`children` must be \[n_nodes, k\]"):
        pf.dag_map(cell, x, [-1, 0])
    with pytest.raises(ValueError, match="`inputs` has 2 rows but `children` has 3"):
        pf.dag_map(cell, x, [[-1], [0], [1]])


def ragged_batch(trees):
    lengths = [len(x) for x, _ in trees]
    xs = np.concatenate([x for x, _ in trees] + [np.zeros([0, D], np.float32)])
    ks = np.concatenate([k for _, k in trees] + [np.zeros([0, K], np.int32)])
    return (tf.RaggedTensor.from_row_lengths(xs, tf.constant(lengths, tf.int64)),
            tf.RaggedTensor.from_row_lengths(ks, tf.constant(lengths, tf.int64)))


@settings(max_examples=10, deadline=None)
@given(st.lists(dags(max_nodes=6), min_size=0, max_size=4))
def test_inside_vectorized_map_over_trees_of_other_sizes(trees):
    # Each level of the level loop runs once for the nodes of every tree at that depth.
    x, kids = ragged_batch(trees)
    got = pf.vectorized_map(lambda a: pf.dag_map(cell, a[0], a[1], fallback="error"),
                            (x, kids), fallback="error", ragged_outputs=True)
    assert got.shape[0] == len(trees)
    for row, (tx, tk) in zip(got, trees):
        np.testing.assert_allclose(np.reshape(row.numpy(), [-1, D]), recursion(tx, tk),
                                   rtol=1e-5, atol=1e-5)


def test_inside_pfor_one_tree_shape_many_inputs():
    # Children the same for every iteration, inputs per iteration: a stacked level loop.
    kids = np.array([[-1, -1], [-1, -1], [0, 1], [2, 2]], np.int32)
    xs = np.random.default_rng(0).normal(size=[3, 4, D]).astype(np.float32)
    got = pf.pfor(lambda i: pf.dag_map(cell, tf.gather(xs, i), kids, fallback="error"), 3,
                  fallback="error")
    for i in range(3):
        np.testing.assert_allclose(got[i], recursion(xs[i], kids), rtol=1e-5, atol=1e-5)


def test_per_example_gradients_over_trees_of_other_sizes():
    trees = [(np.ones([1, D], np.float32), np.array([[-1, -1]], np.int32)),
             (np.full([3, D], .5, np.float32), np.array([[-1, -1], [-1, -1], [0, 1]], np.int32)),
             (np.full([4, D], -.3, np.float32),
              np.array([[-1, -1], [0, -1], [1, 0], [2, 1]], np.int32))]
    v = tf.Variable(W)

    def var_cell(x, cs, mask):
        return tf.tanh(tf.tensordot(x, v, 1) + tf.reduce_sum(cs, 0))

    def loss(x, kids):
        return tf.reduce_sum(pf.dag_map(var_cell, x, kids, fallback="error")[-1] ** 2)
    got = pf.per_example_gradients(loss, [v], *ragged_batch(trees), fallback="error")[0]
    for g, (x, kids) in zip(got, trees):
        with tf.GradientTape() as tape:
            want = loss(x, kids)
        np.testing.assert_allclose(g, tape.gradient(want, v), rtol=1e-5, atol=1e-6)


U = tf.Variable(np.linspace(-.5, .5, D * D, dtype=np.float32).reshape(D, D))


def pair_cell(node, child_states, child_mask):
    # A structured state and input (one of them an integer) and a variable.
    x, tag = node
    h, c = child_states
    c_new = tf.tanh(tf.tensordot(x, U, 1) + tf.reduce_sum(c, 0)) * tf.cast(tag + 1, tf.float32)
    weights = tf.cast(child_mask, tf.float32)[:, None]
    return tf.sigmoid(c_new) + tf.reduce_sum(h * weights, 0), c_new


def pair_loss(x, tag, kids, dag_map=pf.dag_map):
    h, c = dag_map(pair_cell, (x, tag), kids, fallback="error")
    return tf.reduce_sum(h[-1:] ** 2) + tf.reduce_sum(c * x)


def tf_recursion(cell, inputs, kids, fallback, parts=2):
    """The reference: ``cell`` called node by node, eagerly, children first; its state
    a tuple of ``parts`` vectors."""
    del fallback
    memo, zero = {}, (tf.zeros([D]),) * parts

    def state(v):
        if v not in memo:
            cs = [state(c) if c >= 0 else zero for c in kids[v]]
            memo[v] = cell(tuple(t[v] for t in inputs), tuple(tf.stack(p) for p in zip(*cs)),
                           tf.constant(kids[v] >= 0))
        return memo[v]
    if not len(kids):
        return (tf.zeros([0, D]),) * parts
    return tuple(tf.stack(p) for p in zip(*[state(v) for v in range(len(kids))]))


@settings(max_examples=3, deadline=None)
@given(st.lists(dags(max_nodes=6), min_size=0, max_size=4))
def test_per_example_gradients_run_the_reverse_level_loop_over_the_union(trees):
    # Gradients of the inputs and of a variable, one per tree, against a tape per tree;
    # the VJP runs as the union's reverse level loop, not op by op.
    x, kids = ragged_batch(trees)
    tags = tf.ragged.map_flat_values(lambda k: k[:, 0] % 2, kids)

    def body(i):
        xi = x[i]
        with tf.GradientTape() as tape:
            tape.watch(xi)
            loss = pair_loss(xi, tags[i], kids[i])
        return tape.gradient(loss, [xi, U])
    got = pf.pfor(body, len(trees), fallback="error", ragged_outputs=True)
    for i, (tx, tk) in enumerate(trees):
        tx = tf.constant(tx)
        with tf.GradientTape() as tape:
            tape.watch(tx)
            loss = pair_loss(tx, tk[:, 0] % 2, tk, dag_map=tf_recursion)
        want = tape.gradient(loss, [tx, U], unconnected_gradients="zero")
        np.testing.assert_allclose(np.reshape(got[0][i].numpy(), [-1, D]), want[0],
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got[1][i], want[1], rtol=1e-4, atol=1e-5)
    if trees:
        report = pf.explain(body, len(trees))
        assert any("reverse level loop" in r.converter for r in report.rows
                   if r.how == "custom"), report
        assert not report.fallbacks


def test_errors_in_a_graph_name_the_node():
    run = tf.function(lambda kids: pf.dag_map(cell, tf.ones([3, D]), kids))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"node\W+2\W+has a child outside"):
        run(tf.constant([[-1, -1], [0, -1], [0, 7]]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="is on a cycle"):
        run(tf.constant([[-1, -1], [2, -1], [1, -1]]))


def tuple_cell(x, child_states, child_mask):
    h, c = child_states  # a structured state, as an LSTM's (h, c)
    c_new = tf.tanh(tf.tensordot(x, W, 1)) + tf.reduce_sum(c, 0) * 0.5
    return tf.tanh(c_new) + tf.reduce_sum(h, 0) * 0.25, c_new


def tuple_recursion(x, kids):
    h, c = [None] * len(x), [None] * len(x)

    def visit(v):
        if h[v] is None:
            for k in kids[v]:
                if k >= 0:
                    visit(k)
            hs = sum((h[k] for k in kids[v] if k >= 0), np.zeros(D, np.float32))
            cs = sum((c[k] for k in kids[v] if k >= 0), np.zeros(D, np.float32))
            c[v] = np.tanh(x[v] @ W) + cs * 0.5
            h[v] = np.tanh(c[v]) + hs * 0.25
    for v in range(len(x)):
        visit(v)
    return np.stack(h), np.stack(c)


@pytest.mark.parametrize("signature", [None, (tf.TensorSpec([D]), tf.TensorSpec([D]))])
def test_a_structured_state_found_or_given(signature):
    kids = np.array([[-1, -1], [-1, -1], [0, 1], [2, 0]], np.int32)
    x = np.random.default_rng(1).normal(size=[4, D]).astype(np.float32)
    batch = ragged_batch([(x, kids), (x[:3], kids[:3])])
    got = pf.vectorized_map(
        lambda a: pf.dag_map(tuple_cell, a[0], a[1], fallback="error",
                             state_signature=signature),
        batch, fallback="error", ragged_outputs=True)
    for tree, size in enumerate([4, 3]):
        for g, w in zip(got, tuple_recursion(x[:size], kids[:size])):
            np.testing.assert_allclose(np.reshape(g[tree].numpy(), [-1, D]), w, rtol=1e-5,
                                       atol=1e-6)


def test_a_state_that_cannot_be_found_asks_for_its_signature():
    def dict_cell(x, child_states, child_mask):
        return {"h": x + tf.reduce_sum(child_states["h"], 0)}
    x, kids = np.ones([2, D], np.float32), np.array([[-1], [0]], np.int32)
    with pytest.raises(ValueError, match="pass state_signature="):
        pf.dag_map(dict_cell, x, kids)
    got = pf.dag_map(dict_cell, x, kids, state_signature={"h": tf.TensorSpec([D])})
    np.testing.assert_allclose(got["h"], [[1.] * D, [2.] * D])
    with pytest.raises(TypeError, match="`state_signature` must be a tf.TensorSpec"):
        pf.dag_map(dict_cell, x, kids, state_signature={"h": tf.TensorSpec([None])})
    with pytest.raises(ValueError, match="make them agree"):
        pf.dag_map(dict_cell, x, kids, state_signature={"h": tf.TensorSpec([D + 1])})


def test_explain_shows_the_level_loop_over_every_iterations_graph():
    x, kids = ragged_batch([(np.ones([1, D], np.float32), np.array([[-1, -1]], np.int32)),
                            (np.ones([3, D], np.float32),
                             np.array([[-1, -1], [-1, -1], [0, 1]], np.int32))])
    report = pf.explain(lambda i: pf.dag_map(cell, x[i], kids[i], fallback="error"), 2)
    (row,) = [r for r in report.rows if r.how == "custom"]
    assert "level loop" in row.converter and row.ragged, row
    assert not report.fallbacks


def test_a_cell_closing_over_a_per_iteration_value_converts_op_by_op():
    # The union rule cannot see the captured value: the call converts op by op (the
    # level loop a per-example while loop), still without a fallback.
    trees = [(np.full([2, D], .5, np.float32), np.array([[-1, -1], [0, -1]], np.int32)),
             (np.full([3, D], -1., np.float32), np.array([[-1, -1], [-1, -1], [0, 1]], np.int32))]
    x, kids = ragged_batch(trees)
    scales = tf.constant([2., 3.])

    def body(i):
        scale = scales[i]
        return pf.dag_map(lambda v, cs, m: cell(v * scale, cs, m), x[i], kids[i],
                          fallback="error")
    got = pf.pfor(body, 2, fallback="error", ragged_outputs=True)
    for row, (tx, tk), scale in zip(got, trees, [2., 3.]):
        np.testing.assert_allclose(row.numpy(), recursion(tx * scale, tk), rtol=1e-5, atol=1e-5)
    report = pf.explain(body, 2)
    assert not [r for r in report.rows if r.how == "custom"] and not report.fallbacks


def test_gradients_of_a_cell_closing_over_a_per_iteration_value_convert_op_by_op():
    trees = [(np.full([2, D], .5, np.float32), np.array([[-1, -1], [0, -1]], np.int32)),
             (np.full([3, D], -1., np.float32), np.array([[-1, -1], [-1, -1], [0, 1]], np.int32))]
    x, kids = ragged_batch(trees)
    scales = tf.constant([2., 3.])

    def grad(scale, xi, ki, dag_map=pf.dag_map):
        def var_cell(node, cs, mask):
            return (tf.tanh(tf.tensordot(node[0] * scale, U, 1) + tf.reduce_sum(cs[0], 0)),)
        with tf.GradientTape() as tape:
            (h,) = dag_map(var_cell, (xi,), ki, fallback="error")
            loss = tf.reduce_sum(h ** 2)
        return tape.gradient(loss, U, unconnected_gradients="zero")
    got = pf.pfor(lambda i: grad(scales[i], x[i], kids[i]), 2, fallback="error")
    for g, (tx, tk), scale in zip(got, trees, [2., 3.]):
        want = grad(scale, tx, tk, dag_map=functools.partial(tf_recursion, parts=1))
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def test_under_xla_where_sizes_are_static():
    # jit_compile=True: every node runs in every level (static shapes), the level's
    # results kept; alone, inside vectorized_map and in per-example gradients.
    kids = np.array([[-1, -1], [-1, -1], [0, 1], [2, 0], [3, 2]], np.int32)
    xs = np.random.default_rng(1).normal(size=[3, 5, D]).astype(np.float32)
    v = tf.Variable(W)

    def var_cell(x, cs, mask):
        return tf.tanh(tf.tensordot(x, v, 1) + tf.reduce_sum(cs, 0))

    def loss(x):
        return tf.reduce_sum(pf.dag_map(var_cell, x, kids, fallback="error") ** 2)

    def grads(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            value = loss(x)
        return tape.gradient(value, [x, v])
    one = tf.function(lambda x: pf.dag_map(cell, x, kids, fallback="error"), jit_compile=True)
    np.testing.assert_allclose(one(xs[0]), recursion(xs[0], kids), rtol=1e-5, atol=1e-6)
    for got, want in zip(tf.function(grads, jit_compile=True)(tf.constant(xs[0])),
                         tf.function(grads)(tf.constant(xs[0]))):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    mapped = tf.function(lambda b: pf.vectorized_map(
        lambda x: pf.dag_map(cell, x, kids, fallback="error"), b, fallback="error"),
        jit_compile=True)(xs)
    for i in range(3):
        np.testing.assert_allclose(mapped[i], recursion(xs[i], kids), rtol=1e-5, atol=1e-6)
    per_example = tf.function(lambda b: pf.per_example_gradients(loss, [v], b, fallback="error"),
                              jit_compile=True)(xs)[0]
    for i in range(3):
        np.testing.assert_allclose(per_example[i], grads(tf.constant(xs[i]))[1], rtol=1e-4,
                                   atol=1e-5)
