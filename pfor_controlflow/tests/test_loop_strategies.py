"""Which way a loop with per-iteration trip counts runs (masked or the active subset),
that the choice never changes an answer, and that masking never repeats effects."""

from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing
from pfor_controlflow.loops import trip_counts

TRIPS = tf.constant([3, 0, 5, 1, 2])


def _chosen(body, n=5):
    """The strategies the loops of ``pf.pfor(body, n)`` ran with; checks the result."""
    chosen = []

    def spy(name):
        run = getattr(trip_counts, name)
        return lambda *args: chosen.append(name) or run(*args)

    with mock.patch.object(trip_counts, "run_masked", spy("run_masked")), \
            mock.patch.object(trip_counts, "run_subset", spy("run_subset")):
        testing.assert_matches_loop(body, n)
    return chosen


def _loop(step, init):
    def body(i):
        x0 = tf.cast(i, tf.float32) * init
        return tf.while_loop(lambda t, x: t < tf.gather(TRIPS, i), step, (0, x0))[1]
    return body


def test_small_total_body_runs_masked():
    w = tf.constant([[0.5, 0.1], [0.2, 0.3]])
    body = _loop(lambda t, x: (t + 1, tf.tanh(tf.linalg.matvec(w, x)) + 1.0), tf.ones([2]))
    assert _chosen(body) == ["run_masked"]


def test_rows_of_more_than_a_few_numbers_run_on_the_active_subset():
    body = _loop(lambda t, x: (t + 1, x * 0.5 + 1.0), tf.ones([64]))
    assert _chosen(body) == ["run_subset"]


def test_index_past_the_end_for_finished_rows_keeps_the_active_subset():
    """A finished row's step counter equals its length: a gather at it would fail on
    the CPU, so this small body must not run masked."""
    seq = tf.reshape(tf.range(25, dtype=tf.float32), [5, 5])

    def body(i):
        row, steps = tf.gather(seq, i), tf.gather(TRIPS, i)
        return tf.while_loop(lambda t, x: t < steps,
                             lambda t, x: (t + 1, x + tf.gather(row, t)), (0, 0.0))[1]

    assert _chosen(body) == ["run_subset"]


def test_integer_division_by_zero_on_finished_rows_keeps_the_active_subset():
    def body(i):
        steps = tf.gather(TRIPS, i)
        return tf.while_loop(lambda t, x: t < steps,
                             lambda t, x: (t + 1, x + 12 // (steps - t)), (0, 0))[1]

    assert _chosen(body) == ["run_subset"]


def test_float_division_by_zero_is_total():
    def body(i):
        steps = tf.cast(tf.gather(TRIPS, i), tf.float32)
        return tf.while_loop(lambda t, x: t < steps,
                             lambda t, x: (t + 1.0, x + 12.0 / (steps - t)), (0.0, 0.0))[1]

    assert _chosen(body) == ["run_masked"]


def _counting_loop(v):
    def body(i):
        def step(t, h):
            v.assign_add(1.0)
            return t + 1, h + 1.0
        return tf.while_loop(lambda t, h: t < tf.gather(TRIPS, i), step, (0, 0.0))[1]
    return body


def test_effects_happen_once_per_step_of_each_iteration():
    v = tf.Variable(0.0)
    out = pf.pfor(_counting_loop(v), 5, fallback="error")
    np.testing.assert_array_equal(out, [3, 0, 5, 1, 2])
    assert v.numpy() == 11.0  # every iteration's steps, no finished row's extra


def test_effects_in_a_loop_that_must_run_masked_are_a_clear_error():
    v = tf.Variable(0.0)
    compiled = tf.function(lambda: pf.pfor(_counting_loop(v), 5, fallback="error"),
                           jit_compile=True)
    with pytest.raises(pf.ConversionError, match="under XLA.*AssignAddVariableOp"):
        compiled()

    def outer(j):
        return pf.pfor(lambda i: _counting_loop(v)(i) + tf.cast(j, tf.float32), 5,
                       fallback="error")

    with pytest.raises(pf.ConversionError, match="inside an outer pfor.*AssignAddVariableOp"):
        pf.pfor(outer, 2, fallback="error")
    assert v.numpy() == 0.0

