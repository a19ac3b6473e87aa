"""tf.cond and tf.switch_case in the body: invariant and per-iteration selectors,
branches of different layouts and costs, side effects, all without fallback."""

from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing
from pfor_controlflow.loops import masking


def _data(n, m=3, seed=0):
    return tf.random.stateless_normal([n, m], seed=[seed, 7])


@given(n=st.integers(0, 5), m=st.integers(1, 4), stacked_pred=st.booleans(),
       stacked_x=st.booleans(), graph=st.booleans())
def test_cond_layouts(n, m, stacked_pred, stacked_x, graph):
    x = _data(max(n, 1), m)
    w = _data(m, m, seed=1)

    def body(i):
        xi = tf.gather(x, i) if stacked_x else x[0]
        pred = tf.reduce_sum(xi) > 0 if stacked_pred else tf.reduce_sum(w) > 0
        # Branches of different cost; one output invariant in one branch only.
        return tf.cond(pred, lambda: (tf.linalg.matvec(w, tf.tanh(xi)), w[0]),
                       lambda: (xi * 2.0, xi))

    testing.assert_matches_loop(body, n, graph=graph)


@settings(max_examples=20)  # each example converts and runs a loop (suite time)
@given(n=st.integers(0, 6), branches=st.integers(1, 4), graph=st.booleans(),
       invariant_index=st.booleans())
def test_switch_case_several_outputs(n, branches, graph, invariant_index):
    x = _data(max(n, 1))

    def make(k):
        return lambda xi: (xi * float(k), tf.reduce_sum(xi) + k, tf.cast(k, tf.int64))

    def body(i):
        xi = tf.gather(x, i)
        index = tf.constant(1) if invariant_index else i % (branches + 1) - 1
        return tf.switch_case(index, [lambda k=k: make(k)(xi) for k in range(branches)])

    testing.assert_matches_loop(body, n, graph=graph)


def test_branch_no_iteration_takes_does_not_run():
    x = tf.abs(_data(4)) + 1.0

    def failing(xi):
        with tf.control_dependencies([tf.debugging.Assert(False, ["else ran"])]):
            return tf.identity(xi)

    def body(i):
        xi = tf.gather(x, i)
        # The else branch would fail its assert: it must not run when no row takes it.
        return tf.cond(tf.reduce_min(xi) > 0, lambda: xi, lambda: failing(xi))

    testing.assert_matches_loop(body, 4, graph=True)


def test_numeric_predicate():
    x = _data(5)
    counts = tf.constant([0, 2, 0, 1, 3])

    def body(i):
        xi = tf.gather(x, i)
        c = tf.gather(counts, i)
        return tf.raw_ops.StatelessIf(
            cond=c, input=[xi], Tout=[tf.float32],
            then_branch=tf.function(lambda v: v * 3.0).get_concrete_function(
                tf.TensorSpec([3])),
            else_branch=tf.function(lambda v: v - 1.0).get_concrete_function(
                tf.TensorSpec([3])))[0]

    testing.assert_matches_loop(body, 5, graph=True)


def test_cond_inside_while_inside_cond():
    x = _data(6)
    lengths = tf.constant([0, 3, 1, 4, 2, 5])

    def inner(xi, n_steps):
        def step(t, h):
            h = tf.cond(tf.reduce_sum(h) > 0, lambda: h - 0.5 * xi, lambda: h + xi)
            return t + 1, h
        return tf.while_loop(lambda t, h: t < n_steps, step, (0, xi))[1]

    def body(i):
        xi = tf.gather(x, i)
        n_steps = tf.gather(lengths, i)
        return tf.cond(xi[0] > 0, lambda: inner(xi, n_steps), lambda: -xi)

    testing.assert_matches_loop(body, 6)
    testing.assert_matches_loop(body, 6, graph=True)


def _adding_in_one_branch(x, v):
    """Rows whose first value is positive add their second to ``v``."""
    def body(i):
        xi = tf.gather(x, i)
        return tf.cond(xi[0] > 0, lambda: v.assign_add(xi[1]) * 0 + xi[1], lambda: xi[1])
    return body


def test_side_effects_in_a_branch_run_for_the_rows_that_take_it():
    x = _data(5)
    v = tf.Variable(0.0)
    body = _adding_in_one_branch(x, v)

    out = pf.pfor(body, 5, fallback="error")
    expected = sum(float(r[1]) for r in x.numpy() if r[0] > 0)
    np.testing.assert_allclose(v.numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(out, x[:, 1], rtol=1e-6)


def test_assert_in_a_stacked_cond_fires():
    x = tf.range(10, dtype=tf.float32)

    def body(i):
        xi = tf.gather(x, i)
        tf.debugging.assert_less(xi, 7.0, message="too big")  # a float assert: a cond
        return xi

    with pytest.raises(tf.errors.InvalidArgumentError, match="too big"):
        pf.pfor(body, 10, fallback="error")
    np.testing.assert_allclose(pf.pfor(body, 7, fallback="error"), np.arange(7))


def test_collective_inside_a_stacked_cond_is_refused():
    x = _data(4)

    def body(i):
        xi = tf.gather(x, i)
        return tf.cond(xi[0] > 0, lambda: pf.all_sum(xi), lambda: xi)

    with pytest.raises(pf.ConversionError, match="predicate differs between iterations"):
        pf.pfor(body, 4, fallback="error")


@given(n=st.integers(0, 5), stacked_pred=st.booleans(), graph=st.booleans(),
       switch=st.booleans())
@settings(max_examples=15)  # each example traces a conditional and its gradient
def test_gradients_through_conditionals(n, stacked_pred, graph, switch):
    """tf.cond's gradient passes each branch's intermediates on as optionals; with a
    per-iteration predicate they are stitched row by row."""
    x = _data(max(n, 1), seed=4)
    w = _data(3, 3, seed=5)

    def body(i):
        xi = tf.gather(x, i)
        pred = xi[0] > 0 if stacked_pred else tf.reduce_sum(w) > 0
        with tf.GradientTape() as tape:
            tape.watch(w)
            branches = [lambda: tf.tanh(tf.linalg.matvec(w, xi)),
                        lambda: tf.sin(tf.linalg.matvec(w, xi * 2.0)) * xi]
            if switch:
                y = tf.switch_case(tf.cast(pred, tf.int32) + 1, branches + [lambda: xi * w[0]])
            else:
                y = tf.cond(pred, *branches)
            loss = tf.reduce_sum(y ** 2)
        return tape.gradient(loss, w, unconnected_gradients="zero")

    testing.assert_matches_loop(body, n, graph=graph, rtol=1e-5, atol=1e-6)


# -- under XLA and inside an outer pfor: every branch on all rows, rows select ----------
def _assert_matches_loop_under_xla(body, n):
    got = tf.function(lambda: pf.pfor(body, n, fallback="error"), jit_compile=True)()
    testing.assert_same_results(got, testing.sequential(body, n), where=" (XLA)")


@given(n=st.integers(1, 5), m=st.integers(1, 4), stacked_x=st.booleans())
@settings(max_examples=6)  # each example compiles
def test_stacked_predicate_under_xla(n, m, stacked_x):
    x = _data(n, m)
    w = _data(m, m, seed=1)

    def body(i):
        xi = tf.gather(x, i) if stacked_x else x[0]
        pred = tf.reduce_sum(xi) + tf.cast(i % 2, tf.float32) > 0
        # sqrt of a negative in the branch a row does not take must not leak.
        return tf.cond(pred, lambda: (tf.sqrt(tf.abs(xi) - 0.5), w[0]),
                       lambda: (xi * 2.0, xi))

    _assert_matches_loop_under_xla(body, n)


@given(n=st.integers(1, 6), branches=st.integers(1, 4))
@settings(max_examples=6)
def test_switch_case_with_a_per_iteration_index_under_xla(n, branches):
    x = _data(n)

    def body(i):
        xi = tf.gather(x, i)
        return tf.switch_case(i % (branches + 1) - 1,  # -1: out of range, the last branch
                              [lambda k=k: (xi * float(k), tf.reduce_sum(xi) + k)
                               for k in range(branches)])

    _assert_matches_loop_under_xla(body, n)


def test_stacked_predicate_inside_an_outer_pfor():
    x = _data(6, 4)

    def outer(j):
        def inner(i):
            xij = x[j, i]
            return tf.cond(xij > 0, lambda: tf.sqrt(xij), lambda: xij * xij)
        return pf.pfor(inner, 4, fallback="error")

    testing.assert_matches_loop(outer, 6)


def test_effects_in_a_branch_that_must_run_masked_are_a_clear_error():
    v = tf.Variable(0.0)
    body = _adding_in_one_branch(_data(5), v)

    compiled = tf.function(lambda: pf.pfor(body, 5, fallback="error"), jit_compile=True)
    with pytest.raises(pf.ConversionError, match="under XLA must run masked.*AssignAdd"):
        compiled()
    with pytest.raises(pf.ConversionError, match="inside an outer pfor.*AssignAdd"):
        pf.pfor(lambda j: pf.pfor(body, 5, fallback="error"), 2, fallback="error")
    assert v.numpy() == 0.0


def test_per_example_gradients_through_a_stacked_cond_under_xla():
    x = _data(5, 1)[:, 0]
    w = tf.Variable(1.5)

    def body(i):
        xi = tf.gather(x, i)
        with tf.GradientTape() as tape:
            y = tf.cond(xi > 0, lambda: tf.sin(w * xi), lambda: w * w * xi)
        return tape.gradient(y, w)

    _assert_matches_loop_under_xla(body, 5)


def test_per_example_jacobian_of_a_function_with_a_cond():
    """pf.jacobian inside a body: the tape copies the forward pass into a function
    graph that names the cond's branches without holding them (found in the graph
    it was built in)."""
    x = _data(3, 4)

    def body(i):
        def f(v):
            return tf.where(v > 0, v * v, tf.sin(v)) + tf.cond(
                tf.reduce_sum(v) > 0, lambda: v, lambda: -v)
        return pf.jacobian(f, tf.gather(x, i), fallback="error")

    testing.assert_matches_loop(body, 3, graph=True)


D_TREE = 3
W_TREE = tf.constant(np.linspace(-1., 1., D_TREE * D_TREE, dtype=np.float32).reshape(3, 3))


@st.composite
def _trees(draw):
    """A batch of trees in post-order, each node's children among the nodes before it
    (-1 for none): single nodes, chains, shared children, of different sizes."""
    trees = []
    for _ in range(draw(st.integers(0, 4))):
        size = draw(st.integers(1, 5))
        kids = np.full([size, 2], -1, np.int32)
        for v in range(1, size):
            for j in range(2):
                if draw(st.booleans()):
                    kids[v, j] = draw(st.integers(0, v - 1))
        trees.append(kids)
    return trees


def _node_loop(kids, x, use_case):
    """The natural per-tree code: a while loop over the nodes reading the children's
    states from a TensorArray under a per-node conditional (index -1 unguarded: only
    the rows that take a branch may run it)."""
    n = tf.shape(kids)[0]

    def read(hs, j):
        if use_case:  # switch_case on 0 (absent) / 1 (present)
            return tf.switch_case(tf.cast(j >= 0, tf.int32),
                                  [lambda: tf.zeros([D_TREE]), lambda: hs.read(j)])
        return tf.cond(j >= 0, lambda: hs.read(j), lambda: tf.zeros([D_TREE]))

    def body(t, hs):
        h = tf.tanh(tf.linalg.matvec(W_TREE, x[t]) + read(hs, kids[t, 0])
                    + 0.5 * read(hs, kids[t, 1]))
        return t + 1, hs.write(t, h)
    arrays = tf.TensorArray(tf.float32, size=n, element_shape=[D_TREE], clear_after_read=False)
    _, hs = tf.while_loop(lambda t, _: t < n, body, (0, arrays))
    return hs.read(n - 1), hs.stack()


@settings(max_examples=12, deadline=None)
@given(_trees(), st.booleans(), st.integers(0, 9))
def test_tensor_array_reads_under_a_per_iteration_conditional(trees, use_case, seed):
    """A node loop over trees of different sizes whose body reads its TensorArray in
    cond / switch_case branches taken per node: every tree's states as its own loop's,
    no fallback."""
    lengths = [len(t) for t in trees]
    kids = tf.RaggedTensor.from_row_lengths(
        np.concatenate(trees + [np.zeros([0, 2], np.int32)]), tf.constant(lengths, tf.int64))
    x = tf.RaggedTensor.from_row_lengths(np.random.default_rng(seed).normal(
        size=[sum(lengths), D_TREE]).astype(np.float32), tf.constant(lengths, tf.int64))
    root, states = pf.pfor(lambda i: _node_loop(kids[i], x[i], use_case), len(trees),
                           fallback="error", ragged_outputs=True)
    reference = tf.function(lambda k, v: _node_loop(k, v, use_case))
    for i, tree in enumerate(trees):
        want_root, want_states = reference(tf.constant(tree), x[i])
        np.testing.assert_allclose(root[i], want_root, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.reshape(states[i].numpy(), [-1, D_TREE]), want_states,
                                   rtol=1e-5, atol=1e-6)


def _written_under_cond(x, flags, steps, use_case, pass_on):
    """A loop writing a TensorArray in the branches of a per-step conditional: both
    branches write (reading an earlier item), or one passes the array on unchanged."""
    size = x.shape[0]

    def write_a(t, ta):
        return ta.write(t, 2.0 * x[t] + ta.read(tf.maximum(t - 1, 0)))

    def write_b(t, ta):
        return ta if pass_on else ta.write(t, -x[t])

    def body(t, ta):
        if use_case:
            ta = tf.switch_case(tf.cast(flags[t], tf.int32),
                                [lambda: write_b(t, ta), lambda: write_a(t, ta)])
        else:
            ta = tf.cond(flags[t], lambda: write_a(t, ta), lambda: write_b(t, ta))
        return t + 1, ta
    arrays = tf.TensorArray(tf.float32, size=size, element_shape=x.shape[1:],
                            clear_after_read=False)
    _, ta = tf.while_loop(lambda t, _: t < steps, body, (0, arrays))
    return ta.stack()


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 5), st.integers(1, 4), st.booleans(), st.booleans(), st.booleans(),
       st.integers(0, 9))
def test_tensor_array_writes_under_a_per_iteration_conditional(n, size, per_row_steps,
                                                               use_case, pass_on, seed):
    """Each row's TensorArray holds the writes of the branches it took (also in a loop
    whose trip count differs per row), no fallback."""
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=[n, size, 2]).astype(np.float32))
    flags = tf.constant(rng.random([n, size]) > 0.5)
    steps = tf.constant(rng.integers(0, size + 1, [n]) if per_row_steps else
                        np.full([n], size), tf.int32)
    testing.assert_matches_loop(
        lambda i: _written_under_cond(x[i], flags[i], steps[i], use_case, pass_on), n,
        graph=True, fallback="error")


@pytest.mark.parametrize("where", ["xla", "nested"])
def test_tensor_array_writes_under_a_per_iteration_conditional_run_masked(where):
    """Run masked (XLA; an outer pfor): each row's writes count only in its branch."""
    rng = np.random.default_rng(3)
    x = tf.constant(rng.normal(size=[3, 4, 5, 2]).astype(np.float32))
    flags = tf.constant(rng.random([3, 4, 5]) > 0.5)
    one = lambda i, j: _written_under_cond(x[i, j], flags[i, j], 5, False, True)
    want = tf.stack([tf.stack([tf.function(one)(i, j) for j in range(4)]) for i in range(3)])
    if where == "xla":
        got = tf.function(lambda: pf.pfor(lambda j: one(0, j), 4, fallback="error"),
                          jit_compile=True)()
        np.testing.assert_allclose(got, want[0], rtol=1e-5, atol=1e-6)
        return
    got = pf.pfor(lambda i: pf.pfor(lambda j: one(i, j), 4, fallback="error"), 3,
                  fallback="error")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_growing_a_tensor_array_under_a_per_iteration_conditional_is_a_clear_error():
    """A branch that grows the array for its rows only: refused, naming the fix."""
    flags = tf.constant([True, False, True])

    def body(i):
        ta = tf.TensorArray(tf.float32, size=1, dynamic_size=True)
        ta = tf.cond(flags[i], lambda: ta.write(2, 1.0), lambda: ta.write(0, 2.0))
        return ta.stack()
    with pytest.raises(pf.ConversionError, match="fixed size"):
        pf.pfor(body, 3, fallback="error")


_NODES = 7


def _random_tree(rng, size):
    """Children of a random binary tree of ``size`` nodes (root 0), padded with -1."""
    kids = -np.ones([_NODES, 2], np.int32)
    for child in range(1, size):
        while True:
            parent, side = rng.integers(0, child), rng.integers(0, 2)
            if kids[parent, side] < 0:
                kids[parent, side] = child
                break
    return kids


@settings(deadline=None, max_examples=6)
@given(sizes=st.lists(st.integers(1, _NODES), min_size=1, max_size=5), seed=st.integers(0, 99),
       graph=st.booleans())
def test_a_depth_first_walk_with_a_tensor_array_stack_of_per_example_depth(sizes, seed, graph):
    """An explicit stack (recursion written as a loop): pushes under per-example
    conditionals, pops in a loop that runs until each example's stack is empty."""
    rng = np.random.default_rng(seed)
    kids = tf.constant(np.stack([_random_tree(rng, m) for m in sizes]))
    x = tf.random.stateless_normal([len(sizes), _NODES], seed=[seed, 3])

    def body(i):
        k = kids[i]
        stack = tf.TensorArray(tf.int32, size=_NODES, element_shape=[], clear_after_read=False)
        order = tf.TensorArray(tf.int32, size=_NODES, element_shape=[], clear_after_read=False)

        def step(top, count, total, stack, order):
            node, top = stack.read(top - 1), top - 1
            order = order.write(count, node)
            left, right = k[node, 0], k[node, 1]
            stack, top = tf.cond(right >= 0, lambda: (stack.write(top, right), top + 1),
                                 lambda: (stack, top))
            stack, top = tf.cond(left >= 0, lambda: (stack.write(top, left), top + 1),
                                 lambda: (stack, top))
            return top, count + 1, total * 0.5 + x[i, node], stack, order

        _, count, total, _, order = tf.while_loop(
            lambda top, *_: top > 0, step, (1, 0, 0.0, stack.write(0, 0), order))
        return order.stack(), count, total

    testing.assert_matches_loop(body, len(sizes), graph=graph)


@pytest.mark.parametrize("masked", [False, True])
@settings(deadline=None, max_examples=6)
@given(lengths=st.lists(st.integers(0, 5), min_size=1, max_size=4), plain_else=st.booleans())
def test_per_example_gradients_of_a_loop_of_per_example_length_with_a_per_step_cond(
        masked, lengths, plain_else):
    """Each step of a loop of the example's own length takes a branch by its input: the
    forward loop pushes every step's branch intermediates (each row its own branch's)
    and the gradient loop pops them, each row its own (no fallback)."""
    x = tf.random.stateless_normal([len(lengths), 5, 3], seed=[3, len(lengths)])
    w = tf.Variable(tf.random.stateless_normal([3, 3], seed=[3, 9]) * 0.5)

    def loss(xi, n):
        def step(t, h):
            other = (lambda: h) if plain_else else (lambda: h * tf.sin(xi[t]))
            return t + 1, tf.cond(xi[t, 0] > 0,
                                  lambda: tf.tanh(tf.linalg.matvec(w, xi[t] + h)), other)
        return tf.reduce_sum(tf.while_loop(lambda t, h: t < n, step, (0, tf.ones([3])))[1] ** 2)

    @tf.function
    def want(xi, n):
        with tf.GradientTape() as tape:
            value = loss(xi, n)
        return tape.gradient(value, w, unconnected_gradients="zero")

    with mock.patch.object(masking, "pays", lambda loop: masked):
        got = tf.function(lambda x, n: pf.per_example_gradients(
            loss, [w], (x, n), fallback="error"))(x, tf.constant(lengths))[0]
    for j, n in enumerate(lengths):
        testing.assert_allclose(got[j], want(x[j], tf.constant(n)), rtol=1e-5, atol=1e-6,
                                what=f"example {j}")
