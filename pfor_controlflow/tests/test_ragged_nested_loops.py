"""While loops with per-iteration trip counts that keep items whose shape differs
between steps (a gradient's accumulators of a ``tf.boolean_mask`` in the loop), inside
an outer pfor (issue 15, section 4, nested): the inner pfor runs such a loop masked,
and the outer pfor runs that masked loop masked too, its lists as long as the longest
of its iterations' (trip_counts.run_masked). Against a sequential double loop, with
no fallback (``fallback="error"``)."""

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core.testing import assert_allclose

# 3 examples of 4 rows of 6. Example 0 row 1 has no positive value: its loop runs no
# step. Example 1 row 2 has positives but none above the first step's threshold: its
# masks keep nothing. Example 2 row 0 has all six positive (the longest loop).
X = np.random.RandomState(7).normal(size=(3, 4, 6)).astype(np.float32)
X[0, 1] = -np.abs(X[0, 1])
X[1, 2] = np.array([0.1, -1.0, 0.2, -0.5, 0.3, -2.0], np.float32)
X[2, 0] = np.abs(X[2, 0]) + 0.05
X = tf.constant(X)
W = tf.constant(np.random.RandomState(8).uniform(0.5, 1.5, size=(3, 6)).astype(np.float32))
THRESHOLD = 0.4


def _loss(xi, w):
    """A loop of one step per positive value of ``xi``; step t sums the squares of the
    values above a threshold rising with t (a boolean_mask: ragged between steps)."""
    steps = tf.reduce_sum(tf.cast(xi > 0, tf.int32))

    def body(t, acc):
        kept = tf.boolean_mask(xi * w, xi > THRESHOLD + tf.cast(t, tf.float32) * 0.3)
        return t + 1, acc + tf.reduce_sum(kept ** 2)

    return tf.while_loop(lambda t, acc: t < steps, body, (0, 0.))[1]


def _gradient(v, w):
    return tf.gradients(_loss(v, w), v)[0]


def _double_loop(fn, stacked_w):
    """``fn(x[i, j], w)`` for every example i and row j, in Python loops."""
    def run():
        return tf.stack([tf.stack([fn(tf.identity(X[i, j]), W[i] if stacked_w else W[0])
                                   for j in range(X.shape[1])])
                         for i in range(X.shape[0])])
    return tf.function(run, autograph=False)()


def test_the_data_has_rows_of_no_step_and_rows_of_empty_masks():
    steps = tf.reduce_sum(tf.cast(X > 0, tf.int32), -1).numpy()
    assert steps[0, 1] == 0 and steps[2, 0] == 6
    assert steps[1, 2] > 0 and not np.any(X[1, 2].numpy() > THRESHOLD)


def test_per_example_gradients_inside_an_outer_pfor():
    """The reproducer: per-example gradients (an inner pfor) of each example of a batch
    (the outer pfor), in a tf.function; the loop reads a weight given per example
    (stacked in the outer pfor) and one captured once (invariant in both)."""
    scale = tf.constant(np.linspace(0.5, 1.5, 6).astype(np.float32))

    def gradient(v, w):
        return _gradient(v, w * scale)

    def per_example(xb, w):
        return pf.vectorized_map(lambda v: gradient(v, w), xb, fallback="error")

    run = tf.function(lambda x, w: pf.vectorized_map(lambda a: per_example(*a), (x, w),
                                                     fallback="error"))
    got = run(X, W)
    assert got.shape == (3, 4, 6)
    assert_allclose(got, _double_loop(gradient, True))
    # The rows of no step have no gradient; the others do.
    assert np.all(got[0, 1].numpy() == 0) and np.all(np.any(got[2].numpy() != 0, -1))


def test_per_example_jacobians_inside_an_outer_pfor():
    """pf.jacobian in the outer pfor's body: its gradient loop pops the accumulators
    of a forward loop whose trip count differs per example."""
    scale = tf.constant([1., -2., 0.5])

    def vector(v):
        return _loss(v, W[0]) * scale

    got = pf.vectorized_map(lambda xb: pf.jacobian(vector, xb[1]), X, fallback="error")
    assert got.shape == (3, 3, 6)

    def rows(v, w):
        del w
        return tf.stack([tf.gradients(vector(v)[k], v)[0] for k in range(3)])

    expected = _double_loop(rows, False)[:, 1]
    assert_allclose(got, expected)


def test_per_example_gradients_of_fixed_size_items_inside_an_outer_pfor():
    """Accumulators of one shape in every step (``tf.where`` for the boolean_mask): the
    outer pfor reads the masked loop's lists as plain lists too."""
    def loss(xi, w):
        steps = tf.reduce_sum(tf.cast(xi > 0, tf.int32))

        def body(t, acc):
            kept = tf.where(xi > THRESHOLD + tf.cast(t, tf.float32) * 0.3, xi * w, 0.)
            return t + 1, acc + tf.reduce_sum(kept ** 2)

        return tf.while_loop(lambda t, acc: t < steps, body, (0, 0.))[1]

    def gradient(v, w):
        return tf.gradients(loss(v, w), v)[0]

    got = pf.vectorized_map(lambda xb: pf.vectorized_map(
        lambda v: gradient(v, W[0]), xb, fallback="error"), X, fallback="error")
    assert got.shape == (3, 4, 6)
    assert_allclose(got, _double_loop(gradient, False))


def test_under_xla_a_clear_error_names_the_op():
    """The body does not compile even as a plain loop under XLA (a boolean_mask, a
    list of no static item size): a ConversionError saying so, not a TensorFlow one."""
    run = tf.function(lambda x: pf.vectorized_map(lambda v: _gradient(v, W[0]), x,
                                                  fallback="error"), jit_compile=True)
    with pytest.raises(pf.ConversionError, match=r"op Where 'while/boolean_mask/Where'.*"
                       r"the number of true elements has no static bound under XLA"):
        run(X[0])



def _grown(trip, push):
    """Per row of an inner pfor, a list grown by one item a step for ``trip`` steps
    (a TensorArray written at the step, or a tensor list pushed to), read whole."""
    def inner(v):
        steps = trip + tf.cast(tf.reduce_sum(v) * 0, tf.int32)  # per row, alike
        if push:
            items = tf.raw_ops.EmptyTensorList(element_shape=[4], max_num_elements=-1,
                                               element_dtype=tf.float32)
            _, items = tf.while_loop(lambda t, a: t < steps, lambda t, a: (
                t + 1, tf.raw_ops.TensorListPushBack(
                    input_handle=a, tensor=v * tf.cast(t + 1, tf.float32))), (0, items))
            whole = tf.raw_ops.TensorListStack(input_handle=items, element_shape=[4],
                                               element_dtype=tf.float32)
        else:
            array = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            _, array = tf.while_loop(
                lambda t, a: t < steps,
                lambda t, a: (t + 1, a.write(t, v * tf.cast(t + 1, tf.float32))), (0, array))
            whole = array.stack()
        return tf.reduce_mean(whole, 0)
    return inner


@pytest.mark.parametrize("push", [False, True])
def test_a_whole_read_after_steps_that_differ_per_outer_iteration(push):
    """The outer pfor keeps the inner loop's list as long as its longest iteration's:
    a stack reads each row's own items (ragged), as the loop does; pushed items sit at
    the end of each row's list and are moved to the start first."""
    x, trips = X[:2, :3, :4], tf.constant([2, 4])
    got = pf.vectorized_map(lambda a: pf.vectorized_map(_grown(a[1], push), a[0],
                                                        fallback="error"),
                            (x, trips), fallback="error")
    expected = tf.stack([tf.stack([tf.reduce_mean(tf.stack(
        [x[i, j] * float(t + 1) for t in range(int(trips[i]))]), 0) for j in range(3)])
        for i in range(2)])
    assert got.shape == (2, 3, 4)
    assert_allclose(got, expected)
