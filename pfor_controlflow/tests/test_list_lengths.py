"""Tensor lists (tf.TensorArray) carried by a while loop with per-iteration trip counts:
a body that reads a variable (its output identities then carry control dependencies),
arrays of dynamic size and of an element shape unknown at trace time, and what is read
of them after the loop, where every iteration's array holds its own number of items.
All against the loop, with no fallback; what pfor cannot give is a clear error."""

import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing

TRIPS = tf.constant([2, 1, 3, 1, 4, 0])


def _data(shape, seed=0):
    return tf.random.stateless_normal(shape, seed=[seed, 11])


def _grown(i, x, w, *, element_shape=None, start=0, trips=TRIPS):
    """A TensorArray of dynamic size written once per step of a loop that runs
    ``trips[i]`` steps, the body reading the variable ``w``."""
    xi, steps = tf.gather(x, i), tf.gather(trips, i)
    ta = tf.TensorArray(tf.float32, size=start, dynamic_size=True,
                        element_shape=element_shape, clear_after_read=False)
    for t in range(start):
        ta = ta.write(t, xi * 0.0)

    def step(t, h, ta):
        h = tf.tanh(tf.linalg.matvec(w, h) + xi)
        return t + 1, h, ta.write(t + start, h)

    _, h, ta = tf.while_loop(lambda t, *_: t < steps, step, (0, xi, ta))
    return h, ta


@settings(max_examples=10)
@given(n=st.integers(0, 6), start=st.integers(0, 2), known=st.booleans(),
       graph=st.booleans())
def test_arrays_grown_to_per_iteration_lengths(n, start, known, graph):
    x = _data([max(n, 1), 3])
    w = tf.Variable(_data([3, 3], 1) * 0.5)

    def body(i):
        h, ta = _grown(i, x, w, element_shape=[3] if known else None, start=start)
        size = ta.size()
        out = {"h": h, "size": size, "twice": size * 2}
        if start:  # items every iteration has
            out.update(first=ta.read(0), pair=ta.gather([0, start - 1]),
                       last=ta.read(size - 1))
        return out

    testing.assert_matches_loop(body, n, graph=graph)


def test_a_list_of_per_iteration_lengths_inside_an_outer_pfor():
    """Inside an outer pfor the inner loop runs masked, which tracks each row's length."""
    x = _data([2, 6, 3])
    trips = tf.constant([[2, 1, 3, 1, 4, 1], [1, 2, 2, 1, 3, 5]])
    w = tf.Variable(_data([3, 3], 1) * 0.5)

    def outer(j):
        def inner(i):
            _, ta = _grown(i, tf.gather(x, j), w, trips=tf.gather(trips, j))
            return ta.size(), ta.read(0)
        return pf.pfor(inner, 6, fallback="error")

    testing.assert_matches_loop(outer, 2, graph=True)


def test_stacking_arrays_of_per_iteration_lengths_is_ragged():
    """Each iteration stacks its own number of items: a ragged value, whose mean counts
    each row's own items (not the zero padding)."""
    x = _data([6, 3])
    w = tf.Variable(_data([3, 3], 1) * 0.5)

    def body(i):
        return tf.reduce_mean(_grown(i, x, w)[1].stack(), 0)

    got = testing.assert_matches_loop(body, 5, graph=True)  # row 5 would be a NaN mean
    assert got.shape == (5, 3)
    stacked = pf.pfor(lambda i: _grown(i, x, w)[1].stack(), 6, fallback="error",
                      ragged_outputs=True)
    assert stacked.row_lengths().numpy().tolist() == TRIPS.numpy().tolist()


def test_stacking_arrays_grown_alike_in_every_iteration():
    x = _data([6, 3])
    w = tf.Variable(_data([3, 3], 1) * 0.5)
    same = tf.fill([6], 3)

    def body(i):
        return _grown(i, x, w, trips=same)[1].stack()

    testing.assert_matches_loop(body, 6, graph=True)


def test_reading_past_an_iterations_end_raises_as_the_loop_does():
    x = _data([6, 3])
    w = tf.Variable(_data([3, 3], 1) * 0.5)

    def body(i):
        return _grown(i, x, w)[1].read(1)  # iterations 1, 3 and 5 have fewer items

    with pytest.raises((tf.errors.InvalidArgumentError, tf.errors.OutOfRangeError)):
        testing.sequential(body, 6)
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match="past the end"):
        pf.pfor(body, 6, fallback="error")
