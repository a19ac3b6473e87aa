"""A tensor list made in the body with a per-iteration size (``tf.TensorArray(size=n_i)``,
a TensorListReserve of a stacked size): each row's list holds its own number of items.
Writes and reads by invariant and per-iteration positions, arrays of dynamic size, a
stack (a ragged value: each row its own number of items) and gradients through it, all
against the loop with no fallback; what the loop refuses, pfor refuses too."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing


def _x(n, d=3, seed=0):
    return tf.random.stateless_normal([max(n, 1), d], seed=[seed, 5])


@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_drawn_sizes_positions_and_layouts(data):
    n = data.draw(st.integers(1, 4), label="n")
    sizes = data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n), label="sizes")
    positions = [data.draw(st.integers(0, s - 1), label="position") for s in sizes]
    stacked_position = data.draw(st.booleans(), label="stacked position")
    stacked_item = data.draw(st.booleans(), label="stacked item")
    dynamic = data.draw(st.booleans(), label="dynamic size")
    x, size_of, position_of = _x(n), tf.constant(sizes), tf.constant(positions)
    c = tf.constant([0.5, -1.0, 2.0])

    def body(i):
        ta = tf.TensorArray(tf.float32, size=tf.gather(size_of, i), dynamic_size=dynamic,
                            clear_after_read=False, element_shape=[3])
        where = tf.gather(position_of, i) if stacked_position else 0
        item = tf.gather(x, i) if stacked_item else c
        ta = ta.write(where, tf.sin(item))
        if dynamic:  # one past the end: the row's list grows by one
            ta = ta.write(ta.size(), item * 2.0)
        stacked = ta.stack()
        return (tf.reduce_sum(stacked, 0), tf.reduce_max(stacked, 0), ta.size(),
                ta.read(where), ta.read(0))

    got = testing.assert_matches_loop(body, n, modes=testing.draw_modes(data))
    want = [s + (1 if dynamic else 0) for s in sizes]
    assert got[2].numpy().tolist() == want


def test_empty_lists_and_unset_items_read_as_zeros():
    sizes = tf.constant([0, 2, 1, 3])

    def body(i):
        ta = tf.TensorArray(tf.float32, size=tf.gather(sizes, i), element_shape=[2])
        return ta.stack()

    got = testing.assert_matches_loop(body, 4, ragged=True, modes=testing.RUN_MODES)
    assert got.row_lengths().numpy().tolist() == [0, 2, 1, 3]
    assert got.flat_values.numpy().tolist() == [[0.0, 0.0]] * 6


def test_stack_and_gather_of_own_positions():
    x = _x(4, 2)
    sizes = tf.constant([3, 1, 4, 2])

    def body(i):
        ta = tf.TensorArray(tf.float32, size=tf.gather(sizes, i), element_shape=[2],
                            clear_after_read=False)
        last = tf.gather(sizes, i) - 1
        ta = ta.write(last, tf.gather(x, i)).write(0, tf.gather(x, i) + 1.0)
        return ta.stack(), ta.gather([0, last])

    got = pf.pfor(body, 4, fallback="error", ragged_outputs=True)
    rows = [body(tf.constant(j)) for j in range(4)]
    testing.assert_rows_match(got[0], [r[0] for r in rows])
    testing.assert_allclose(got[1], tf.stack([r[1] for r in rows]))
    assert got[0].row_lengths().numpy().tolist() == [3, 1, 4, 2]


def test_gradients_through_the_stack_match_the_loop():
    x = _x(4, 3, seed=1)
    sizes = tf.constant([2, 1, 3, 1])

    def body(i):
        xi = tf.gather(x, i)
        ta = tf.TensorArray(tf.float32, size=tf.gather(sizes, i), element_shape=[3])
        ta = ta.write(tf.gather(sizes, i) - 1, xi * xi).write(0, tf.tanh(xi))
        return tf.reduce_sum(ta.stack() ** 2, 0)

    testing.assert_gradients_match(body, [x], 4)
    testing.assert_gradients_match(body, [x], 4, chunked=True)


def test_per_example_gradients_through_such_a_list():
    x = _x(3, 4, seed=2)
    w = tf.Variable(np.linspace(-1.0, 1.0, 4).astype(np.float32))

    def loss(xi):
        size = tf.cast(tf.reduce_sum(tf.cast(xi > 0, tf.int32)), tf.int32) + 1
        ta = tf.TensorArray(tf.float32, size=size, element_shape=[4])
        ta = ta.write(size - 1, xi * w)
        return tf.reduce_sum(tf.reduce_mean(ta.stack(), 0))

    got = pf.per_example_gradients(loss, [w], x, fallback="error")[0]
    want = []
    for j in range(3):
        with tf.GradientTape() as tape:
            value = loss(x[j])
        want.append(tape.gradient(value, w))
    testing.assert_allclose(got, tf.stack(want), rtol=1e-6, atol=1e-6)
    assert got.shape == (3, 4)


def test_a_write_past_an_iterations_end_fails_like_the_loop():
    sizes = tf.constant([2, 1, 3])

    def body(i):
        ta = tf.TensorArray(tf.float32, size=tf.gather(sizes, i), element_shape=[])
        return tf.reduce_sum(ta.write(1, 1.0).stack())

    # (the eager loop's TensorArray raises OutOfRangeError, pfor InvalidArgumentError)
    testing.assert_fails_like_loop(body, 3, error=tf.errors.OpError,
                                   match="writes a tensor list item past the end")


def test_a_negative_size_fails_like_the_loop_in_a_graph():
    def body(i):
        return tf.reduce_sum(tf.TensorArray(tf.float32, size=i - 1, element_shape=[]).stack())

    # (an eager TensorArray takes a negative size; the list op in a graph refuses it)
    with pytest.raises(tf.errors.InvalidArgumentError, match="non negative"):
        tf.function(lambda: [body(tf.constant(j)) for j in range(3)])()
    with pytest.raises(tf.errors.InvalidArgumentError, match="negative size"):
        pf.pfor(body, 3, fallback="error")


def test_a_per_iteration_element_shape():
    """(test_lists_of_per_iteration_element_shape.py has the rest.)"""
    def body(i):
        handle = tf.raw_ops.TensorListReserve(element_shape=tf.reshape(i + 1, [1]),
                                              num_elements=2, element_dtype=tf.float32)
        return tf.raw_ops.TensorListLength(input_handle=handle)

    testing.assert_matches_loop(body, 3, modes=testing.RUN_MODES)


def _writes_last(x, sizes):
    def body(j, i):
        size = sizes[j, i]
        ta = tf.TensorArray(tf.float32, size=size, element_shape=[5])
        ta = ta.write(size - 1, x[j, i] * 2.0)
        return tf.reduce_sum(ta.stack(), 0) + tf.cast(ta.size(), tf.float32)
    return body


def test_in_an_outer_pfor_each_outer_iteration_has_its_own_longest_list():
    x = tf.random.stateless_normal([3, 4, 5], seed=[3, 5])
    sizes = tf.constant([[1, 2, 3, 1], [2, 2, 1, 3], [4, 1, 1, 2]])
    body = _writes_last(x, sizes)
    got = pf.pfor(lambda j: pf.pfor(lambda i: body(j, i), 4, fallback="error"), 3,
                  fallback="error")
    want = tf.stack([tf.stack([body(tf.constant(j), tf.constant(i)) for i in range(4)])
                     for j in range(3)])
    testing.assert_allclose(got, want)
    assert got.shape == (3, 4, 5)


def test_under_xla_with_sizes_known_when_compiling():
    x = tf.random.stateless_normal([1, 4, 5], seed=[4, 5])
    body = _writes_last(x, tf.constant([[1, 2, 3, 1]]))
    got = tf.function(lambda: pf.pfor(lambda i: body(0, i), 4, fallback="error"),
                      jit_compile=True)()
    testing.assert_allclose(got, tf.stack([body(0, tf.constant(i)) for i in range(4)]))


def test_gradients_through_a_loop_of_per_iteration_maximum_iterations():
    """The loop's accumulators are EmptyTensorLists capped at each iteration's own
    maximum_iterations: one list under the largest cap."""
    x = _x(4, 3, seed=6)
    w = tf.Variable(np.eye(3, dtype=np.float32) * 0.5)
    caps = tf.constant([1, 3, 0, 2])

    def body(i):
        xi = tf.gather(x, i)
        with tf.GradientTape() as tape:
            _, h = tf.while_loop(
                lambda k, h: k < 10,
                lambda k, h: (k + 1, tf.tanh(tf.linalg.matvec(w, h) + xi)),
                (0, xi), maximum_iterations=tf.gather(caps, i))
            loss = tf.reduce_sum(h ** 2)
        return tape.gradient(loss, w, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    got = testing.assert_matches_loop(body, 4, graph=True, rtol=1e-5, atol=1e-6)
    assert got.shape == (4, 3, 3)
    assert float(tf.reduce_max(tf.abs(got[2]))) == 0.0  # no step: no gradient


# -- items that differ in shape between iterations (per_row_items.py) ---------------------
def _graph_loop(body, n):
    """The loop in a graph: an eager TensorArray of items of unknown shape cannot
    concat or stack them."""
    return tf.function(lambda: [body(tf.constant(j)) for j in range(n)])()


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_drawn_ragged_items_at_drawn_positions(data):
    n = data.draw(st.integers(1, 4), label="n")
    sizes = data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n), label="sizes")
    lengths = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n), label="lengths")
    positions = [data.draw(st.integers(0, s - 1), label="position") for s in sizes]
    stacked_position = data.draw(st.booleans(), label="stacked position")
    x = _x(n, 6, seed=7)
    size_of, length_of, position_of = (tf.constant(v) for v in (sizes, lengths, positions))

    def body(i):
        ta = tf.TensorArray(tf.float32, size=tf.gather(size_of, i), infer_shape=False,
                            element_shape=[None], clear_after_read=False)
        where = tf.gather(position_of, i) if stacked_position else 0
        ta = ta.write(where, tf.sin(tf.gather(x, i)[:tf.gather(length_of, i)]))
        return tf.reduce_sum(ta.read(where)), ta.size(), tf.reduce_sum(ta.read(0) * 2.0)

    got = pf.pfor(body, n, fallback="error")
    testing.assert_same_results(got, tuple(tf.stack(v) for v in zip(*_graph_loop(body, n))))
    assert got[1].numpy().tolist() == sizes


def test_ragged_items_stack_and_concat_row_by_row():
    x = _x(4, 6, seed=8)
    sizes, lengths = tf.constant([1, 2, 3, 2]), tf.constant([2, 0, 3, 1])

    def body(i):
        ta = tf.TensorArray(tf.float32, size=tf.gather(sizes, i), infer_shape=False,
                            element_shape=[None])
        item = tf.gather(x, i)[:tf.gather(lengths, i)]
        for t in range(3):  # every item set (the loop's concat needs them all)
            ta = ta.write(tf.minimum(t, tf.gather(sizes, i) - 1), item * float(t + 1))
        return ta.stack(), ta.concat()

    got = pf.pfor(body, 4, fallback="error", ragged_outputs=True)
    want = _graph_loop(body, 4)
    testing.assert_rows_match(got[0], [w[0] for w in want])
    testing.assert_rows_match(got[1], [w[1] for w in want])
    assert [len(row) for row in got[0].to_list()] == [1, 2, 3, 2]
    assert got[1].row_lengths().numpy().tolist() == [2, 0, 9, 2]


@pytest.mark.parametrize("all_set", [True, False])
def test_a_concat_of_plain_items_of_per_iteration_numbers_is_ragged(all_set):
    x = _x(4, 6, seed=8)
    sizes = [1, 3, 0, 2] if all_set else [1, 3, 1, 2]
    size_of = tf.constant(sizes)

    def body(i):
        size = tf.gather(size_of, i)
        ta = tf.TensorArray(tf.float32, size=size, element_shape=[2])
        if all_set:
            ta = ta.unstack(tf.reshape(tf.gather(x, i), [3, 2])[:size])
        else:  # the others unset: zeros, as the loop reads them
            ta = ta.write(0, tf.gather(x, i)[:2])
        return ta.concat()

    got = pf.pfor(body, 4, fallback="error", ragged_outputs=True)
    graph = tf.function(lambda k: pf.pfor(body, k, fallback="error", ragged_outputs=True))(
        tf.constant(4))
    for value in (got, graph):  # (the eager loop's concat of an empty array fails)
        testing.assert_rows_match(value, _graph_loop(body, 4))
    assert got.row_lengths().numpy().tolist() == [2 * s for s in sizes]


def test_gradients_through_ragged_items_at_per_iteration_positions():
    x = _x(4, 6, seed=9)

    def body(i):
        xi = tf.gather(x, i)
        with tf.GradientTape() as tape:
            tape.watch(xi)
            ta = tf.TensorArray(tf.float32, size=i + 2, infer_shape=False,
                                element_shape=[None], clear_after_read=False)
            ta = ta.write(i + 1, tf.sin(xi[:i + 1])).write(0, xi[:2])
            loss = tf.reduce_sum(ta.read(i + 1) ** 2) + tf.reduce_sum(tf.sin(ta.read(0)))
        return tape.gradient(loss, xi)

    got = pf.pfor(body, 4, fallback="error")
    testing.assert_allclose(got, tf.stack(_graph_loop(body, 4)), rtol=1e-5, atol=1e-6)
    assert got.shape == (4, 6)


@pytest.mark.parametrize("stacked_position", [True, False])
def test_ragged_items_past_an_iterations_end_fail_like_the_loop(stacked_position):
    x = _x(3, 6, seed=10)
    sizes = tf.constant([2, 1, 3])

    def body(i):
        ta = tf.TensorArray(tf.float32, size=tf.gather(sizes, i), infer_shape=False,
                            element_shape=[None])
        where = i if stacked_position else 1  # row 1 holds one item
        return tf.reduce_sum(ta.write(where, tf.gather(x, i)[:i + 1]).stack())

    with pytest.raises(tf.errors.InvalidArgumentError, match="writes a tensor list item past"):
        pf.pfor(body, 3, fallback="error")
    with pytest.raises(tf.errors.InvalidArgumentError):
        _graph_loop(body, 3)


def test_stack_of_ragged_items_a_loop_of_per_iteration_steps_wrote():
    x = _x(4, 6, seed=11)
    steps, lengths = tf.constant([2, 1, 3, 1]), tf.constant([3, 2, 0, 6])  # (no empty list:
    # the loop cannot stack one of unknown element shape)

    def body(i):
        def step(t, ta):
            item = tf.gather(x, i)[:tf.gather(lengths, i)]
            return t + 1, ta.write(t, item * tf.cast(t + 1, tf.float32))

        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False,
                            element_shape=[None])
        _, ta = tf.while_loop(lambda t, ta: t < tf.gather(steps, i), step, (0, ta))
        return ta.stack()

    got = pf.pfor(body, 4, fallback="error", ragged_outputs=True)
    want = _graph_loop(body, 4)
    testing.assert_rows_match(got, want)
    assert [len(row) for row in got.to_list()] == [2, 1, 3, 1]
