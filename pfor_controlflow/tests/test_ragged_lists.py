"""Tensor lists whose items differ in shape between iterations (issue 15, sections 4
and 5): loops in the body that write or push a ragged value per step (a TensorArray, a
while loop's gradient accumulators, ``tf.map_fn``), and their gradients, against the
sequential loop with no fallback (``fallback="error"``; eagerly, in a ``tf.function``
with a run-time loop length, and in chunks)."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorflow.python.ops import list_ops

import pfor_core as pf
from pfor_core.testing import assert_fails_like_loop
from pfor_core import testing

STEPS = 3
# Per-iteration lengths, 0 among them, and a batch whose masks keep 0..5 values a row.
LENGTHS = [[2, 0, 5, 3], [0, 0, 0, 0], [4, 1]]
X = tf.constant(np.random.RandomState(0).normal(size=(4, STEPS, 5)), tf.float32)
X = tf.tensor_scatter_nd_update(X, [[1]], -tf.abs(X[1:2]))  # iteration 1: empty masks


def _x(n):
    return X[:n]


@pytest.mark.parametrize("n", [4, 1])
def test_per_example_gradients_through_map_fn_with_a_ragged_output(n, case_modes):
    """The issue's reproducer: map_fn over rows whose step keeps a per-row number of
    values, and the gradient of a loss over them."""
    x = _x(n)

    def body(i):
        xi = tf.gather(x, i)
        with tf.GradientTape() as tape:
            tape.watch(xi)
            r = tf.map_fn(lambda v: tf.boolean_mask(v, v > 0) ** 2, xi,
                          fn_output_signature=tf.RaggedTensorSpec([None], tf.float32))
            loss = tf.reduce_sum(r.flat_values)
        return tape.gradient(loss, xi)

    testing.assert_matches_loop(body, n, modes=case_modes)


@pytest.mark.parametrize("lengths", LENGTHS)
def test_map_fn_whose_steps_give_a_per_iteration_length(lengths, case_modes):
    x, ns = _x(len(lengths)), tf.constant(lengths)

    def body(i):
        n = tf.gather(ns, i)
        return tf.map_fn(lambda v: tf.sin(v[:n]) * 2., tf.gather(x, i))

    testing.assert_matches_loop(body, len(lengths), ragged=True, modes=case_modes)


def test_map_fn_with_a_ragged_output_without_gradients():
    x = _x(4)

    def body(i):
        r = tf.map_fn(lambda v: tf.boolean_mask(v, v > 0) ** 2, tf.gather(x, i),
                      fn_output_signature=tf.RaggedTensorSpec([None], tf.float32))
        return tf.reduce_sum(r, axis=1)

    testing.assert_matches_loop(body, 4, modes=testing.RUN_MODES)


@pytest.mark.parametrize("lengths", LENGTHS)
def test_per_example_gradients_through_map_fn_of_prefixes(lengths, case_modes):
    """The gradient of a stacked TensorArray of ragged items is a list made from a
    ragged tensor (TensorListFromTensor), read back item by item."""
    x, ns = _x(len(lengths)), tf.constant(lengths)

    def body(i):
        xi, n = tf.gather(x, i), tf.gather(ns, i)
        with tf.GradientTape() as tape:
            tape.watch(xi)
            r = tf.map_fn(lambda v: tf.sin(v[:n]) * 2., xi)
            loss = tf.reduce_sum(r * r)
        return tape.gradient(loss, xi)

    testing.assert_matches_loop(body, len(lengths), modes=case_modes)


def test_while_loop_writes_ragged_items_and_reads_them_back():
    x = _x(4)

    def body(i):
        xi = tf.gather(x, i)

        def step(t, ta):
            return t + 1, ta.write(t, tf.boolean_mask(xi[t], xi[t] > 0))

        array = tf.TensorArray(tf.float32, size=STEPS, infer_shape=False, element_shape=[None])
        _, array = tf.while_loop(lambda t, _: t < STEPS, step, (0, array))
        return tf.stack([tf.reduce_sum(tf.exp(array.read(t))) for t in range(STEPS)]
                        + [tf.cast(array.size(), tf.float32)])

    testing.assert_matches_loop(body, 4, modes=testing.RUN_MODES)


@pytest.mark.parametrize("lengths", LENGTHS)
def test_a_growing_tensor_array_of_ragged_items_stacks(lengths, case_modes):
    """Every iteration's items have one shape (its own): the stacked array is ragged."""
    x, ns = _x(len(lengths)), tf.constant(lengths)

    def body(i):
        xi, n = tf.gather(x, i), tf.gather(ns, i)

        def step(t, ta):
            return t + 1, ta.write(t, xi[t][:n] + 1.)

        array = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False,
                               element_shape=[None])
        _, array = tf.while_loop(lambda t, _: t < STEPS, step, (0, array))
        return array.stack()

    testing.assert_matches_loop(body, len(lengths), ragged=True, modes=case_modes)


def test_stacking_items_of_different_shapes_fails_like_the_loop():
    ns = tf.constant([1, 2, 3])
    x = tf.ones([3, 4])

    def body(i):
        row, n = tf.gather(x, i), tf.gather(ns, i)

        def step(t, ta):  # iteration 0 writes one item of n values, the others 2 of n
            return t + 1, ta.write(t, row[:n + t * tf.minimum(i, 1)])

        array = tf.TensorArray(tf.float32, size=2, infer_shape=False, element_shape=[None])
        _, array = tf.while_loop(lambda t, _: t < 2, step, (0, array))
        return tf.reduce_sum(array.stack())

    assert_fails_like_loop(body, 3, match="items of different sizes")


def test_dense_and_ragged_items_in_one_list():
    """Dense items written before and after a loop's ragged ones, pushed and popped."""
    x, ns = _x(4), tf.constant([2, 0, 5, 3])

    def body(i):
        xi, n = tf.gather(x, i), tf.gather(ns, i)

        def step(t, ta):
            return t + 1, ta.write(t, xi[t][:n])

        array = tf.TensorArray(tf.float32, size=STEPS + 1, infer_shape=False,
                               element_shape=[None])
        _, array = tf.while_loop(lambda t, _: t < STEPS, step, (0, array))
        array = array.write(STEPS, xi[0] * 2.)  # a dense item into the list of ragged ones
        items = list_ops.empty_tensor_list(element_shape=[None], element_dtype=tf.float32)
        items = list_ops.tensor_list_push_back(items, xi[1][:n])
        items = list_ops.tensor_list_push_back(items, xi[2])  # dense onto ragged
        count = list_ops.tensor_list_length(items)
        items, last = list_ops.tensor_list_pop_back(items, tf.float32)
        items, first = list_ops.tensor_list_pop_back(items, tf.float32)
        return tf.stack([tf.reduce_sum(array.read(t)) for t in range(STEPS + 1)]
                        + [tf.reduce_sum(last), tf.reduce_sum(first ** 2),
                           tf.cast(count, tf.float32)])

    testing.assert_matches_loop(body, 4, modes=testing.RUN_MODES)


def _while_gradient(make_step):
    def body(i):
        xi = tf.gather(X, i)
        with tf.GradientTape() as tape:
            tape.watch(xi)
            _, total = tf.while_loop(lambda t, _: t < STEPS, make_step(i, xi), (0, 0.))
        return tape.gradient(total, xi)
    return body


def test_gradient_through_a_while_loop_of_boolean_masks():
    def make_step(i, xi):
        def step(t, total):
            kept = tf.boolean_mask(xi[t], xi[t] > 0)
            return t + 1, total + tf.reduce_sum(tf.sin(kept) * kept)
        return step

    testing.assert_matches_loop(_while_gradient(make_step), 4, modes=testing.RUN_MODES)


@pytest.mark.parametrize("lengths", LENGTHS[:2])
def test_gradient_through_a_while_loop_of_prefixes(lengths, case_modes):
    ns = tf.constant(lengths)

    def make_step(i, xi):
        def step(t, total):
            prefix = tf.reshape(xi, [STEPS, 5, 1])[:, :tf.gather(ns, i)]  # rank 2, ragged
            scale = tf.cast(t + 1, tf.float32)
            return t + 1, total + tf.reduce_sum(tf.exp(prefix * scale))
        return step

    testing.assert_matches_loop(_while_gradient(make_step), len(lengths), modes=case_modes)


def test_ragged_items_written_in_a_conditional():
    """A branch writes a ragged item, the other a dense one: the list leaves the
    conditional with its items' shapes (sizes and minima read them)."""
    x = _x(4)

    def body(i):
        xi = tf.gather(x, i)

        def step(t, ta):
            ta = tf.cond(t > 0, lambda: ta.write(t, tf.boolean_mask(xi[t], xi[t] > 0)),
                         lambda: ta.write(t, xi[t][:2]))
            return t + 1, ta

        array = tf.TensorArray(tf.float32, size=STEPS, infer_shape=False, element_shape=[None])
        _, array = tf.while_loop(lambda t, _: t < STEPS, step, (0, array))
        items = [array.read(t) for t in range(STEPS)]
        return tf.stack([tf.cast(tf.size(r), tf.float32) + tf.reduce_min(
            tf.concat([r - 3., [0.]], 0)) for r in items])

    testing.assert_matches_loop(body, 4, modes=testing.RUN_MODES)


def test_gradient_through_reads_of_a_tensor_array_of_ragged_items():
    """Each read's gradient is a list of one item; the lists add up (AddN)."""
    x = _x(4)

    def body(i):
        xi = tf.gather(x, i)
        with tf.GradientTape() as tape:
            tape.watch(xi)

            def step(t, ta):
                return t + 1, ta.write(t, tf.sin(tf.boolean_mask(xi[t], xi[t] > 0)))

            array = tf.TensorArray(tf.float32, size=STEPS, infer_shape=False,
                                   element_shape=[None])
            _, array = tf.while_loop(lambda t, _: t < STEPS, step, (0, array))
            loss = tf.add_n([tf.reduce_sum(array.read(t) ** 2) for t in range(STEPS)])
        return tape.gradient(loss, xi)

    testing.assert_matches_loop(body, 4, modes=testing.RUN_MODES)


@pytest.mark.parametrize("lengths", LENGTHS)
def test_gradient_through_a_stacked_growing_tensor_array(lengths, case_modes):
    x, ns = _x(len(lengths)), tf.constant(lengths)

    def body(i):
        xi, n = tf.gather(x, i), tf.gather(ns, i)
        with tf.GradientTape() as tape:
            tape.watch(xi)

            def step(t, ta):
                return t + 1, ta.write(t, tf.sin(xi[t][:n]))

            array = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False,
                                   element_shape=[None])
            _, array = tf.while_loop(lambda t, _: t < STEPS, step, (0, array))
            loss = tf.reduce_sum(array.stack() ** 2)
        return tape.gradient(loss, xi)

    testing.assert_matches_loop(body, len(lengths), modes=case_modes)


@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_drawn_lengths_through_a_loop_and_its_gradient(data):
    """Drawn per-iteration lengths (0 included) of the items a loop pushes, and of the
    values its gradient pops."""
    n = data.draw(st.integers(1, 4), label="n")
    lengths = tf.constant(data.draw(testing.lengths_strategy(n, 5), label="lengths"))
    x = _x(n)

    def body(i):
        xi, m = tf.gather(x, i), tf.gather(lengths, i)
        with tf.GradientTape() as tape:
            tape.watch(xi)

            def step(t, ta, total):
                prefix = xi[t][:m]
                return t + 1, ta.write(t, prefix * 2.), total + tf.reduce_sum(tf.exp(prefix))

            array = tf.TensorArray(tf.float32, size=STEPS, infer_shape=False,
                                   element_shape=[None])
            _, array, total = tf.while_loop(lambda t, *_: t < STEPS, step, (0, array, 0.))
        return tf.concat([tape.gradient(total, xi), array.stack()], 1)

    testing.assert_matches_loop(body, n, ragged=True, modes=("eager",))
