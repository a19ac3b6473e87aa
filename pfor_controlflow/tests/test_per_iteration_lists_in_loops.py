"""A tensor list of per-iteration size (``tf.TensorArray(size=n_i)``) written and read
in place by a ``tf.while_loop`` of the body: the usual way to collect a per-example
loop's outputs (``for t in range(n_i): ta = ta.write(t, h)``). The loop keeps each
row's own number of items; writes and reads past a row's end fail as the loop's do,
on the active subset and masked; plain and ragged items; gradients through it; all
against the sequential loop with no fallback."""

from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing
from pfor_controlflow.loops import masking


def _x(n, d=5, seed=0):
    return tf.random.stateless_normal([max(n, 1), d], seed=[seed, 13])


def _strategy(masked):
    """A loop with per-iteration trip counts runs masked or on the active subset."""
    return mock.patch.object(masking, "pays", lambda loop: masked)


def _graph_loop(body, n):
    """The loop in a graph (an eager TensorArray of items of unknown shape cannot
    concat them)."""
    return tf.function(lambda: [body(tf.constant(j)) for j in range(n)])()


def _collect(x, sizes, steps, ragged, per_iteration_steps, i):
    """Iteration i: a TensorArray of size ``sizes[i]`` that a loop of ``steps[i]``
    (or ``min(steps)``) steps writes item t into (and reads item t back from)."""
    size = tf.gather(sizes, i)
    xi = tf.gather(x, i)
    if ragged:
        ta = tf.TensorArray(tf.float32, size=size, infer_shape=False, element_shape=[None],
                            clear_after_read=False)
    else:
        ta = tf.TensorArray(tf.float32, size=size, element_shape=[], clear_after_read=False)
    limit = tf.gather(steps, i) if per_iteration_steps else tf.reduce_min(steps)

    def step(t, h, ta):
        h = tf.tanh(h + tf.gather(xi, t))
        item = tf.sin(xi[:t + 1]) * h if ragged else h
        ta = ta.write(t, item)
        return t + 1, h + tf.reduce_sum(ta.read(t)), ta

    _, h, ta = tf.while_loop(lambda t, h, ta: t < limit, step, (0, 0.0, ta))
    whole = ta.concat() if ragged else ta.stack()
    return h, tf.reduce_sum(whole), ta.size()


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_drawn_sizes_steps_and_items(data):
    n = data.draw(st.integers(1, 4), label="n")
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=n, max_size=n), label="sizes")
    ragged = data.draw(st.booleans(), label="ragged items")
    # every step writes inside its row's list (past the end: tests below); ragged items
    # are all set (the loop cannot concat unset items of unknown shape)
    steps = [s if ragged else data.draw(st.integers(0, s), label="steps") for s in sizes]
    per_iteration_steps = data.draw(st.booleans(), label="per-iteration steps")
    masked = data.draw(st.booleans(), label="masked")
    x = _x(n, seed=1)
    size_of, steps_of = tf.constant(sizes), tf.constant(steps)

    def body(i):
        return _collect(x, size_of, steps_of, ragged, per_iteration_steps, i)

    with _strategy(masked):
        got = pf.pfor(body, n, fallback="error")
        graph = tf.function(lambda k: pf.pfor(body, k, fallback="error"))(tf.constant(n))
    want = tuple(tf.stack(v) for v in zip(*_graph_loop(body, n)))
    testing.assert_same_results(got, want, rtol=1e-5, atol=1e-6)
    testing.assert_same_results(graph, want, rtol=1e-5, atol=1e-6)
    assert got[2].numpy().tolist() == sizes


@pytest.mark.parametrize("ragged", [False, True])
def test_the_stack_after_the_loop_is_ragged_by_each_rows_size(ragged):
    x = _x(4, seed=2)
    # (the loop cannot stack an empty list of ragged items: its item shape is unknown)
    sizes = [2, 1, 3, 1] if ragged else [2, 0, 3, 1]
    size_of = tf.constant(sizes)

    def body(i):
        size = tf.gather(size_of, i)
        ta = tf.TensorArray(tf.float32, size=size, infer_shape=not ragged,
                            element_shape=[2] if not ragged else [None])

        def step(t, ta):
            item = tf.gather(x, i)[t:t + 2] if not ragged else tf.gather(x, i)[:2]
            return t + 1, ta.write(t, item * tf.cast(t + 1, tf.float32))

        _, ta = tf.while_loop(lambda t, ta: t < size, step, (0, ta))
        return ta.stack()

    for masked in (False, True):
        with _strategy(masked):
            got = pf.pfor(body, 4, fallback="error", ragged_outputs=True)
        testing.assert_rows_match(got, _graph_loop(body, 4), where=f" (masked={masked})")
        assert [len(row) for row in got.to_list()] == sizes


@pytest.mark.parametrize("ragged", [False, True])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("per_iteration_steps", [False, True])
def test_a_write_past_a_rows_end_in_the_loop_fails_like_the_loop(
        ragged, masked, per_iteration_steps):
    x = _x(3, seed=3)
    sizes = tf.constant([2, 3, 1])
    # one step more than row 2 holds (per-iteration: one more than each row holds)
    steps = tf.constant([3, 4, 2]) if per_iteration_steps else tf.constant([2, 2, 2])

    def body(i):
        return _collect(x, sizes, steps, ragged, per_iteration_steps, i)[1]

    with _strategy(masked), pytest.raises(tf.errors.InvalidArgumentError,
                                          match="writes a tensor list item past the end"):
        pf.pfor(body, 3, fallback="error")
    with pytest.raises((tf.errors.InvalidArgumentError, tf.errors.OutOfRangeError)):
        _graph_loop(body, 3)


@pytest.mark.parametrize("ragged", [False, True])
def test_a_read_past_a_rows_end_in_the_loop_fails_like_the_loop(ragged):
    x = _x(3, seed=4)
    sizes = tf.constant([3, 1, 2])

    def body(i):
        xi = tf.gather(x, i)
        ta = tf.TensorArray(tf.float32, size=tf.gather(sizes, i), infer_shape=not ragged,
                            element_shape=[] if not ragged else [None],
                            clear_after_read=False)
        ta = ta.unstack(tf.ones([tf.gather(sizes, i)])) if not ragged else ta.write(
            0, xi[:2]).write(tf.gather(sizes, i) - 1, xi[:2])

        def step(t, acc):
            return t + 1, acc + tf.reduce_sum(ta.read(t))

        return tf.while_loop(lambda t, acc: t < 2, step, (0, 0.0))[1]

    with pytest.raises(tf.errors.InvalidArgumentError, match="reads a tensor list item past"):
        pf.pfor(body, 3, fallback="error")
    with pytest.raises((tf.errors.InvalidArgumentError, tf.errors.OutOfRangeError)):
        _graph_loop(body, 3)


def test_a_write_that_grows_such_a_list_in_a_loop_is_a_clear_error():
    sizes = tf.constant([2, 3, 1])

    def body(i):
        ta = tf.TensorArray(tf.float32, size=tf.gather(sizes, i), dynamic_size=True,
                            element_shape=[])
        ta = tf.while_loop(lambda t, ta: t < 4, lambda t, ta: (t + 1, ta.write(t, 1.0)),
                           (0, ta))[1]
        return tf.reduce_sum(ta.stack())

    with pytest.raises(pf.ConversionError, match="grows or resizes it"):
        pf.pfor(body, 3, fallback="error")


@pytest.mark.parametrize("masked", [False, True])
def test_per_example_gradients_of_an_rnn_over_sequences_of_their_own_length(masked):
    """An RNN written for one sequence: its outputs collected in a TensorArray of the
    sequence's length, the loss over them (the gradient loop reads and clears each
    row's own item: per-row positions)."""
    x = tf.random.stateless_normal([4, 6, 3], seed=[5, 1])
    lengths = tf.constant([6, 1, 4, 3])
    w = tf.Variable(tf.random.stateless_normal([3, 3], seed=[5, 2]) * 0.5)
    u = tf.Variable(tf.random.stateless_normal([3, 3], seed=[5, 3]) * 0.5)

    def loss(xi, n):
        outputs = tf.TensorArray(tf.float32, size=n, element_shape=[3])

        def step(t, h, outputs):
            h = tf.tanh(tf.linalg.matvec(w, xi[t], transpose_a=True)
                        + tf.linalg.matvec(u, h, transpose_a=True))
            return t + 1, h, outputs.write(t, h)

        _, _, outputs = tf.while_loop(lambda t, h, o: t < n, step, (0, tf.zeros([3]), outputs))
        return tf.reduce_sum(tf.reduce_mean(outputs.stack() ** 2, 0))

    with _strategy(masked):
        got = pf.per_example_gradients(loss, [w, u], (x, lengths), fallback="error")
    for j in range(4):
        with tf.GradientTape() as tape:
            value = loss(x[j], lengths[j])
        for g, want in zip(got, tape.gradient(value, [w, u])):
            testing.assert_allclose(g[j], want, rtol=1e-5, atol=1e-6, what=f"example {j}")
    assert float(tf.reduce_max(tf.abs(got[0][1] - got[0][0]))) > 0.0


def test_in_an_outer_pfor():
    x = _x(6, seed=6)
    sizes = tf.constant([[2, 1, 3], [1, 3, 2]])

    def outer(i):
        def inner(j):
            return _collect(tf.reshape(x, [2, 3, 5])[i], tf.gather(sizes, i), tf.gather(sizes, i),
                            False, True, j)[1]
        return pf.pfor(inner, 3, fallback="error")

    got = pf.pfor(outer, 2, fallback="error")
    want = tf.stack([tf.stack(_graph_loop(lambda j, i=i: _collect(
        tf.reshape(x, [2, 3, 5])[i], tf.gather(sizes, i), tf.gather(sizes, i), False, True, j)[1],
        3)) for i in range(2)])
    testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.all(np.isfinite(got.numpy()))


@pytest.mark.parametrize("read", ["stack", "concat"])
def test_a_whole_read_of_items_pushed_for_per_iteration_steps_is_ragged(read, case_modes):
    """Pushes leave each row's own items at the end of the loop's list (a gradient
    loop pops them from there): a whole read moves them to the start, each row its
    own number of items, rows of no step included."""
    x = _x(4, 6, seed=7)
    steps_of = [2, 0, 4, 1]
    trips = tf.constant(steps_of)

    def body(i):
        steps = tf.gather(trips, i)
        items = tf.raw_ops.EmptyTensorList(element_shape=[2], max_num_elements=-1,
                                           element_dtype=tf.float32)

        def step(t, items):
            item = tf.gather(x, i)[t:t + 2] * tf.cast(t + 1, tf.float32)
            return t + 1, tf.raw_ops.TensorListPushBack(input_handle=items, tensor=item)

        _, items = tf.while_loop(lambda t, items: t < steps, step, (0, items))
        if read == "stack":
            return tf.raw_ops.TensorListStack(input_handle=items, element_shape=[2],
                                              element_dtype=tf.float32)
        return tf.raw_ops.TensorListConcatV2(
            input_handle=items, element_shape=[2], leading_dims=tf.zeros([0], tf.int64),
            element_dtype=tf.float32)[0]

    for masked in (False, True):
        with _strategy(masked):
            got = testing.assert_matches_loop(body, 4, ragged=True, modes=case_modes)
        per_item = 1 if read == "stack" else 2  # (concat: an item's two values)
        assert got.row_lengths().numpy().tolist() == [s * per_item for s in steps_of]


def _tree(sizes):
    """Children [2k-1, 2] (-1: none) of a binary tree in post-order whose left
    subtrees have the leaf counts ``sizes`` draws (root last)."""
    def build(leaves, draws):
        if leaves == 1:
            return [(-1, -1)]
        split = 1 + next(draws) % (leaves - 1)
        left, right = build(split, draws), build(leaves - split, draws)
        shift = len(left)
        right = [(a + shift if a >= 0 else -1, b + shift if b >= 0 else -1) for a, b in right]
        return left + right + [(len(left) - 1, len(left) + len(right) - 1)]
    leaves, *draws = sizes
    return np.array(build(leaves, iter(draws + [0] * leaves)), np.int32)


def _pushes(graph, shape):
    """The TensorListPushBack items of ``shape`` in ``graph`` and the functions it calls."""
    found, library = [], {f.name: f for f in graph._functions.values()}  # pylint: disable=protected-access
    graphs = [graph] + [f.graph for f in library.values() if hasattr(f, "graph")]
    for g in graphs:
        found += [op for op in g.get_operations() if op.type == "TensorListPushBack"
                  and op.inputs[1].shape.as_list() == shape]
    return found


# (per-example gradients of a per-iteration conditional reading a list in a masked
# loop are refused: the masked conditional does not pass the gradient's intermediates
# on; forward, it runs: test_a_per_iteration_conditional_reading_a_list_in_a_masked_loop)
@pytest.mark.parametrize("read, masked", [("where", False), ("where", True), ("cond", False)])
@settings(max_examples=4, deadline=None)
@given(trees=st.lists(st.lists(st.integers(1, 9), min_size=1, max_size=10), min_size=1,
                      max_size=4))
def test_per_example_gradients_of_a_node_loop_over_trees_of_their_own_size(
        read, masked, trees):
    """A tree's nodes in post-order, one loop step per node reading its children's
    states back from a TensorArray of the tree's size at per-row positions (absent
    children: tf.where, or a tf.cond whose branch reads the array, which the gradient
    records each step for its size): per-example gradients over ragged rows of trees
    (the gradient loop adds each read's gradient, a list of the row's size, to the list
    it carries) with no fallback; the weights the loop reads are recorded once for all
    rows, not per row."""
    kids = [_tree(t) for t in trees]
    x = tf.RaggedTensor.from_row_lengths(
        tf.random.stateless_normal([sum(len(k) for k in kids), 3], seed=[7, len(kids)]),
        [len(k) for k in kids])
    kids = tf.ragged.constant(kids, ragged_rank=1, dtype=tf.int32)
    w = tf.Variable(tf.random.stateless_normal([3, 3], seed=[7, 1]) * 0.5)
    u = tf.Variable(tf.random.stateless_normal([3, 3], seed=[7, 2]) * 0.5)

    def loss(xi, ki):
        n = tf.shape(ki)[0]
        states = tf.TensorArray(tf.float32, size=n, element_shape=[3], clear_after_read=False)

        def step(t, states):
            def child(j):
                if read == "cond":
                    return tf.cond(j >= 0, lambda: states.read(tf.maximum(j, 0)),
                                   lambda: tf.zeros([3]))
                return tf.where(j >= 0, states.read(tf.maximum(j, 0)), tf.zeros([3]))
            h = tf.tanh(tf.linalg.matvec(w, xi[t], transpose_a=True) + tf.linalg.matvec(
                u, child(ki[t, 0]) + child(ki[t, 1]), transpose_a=True))
            return t + 1, states.write(t, h)

        _, states = tf.while_loop(lambda t, s: t < n, step, (0, states))
        return tf.reduce_sum(states.read(n - 1) ** 2)

    @tf.function
    def got_fn(x, kids):
        return pf.per_example_gradients(loss, [w, u], (x, kids), fallback="error")

    @tf.function
    def want_fn(xi, ki):
        with tf.GradientTape() as tape:
            value = loss(xi, ki)
        return tape.gradient(value, [w, u])

    with _strategy(masked):
        got = got_fn(x, kids)
        graph = got_fn.get_concrete_function(x, kids).graph
    for j in range(kids.nrows()):
        for g, want in zip(got, want_fn(x[j], kids[j])):
            testing.assert_allclose(g[j], want, rtol=1e-5, atol=1e-6, what=f"tree {j}")
    assert not _pushes(graph, [None, 3, 3]) and not _pushes(graph, [len(trees), 3, 3])
    assert _pushes(graph, [3, 3])



@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("write_in_branch", [False, True])
def test_a_per_iteration_conditional_reading_a_list_in_a_masked_loop(masked, write_in_branch):
    """The issue's node loop: each tree its own number of nodes, a tf.cond per child
    reading its state back from the TensorArray (and, drawn, one writing into it), on
    the active subset and masked (a masked loop's list meets the conditional's rows as
    the masked conditional's view)."""
    rng = np.random.default_rng(1)
    sizes = [1, 6, 3, 9, 4]
    kids = np.full([5, 9, 2], -1, np.int32)
    for b, size in enumerate(sizes):
        for t in range(1, size):
            kids[b, t] = [rng.integers(0, t) if rng.random() < 0.6 else -1 for _ in range(2)]
    kids, sizes = tf.constant(kids), tf.constant(sizes)
    x = tf.random.stateless_normal([5, 9, 3], [4, 1])
    w = tf.random.stateless_normal([3, 3], [4, 2]) * 0.5

    def body(i):
        k, xi = tf.gather(kids, i), tf.gather(x, i)

        def step(t, hs):
            def child(j):
                return tf.cond(j >= 0, lambda: hs.read(tf.maximum(j, 0)), lambda: tf.zeros([3]))
            h = tf.tanh(tf.linalg.matvec(w, xi[t]) + child(k[t, 0]) + child(k[t, 1]))
            if write_in_branch:
                hs = tf.cond(k[t, 0] >= 0, lambda: hs.write(t, h), lambda: hs.write(t, -h))
            else:
                hs = hs.write(t, h)
            return t + 1, hs
        hs = tf.TensorArray(tf.float32, size=9, element_shape=[3], clear_after_read=False)
        return tf.while_loop(lambda t, hs: t < tf.gather(sizes, i), step, (0, hs))[1].stack()

    with _strategy(masked):
        testing.assert_matches_loop(body, 5, graph=True)
