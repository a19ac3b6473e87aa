"""Tensor lists of ragged items in while loops whose trip count differs per iteration,
and their concat and its gradient (issue 15, section 4: a body that runs as a Python
loop runs under pfor): against the sequential loop with no fallback
(``fallback="error"``; eagerly, in a ``tf.function`` with a run-time loop length, and
in chunks)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import tensorflow as tf

import pfor_core as pf
from pfor_core.testing import assert_fails_like_loop
from pfor_core import testing

X = tf.constant(np.random.RandomState(1).normal(size=(4, 5, 6)), tf.float32)
# Steps per iteration. TensorArray.concat of no items fails in the loop (eagerly), so
# bodies that concat run at least one step; the others also run none.
STEPS = tf.constant([3, 1, 2, 4])
STEPS_0 = tf.constant([3, 0, 2, 4])


def _write_kept(x, steps, shape=None, fn=lambda v: v):
    """A TensorArray of the values > 0 of ``x[i][t]`` for ``t < steps[i]``."""
    def build(i, xi):
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False,
                            element_shape=shape)

        def step(t, ta):
            row = xi[t]
            return t + 1, ta.write(t, fn(tf.boolean_mask(row, row > 0)))

        return tf.while_loop(lambda t, ta: t < tf.gather(steps, i), step, (0, ta))
    return build


@pytest.mark.parametrize("steps", [STEPS, tf.constant([2, 2, 2, 2])])
def test_concat_of_ragged_items_written_for_per_iteration_steps(steps, case_modes):
    """The issue's reproducer; also with the same steps everywhere (still a
    per-iteration condition)."""
    def body(i):
        _, ta = _write_kept(X, steps)(i, tf.gather(X, i))
        return tf.reduce_sum(ta.concat())

    testing.assert_matches_loop(body, 4, modes=case_modes)


def test_concat_of_ragged_items_as_a_ragged_result():
    def body(i):
        _, ta = _write_kept(X, STEPS, [None], tf.exp)(i, tf.gather(X, i))
        return ta.concat()

    testing.assert_matches_loop(body, 4, ragged=True, modes=testing.RUN_MODES)


def test_ragged_items_read_in_the_loop_and_sizes_after_it():
    """Rows that run no step (0 items), an item read back in its step, the array's
    size after the loop (each row's own)."""
    def body(i):
        xi = tf.gather(X, i)
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False,
                            element_shape=[None])

        def step(t, ta, total):
            ta = ta.write(t, tf.boolean_mask(xi[t], xi[t] > 0.3))
            return t + 1, ta, total + tf.reduce_sum(tf.sin(ta.read(t))) + tf.cast(
                ta.size(), tf.float32)

        _, ta, total = tf.while_loop(lambda t, *_: t < tf.gather(STEPS_0, i), step,
                                     (0, ta, 0.))
        return tf.stack([total, tf.cast(ta.size(), tf.float32)])

    testing.assert_matches_loop(body, 4, modes=testing.RUN_MODES)


def test_an_item_past_an_iterations_steps_fails_like_the_loop():
    def body(i):
        _, ta = _write_kept(X, STEPS, [None])(i, tf.gather(X, i))
        return tf.reduce_sum(ta.read(1))  # iteration 1 wrote one item

    assert_fails_like_loop(body, 4, match="past the end",
                           error=(tf.errors.OutOfRangeError, tf.errors.InvalidArgumentError))


@pytest.mark.parametrize("steps,shape", [(STEPS, [None]), (tf.constant(4), [None]),
                                         (STEPS, None)])
def test_gradient_through_a_concat_of_ragged_items(steps, shape, case_modes):
    """The issue's reproducer under a GradientTape: the loop pushes each step's ragged
    item for its gradient, which pops them row by row and reads the concat's gradient
    at each row's own step; also with an invariant trip count, and with no element
    shape (the concat's rank is then unknown: the sum's gradient reshapes its
    invariant incoming gradient to a shape computed from each row's concat)."""
    per = steps.shape.rank == 1

    def body(i):
        xi = tf.gather(X, i)
        with tf.GradientTape() as tape:
            tape.watch(xi)
            build = _write_kept(X, steps if per else tf.fill([4], steps), shape, tf.sin)
            _, ta = build(i, xi)
            loss = tf.reduce_sum(ta.concat() ** 2)
        return tape.gradient(loss, xi)

    got = testing.assert_matches_loop(body, 4, modes=case_modes)
    assert got.shape == [4, 5, 6]


def test_a_stack_of_a_per_iteration_loops_items_of_different_sizes_fails_like_the_loop():
    """Each row stacks its own items (per_row_items.py); items of different sizes
    within a row do not stack, in the loop either."""
    def body(i):
        _, ta = _write_kept(X, STEPS, [None])(i, tf.gather(X, i))
        return tf.reduce_sum(ta.stack())

    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.function(lambda: [body(tf.constant(j)) for j in range(4)])()
    with pytest.raises(tf.errors.InvalidArgumentError, match="do not stack"):
        pf.pfor(body, 4, fallback="error")


# -- ragged values in a conditional in a loop step, with gradients ---------------------------
def _cond_gradient(predicate, n=4):
    x = X[:n, :3]

    def body(i):
        xi = tf.gather(x, i)
        with tf.GradientTape() as tape:
            tape.watch(xi)

            def step(t, total):
                v = tf.cond(predicate(xi, t),
                            lambda: tf.reduce_sum(tf.sin(tf.boolean_mask(xi[t], xi[t] > 0))),
                            lambda: tf.reduce_sum(xi[t] ** 2))
                return t + 1, total + v

            _, total = tf.while_loop(lambda t, _: t < 3, step, (0, 0.))
        return tape.gradient(total, xi)
    return body


@pytest.mark.parametrize("predicate", [
    pytest.param(lambda xi, t: t > 0, id="invariant"),
    pytest.param(lambda xi, t: xi[t, 0] > 0, id="per-iteration"),
])
def test_gradient_through_a_conditional_with_a_ragged_intermediate(predicate, case_modes):
    """The branch's intermediates (a boolean_mask) leave it in an optional for the
    gradient: padded, with their per-iteration shapes."""
    testing.assert_matches_loop(_cond_gradient(predicate), 4, modes=case_modes)


@pytest.mark.parametrize("invariant", [False, True])
def test_ragged_intermediates_of_a_conditional_outside_a_loop(invariant, case_modes):
    x = X[:, 0]

    def body(i):
        xi = tf.gather(x, i)
        with tf.GradientTape() as tape:
            tape.watch(xi)
            loss = tf.cond(x[0, 0] > 0 if invariant else xi[0] > 0,
                           lambda: tf.reduce_sum(tf.exp(tf.boolean_mask(xi, xi > -0.5)) ** 2),
                           lambda: tf.reduce_sum(tf.sin(xi[:2])))
        return tape.gradient(loss, xi)

    testing.assert_matches_loop(body, 4, modes=case_modes)


@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_drawn_steps_and_lengths_through_a_per_iteration_loop_and_its_gradient(data):
    """Drawn steps per iteration (1 to 4: the concat of no items fails in the loop) and
    prefix lengths (0 included) of the items a loop with per-iteration trip counts
    writes, their concat and size after it, and the gradient through them."""
    n = data.draw(st.integers(1, 4), label="n")
    steps = tf.constant(data.draw(testing.lengths_strategy(n, 3), label="steps")) + 1
    lengths = tf.constant(data.draw(testing.lengths_strategy(n, 6), label="lengths"))

    def body(i):
        xi, m = tf.gather(X, i), tf.gather(lengths, i)
        with tf.GradientTape() as tape:
            tape.watch(xi)
            ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False,
                                element_shape=[None])

            def step(t, ta):
                return t + 1, ta.write(t, tf.sin(xi[t][:m + t - 1]))

            _, ta = tf.while_loop(lambda t, _: t < tf.gather(steps, i), step, (0, ta))
            total = tf.reduce_sum(ta.concat() ** 2)
        grad = tape.gradient(total, xi, unconnected_gradients="zero")
        return tf.concat([grad[0], [tf.cast(ta.size(), tf.float32), total]], 0)

    testing.assert_matches_loop(body, n, modes=testing.draw_modes(data))


# -- read after write in a loop with per-iteration trip counts, with its gradient ---------
@pytest.mark.parametrize("ragged", [False, True])
@pytest.mark.parametrize("steps", [STEPS, STEPS_0])
def test_gradient_of_a_read_after_a_write_for_per_iteration_steps(ragged, steps, case_modes):
    """The read's gradient makes, in each step of the gradient loop, a list as long as
    that row's list was at that step (each row its own length), writes the item's
    gradient into it and adds it to the list's gradient: a list whose rows hold their
    own numbers of items, by index."""
    def body(i):
        xi = tf.gather(X, i)
        with tf.GradientTape() as tape:
            tape.watch(xi)
            ta = (tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False,
                                 element_shape=[None]) if ragged else
                  tf.TensorArray(tf.float32, size=0, dynamic_size=True))

            def step(t, ta, total):
                v = tf.sin(xi[t])
                ta = ta.write(t, tf.boolean_mask(v, v > 0) if ragged else v)
                return t + 1, ta, total + tf.reduce_sum(ta.read(t) ** 2)

            _, ta, total = tf.while_loop(lambda t, *_: t < tf.gather(steps, i), step,
                                         (0, ta, 0.))
        return tape.gradient(total, xi, unconnected_gradients="zero")

    got = testing.assert_matches_loop(body, 4, modes=case_modes)
    assert got.shape == [4, 5, 6]
