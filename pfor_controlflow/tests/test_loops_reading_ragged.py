"""A tf.while_loop whose body (or condition) reads a value made before it whose shape
differs between iterations (``tf.boolean_mask``, ``x[:n_i]``): the loop's rows read
their own rows of the ragged value, on the active subset and masked, in every mode,
with gradients, all against the sequential loop with no fallback."""

from unittest import mock

import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing
from pfor_controlflow.loops import masking


def _strategy(masked):
    """A loop with per-iteration trip counts runs masked or on the active subset."""
    return mock.patch.object(masking, "pays", lambda loop: masked)


def _weighted_sum(values, limit, in_cond):
    """sum_t (t + 1) * values[t] for t < limit, by a while loop (the condition reads the
    ragged ``values`` itself with ``in_cond``)."""
    def cond(t, acc):
        return t < (tf.shape(values)[0] if in_cond else limit)

    def step(t, acc):
        return t + 1, acc + tf.reduce_sum(values[t]) * tf.cast(t + 1, tf.float32)

    return tf.while_loop(cond, step, (0, tf.constant(0.0)))[1]


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_drawn_ragged_values_read_by_loops(data):
    n = data.draw(st.integers(1, 4), label="n")
    lengths = data.draw(testing.lengths_strategy(n, 5), label="lengths")
    per_iteration_steps = data.draw(st.booleans(), label="per-iteration steps")
    in_cond = per_iteration_steps and data.draw(st.booleans(), label="condition reads it")
    masked = data.draw(st.booleans(), label="masked")
    two_d = data.draw(st.booleans(), label="items of rank 1")
    x = tf.random.stateless_normal([n, 5, 2], seed=[n, 21])
    length_of = tf.constant(lengths)

    def body(i):
        values = testing.rows(x if two_d else x[..., 0], length_of, i)
        limit = tf.shape(values)[0] if per_iteration_steps else tf.reduce_min(length_of)
        return _weighted_sum(tf.sin(values), limit, in_cond)

    with _strategy(masked):
        testing.assert_matches_loop(body, n, modes=testing.draw_modes(data))


@pytest.mark.parametrize("masked", [False, True])
def test_a_loop_over_the_items_a_boolean_mask_keeps(masked, case_modes):
    x = tf.random.stateless_normal([5, 7], seed=[1, 22])

    def body(i):
        xi = tf.gather(x, i)
        kept = tf.boolean_mask(xi, xi > 0.3)
        return _weighted_sum(kept, tf.size(kept), in_cond=False)

    with _strategy(masked):
        testing.assert_matches_loop(body, 5, modes=case_modes)


def _gradient_example():
    """Per-example gradients through a loop over the items a boolean mask keeps
    (example 1 keeps none): the loss, its inputs and its variable."""
    x = tf.random.stateless_normal([4, 6], seed=[2, 23]) + tf.constant([[0.5], [-9.0], [0.0], [0.3]])
    w = tf.Variable(tf.random.stateless_normal([6], seed=[2, 24]))

    def loss(xi):
        h = xi * w
        kept = tf.boolean_mask(h, xi > 0.0)
        return _weighted_sum(tf.tanh(kept), tf.size(kept), in_cond=False)

    def gradient(xi):
        with tf.GradientTape() as tape:
            value = loss(xi)
        return tape.gradient(value, w, unconnected_gradients="zero")

    return x, w, loss, gradient


@pytest.mark.parametrize("masked", [False, True])
def test_per_example_gradients_through_such_a_loop(masked):
    x, w, loss, gradient = _gradient_example()
    with _strategy(masked):
        got = pf.per_example_gradients(loss, [w], x, fallback="error")[0]
    for j in range(4):
        testing.assert_allclose(got[j], gradient(x[j]), rtol=1e-5, atol=1e-6,
                                what=f"example {j}")
    assert float(tf.reduce_max(tf.abs(got))) > 0.0


def test_per_example_gradients_through_such_a_loop_in_an_outer_pfor():
    """The gradient loop carries the ragged gradient of what the mask kept: inside an
    outer pfor it runs masked, its rows that do not run reading a running row's items
    (total_ops.stand_ins), so that the accumulator and what it adds agree in shape."""
    x, _, _, gradient = _gradient_example()
    batches = tf.stack([x, tf.reverse(x, [0]) * 0.5])

    got = pf.vectorized_map(lambda xb: pf.vectorized_map(gradient, xb, fallback="error"),
                            batches, fallback="error")
    for b in range(2):
        for j in range(4):
            testing.assert_allclose(got[b, j], gradient(batches[b, j]), rtol=1e-5,
                                    atol=1e-6, what=f"batch {b}, example {j}")
    assert float(tf.reduce_max(tf.abs(got))) > 0.0


def test_in_an_outer_pfor():
    x = tf.random.stateless_normal([2, 3, 5], seed=[3, 25])
    lengths = tf.constant([[2, 0, 5], [3, 1, 4]])

    def inner_for(i):
        def inner(j):
            values = tf.gather(x, i)[j][:tf.gather(tf.gather(lengths, i), j)]
            return _weighted_sum(values, tf.size(values), in_cond=False)
        return pf.pfor(inner, 3, fallback="error")

    got = pf.pfor(inner_for, 2, fallback="error")
    want = [[_weighted_sum(x[i, j][:lengths[i, j]], lengths[i, j], False) for j in range(3)]
            for i in range(2)]
    testing.assert_allclose(got, tf.convert_to_tensor(want), rtol=1e-5, atol=1e-6)


def _carrying_body(x, steps):
    """A loop that carries ``x[i][:i + 1]`` for ``steps[i]`` steps (XLA-ready: bounded)."""
    def body(i):
        values = tf.gather(x, i)[:i + 1]
        out = tf.while_loop(lambda t, v: t < tf.gather(steps, i),
                            lambda t, v: (t + 1, tf.sin(v) * 2.0), (0, values),
                            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None])),
                            maximum_iterations=3)[1]
        return tf.reduce_sum(out)
    return body


@pytest.mark.parametrize("masked", [False, True])
def test_a_ragged_value_carried_through_the_loop_keeping_its_shape(masked, case_modes):
    body = _carrying_body(tf.random.stateless_normal([4, 5], seed=[4, 26]),
                          tf.constant([2, 0, 3, 1]))
    with _strategy(masked):
        testing.assert_matches_loop(body, 4, modes=case_modes)


def test_a_carried_ragged_value_in_an_outer_pfor_and_under_xla():
    """Both run the loop masked: each row keeps its own lengths."""
    x, steps = tf.random.stateless_normal([4, 5], seed=[4, 26]), tf.constant([2, 0, 3, 1])
    body = _carrying_body(x, steps)
    want = tf.stack([body(tf.constant(i)) for i in range(4)])
    compiled = tf.function(lambda: pf.pfor(body, 4, fallback="error"), jit_compile=True)()
    testing.assert_allclose(compiled, want, rtol=1e-5, atol=1e-6, what="under XLA")
    scales = tf.constant([1.0, -2.0, 0.5])
    nested = pf.pfor(lambda j: pf.pfor(lambda i: body(i) * tf.gather(scales, j), 4,
                                       fallback="error"), 3, fallback="error")
    testing.assert_allclose(nested, scales[:, None] * want[None], rtol=1e-5, atol=1e-6,
                            what="in an outer pfor")


def test_under_xla_a_gradient_of_a_slice_of_sizes_known_at_run_time_fails_clearly():
    """The gradient loop's slice gradient gets each row's shape from the forward loop,
    known only at run time: XLA could not pad it, so pfor names the op."""
    x, w = tf.random.stateless_normal([3, 6], seed=[5, 28]), tf.Variable(tf.ones([6]))

    def gradient(xi):
        with tf.GradientTape() as tape:
            kept = (xi * w)[:tf.reduce_sum(tf.cast(xi > 0.0, tf.int32))]
            value = tf.while_loop(lambda t, acc: t < tf.size(kept),
                                  lambda t, acc: (t + 1, acc + kept[t]), (0, 0.0),
                                  maximum_iterations=6)[1]
        return tape.gradient(value, w)

    with pytest.raises(pf.ConversionError, match="StridedSliceGrad.*jit_compile"):
        tf.function(lambda: pf.vectorized_map(gradient, x, fallback="error"),
                    jit_compile=True)()


def test_a_ragged_value_that_changes_shape_in_the_loop_fails_clearly():
    x = tf.random.stateless_normal([3, 5], seed=[4, 27])

    def body(i):
        values = tf.gather(x, i)[:i + 1]
        out = tf.while_loop(lambda t, v: t < 2, lambda t, v: (t + 1, v[1:]), (0, values),
                            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None])))[1]
        return tf.reduce_sum(out)

    with pytest.raises((pf.ConversionError, tf.errors.InvalidArgumentError),
                       match="changes (shape|which of its dimensions)"):
        pf.pfor(body, 3, fallback="error")
