"""Conditionals whose branches give values of per-iteration shapes (issue 15, section
4): ragged branch outputs, branch outputs of different sizes, ragged inputs and the
gradient through them, with invariant and per-iteration predicates, against the
sequential loop with no fallback (``fallback="error"``)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing

RNG = np.random.RandomState(3)
X_NP = RNG.normal(size=(5, 6)).astype(np.float32)
X = tf.constant(X_NP)


def _kept_or_head(xi):
    return tf.cond(xi[0] > 0, lambda: tf.boolean_mask(xi, xi > 0), lambda: xi[:2])


def _lengths(result):
    return [len(row) for row in result.to_list()]


def test_ragged_output_of_a_per_iteration_conditional_reduced():
    """The issue's body: the branch each row takes gives a value of its own length."""
    got = testing.assert_matches_loop(lambda i: tf.reduce_sum(_kept_or_head(X[i])), 5, modes=testing.RUN_MODES)
    assert got.shape == [5]


def test_ragged_output_of_a_per_iteration_conditional_returned():
    got = testing.assert_matches_loop(lambda i: _kept_or_head(X[i]), 5, ragged=True, modes=testing.RUN_MODES)
    positive = (X_NP > 0).sum(axis=1)
    assert _lengths(got) == np.where(X_NP[:, 0] > 0, positive, 2).tolist()


@pytest.mark.parametrize("takes_ragged", [True, False])
def test_ragged_output_of_an_invariant_conditional(takes_ragged, case_modes):
    flag = tf.constant(takes_ragged)

    def body(i):
        xi = X[i]
        return tf.cond(flag, lambda: tf.exp(tf.boolean_mask(xi, xi > 0)), lambda: xi[:2])

    got = testing.assert_matches_loop(body, 5, ragged=True, modes=case_modes)
    expected = (X_NP > 0).sum(axis=1).tolist() if takes_ragged else [2] * 5
    assert _lengths(got) == expected


def test_branches_of_different_static_sizes():
    """Both branches stacked, of sizes 2 and 3: the result is ragged."""
    def body(i):
        xi = X[i]
        return tf.cond(xi[0] > 0, lambda: xi[:2] * 2., lambda: xi[:3])

    got = testing.assert_matches_loop(body, 5, ragged=True, modes=testing.RUN_MODES)
    assert _lengths(got) == np.where(X_NP[:, 0] > 0, 2, 3).tolist()


def test_switch_case_of_ragged_and_stacked_branches():
    index = tf.constant([2, 0, 1, 5, 1])  # 5 is out of range: the last branch

    def body(i):
        xi = X[i]
        return tf.switch_case(index[i], [lambda: tf.boolean_mask(xi, xi > 0),
                                         lambda: tf.sin(xi[:4]),
                                         lambda: tf.unique(tf.round(xi))[0]])

    got = testing.assert_matches_loop(body, 5, ragged=True, modes=testing.RUN_MODES)
    assert _lengths(got)[1:3] == [(X_NP[1] > 0).sum(), 4]


@pytest.mark.parametrize("per_iteration", [True, False])
def test_ragged_input_to_a_conditional(per_iteration, case_modes):
    def body(i):
        xi = X[i]
        kept = tf.boolean_mask(xi, xi > -0.5)
        pred = xi[1] > 0 if per_iteration else X[0, 0] > 0
        return tf.cond(pred, lambda: tf.reduce_sum(kept ** 2),
                       lambda: tf.reduce_max(kept))

    got = testing.assert_matches_loop(body, 5, modes=case_modes)
    assert got.shape == [5]


def test_ragged_input_passed_through_a_conditional():
    def body(i):
        xi = X[i]
        kept = tf.boolean_mask(xi, xi > 0)
        return tf.cond(xi[1] > 0, lambda: kept * 2., lambda: xi[:2])

    got = testing.assert_matches_loop(body, 5, ragged=True, modes=testing.RUN_MODES)
    assert _lengths(got) == np.where(X_NP[:, 1] > 0, (X_NP > 0).sum(axis=1), 2).tolist()


def test_gradient_through_a_ragged_output_of_a_per_iteration_conditional():
    """The gradient's conditional gets the ragged gradient of the output; a branch
    that knows its size (``xi[:2]``) reads it at that size."""
    def body(i):
        xi = X[i]
        with tf.GradientTape() as tape:
            tape.watch(xi)
            y = tf.cond(xi[0] > 0, lambda: tf.sin(tf.boolean_mask(xi, xi > 0)),
                        lambda: xi[:2] ** 2)
            loss = tf.reduce_sum(y ** 2)
        return tape.gradient(loss, xi)

    got = testing.assert_matches_loop(body, 5, modes=testing.RUN_MODES)
    assert got.shape == [5, 6]


def test_branches_of_different_sizes_inside_an_outer_pfor():
    """Masked (every branch on all rows): padded to the larger static size."""
    x = tf.reshape(tf.constant(RNG.normal(size=24), tf.float32), [4, 6])

    def inner(k):
        def body(i):
            xi = tf.gather(x, i) * tf.cast(k + 1, tf.float32)
            return tf.reduce_sum(tf.cond(xi[0] > 0, lambda: xi[:2], lambda: tf.exp(xi[:3])))
        return body

    got = pf.pfor(lambda k: pf.pfor(inner(k), 4, fallback="error"), 3, fallback="error")
    expected = [[inner(tf.constant(k))(tf.constant(i)) for i in range(4)] for k in range(3)]
    np.testing.assert_allclose(got.numpy(), np.array(expected), rtol=1e-5)


def test_per_iteration_sizes_under_xla():
    n = tf.constant([1, 4, 2, 0, 6])

    def body(i):
        xi = X[i]
        return tf.reduce_sum(tf.cond(xi[0] > 0, lambda: tf.sin(xi[:n[i]]), lambda: xi[:2]))

    got = tf.function(lambda: pf.pfor(body, 5, fallback="error"), jit_compile=True)()
    expected = [body(tf.constant(j)) for j in range(5)]
    np.testing.assert_allclose(got.numpy(), np.array(expected), rtol=1e-5, atol=1e-6)


def test_no_static_padded_size_inside_an_outer_pfor_refuses_or_loops():
    n = tf.constant([[1, 4, 2], [0, 6, 3]])

    def inner(k):
        def body(i):
            xi = X[i]
            return tf.reduce_sum(tf.cond(xi[0] > 0, lambda: xi[:n[k, i]], lambda: xi[:2]))
        return body

    with pytest.raises(pf.ConversionError, match="no static padded size"):
        pf.pfor(lambda k: pf.pfor(inner(k), 3, fallback="error"), 2, fallback="error")
    got = pf.pfor(lambda k: pf.pfor(inner(k), 3, fallback="loop"), 2, fallback="loop")
    expected = [[inner(k)(tf.constant(i)) for i in range(3)] for k in range(2)]
    np.testing.assert_allclose(got.numpy(), np.array(expected), rtol=1e-5)


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_drawn_lengths_and_branches(data):
    """Drawn per-iteration prefix lengths (0 included) in one branch, a boolean mask in
    the other, which branch each row takes, returned ragged."""
    n = data.draw(st.integers(1, 5), label="n")
    lengths = tf.constant(data.draw(testing.lengths_strategy(n, 6), label="lengths"))
    takes = tf.constant(data.draw(st.lists(st.booleans(), min_size=n, max_size=n),
                                  label="takes"))

    def body(i):
        xi = X[i]
        return tf.cond(takes[i], lambda: tf.cos(testing.rows(X, lengths, i)),
                       lambda: tf.boolean_mask(xi, xi < 0))

    testing.assert_matches_loop(body, n, ragged=True, modes=testing.draw_modes(data))
    got = pf.pfor(body, n, fallback="error", ragged_outputs=True)
    expected = np.where(takes.numpy(), lengths.numpy(), (X_NP[:n] < 0).sum(axis=1))
    assert _lengths(got) == expected.tolist()


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_drawn_layouts_of_predicate_and_branches(data):
    """Every mix of an invariant or per-iteration predicate with branches whose values
    are invariant (of a fixed or an unknown size), stacked, or ragged."""
    n = data.draw(st.integers(1, 4), label="n")
    lengths = tf.constant(data.draw(testing.lengths_strategy(n, 6), label="lengths"))
    takes = tf.constant(data.draw(st.lists(st.booleans(), min_size=n, max_size=n),
                                  label="takes"))
    flag = data.draw(st.booleans(), label="invariant predicate value")
    stacked_predicate = data.draw(st.booleans(), label="stacked predicate")
    kinds = ("invariant", "invariant unknown size", "stacked", "ragged")
    first = data.draw(st.sampled_from(kinds), label="first branch")
    second = data.draw(st.sampled_from(kinds), label="second branch")
    c = tf.constant([0.5, -1.0, 2.0, -0.25])

    def value(kind, i, scale):
        if kind == "invariant":
            return c[:3] * scale
        if kind == "invariant unknown size":
            return tf.boolean_mask(c, c > 0) * scale
        if kind == "stacked":
            return X[i][:2] * scale
        return tf.sin(testing.rows(X, lengths, i)) * scale

    def body(i):
        predicate = takes[i] if stacked_predicate else tf.constant(flag)
        return tf.cond(predicate, lambda: value(first, i, 1.0), lambda: value(second, i, -2.0))

    testing.assert_matches_loop(body, n, ragged=True, modes=testing.draw_modes(data))
    reduced = testing.assert_matches_loop(lambda i: tf.reduce_sum(body(i)), n,
                                          modes=("eager",))
    assert reduced.shape == (n,)
