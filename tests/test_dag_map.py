"""pf.dag_map against plain recursion over drawn trees and DAGs (issue 30, part 2)."""

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
        assert f"node {node} " in e.value.message


@pytest.mark.parametrize("bad", [5, -2])
def test_a_child_out_of_range_names_the_node(bad):
    kids = np.array([[-1, -1], [0, bad]], np.int32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"node 1 has a child outside"):
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
