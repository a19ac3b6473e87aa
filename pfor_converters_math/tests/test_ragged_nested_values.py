"""Ragged values as an outer pfor meets them in a nested pfor's converted body (issue
15, section 1: nested pfor): one-argument Where (boolean_mask) emitted without a
data-dependent scatter, gathers with batch_dims, new axes, values of no static size
against ragged ones, reshapes to shapes known at run time, segment sums by ids of rank
2. Against the sequential loop, with no fallback."""

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core.testing import assert_allclose, assert_matches_loop, sequential

X = tf.constant(np.random.RandomState(3).normal(size=(3, 4, 6)).astype(np.float32))
# Per-iteration lengths (a ragged x[i][:m_i]), with an empty one.
M = tf.constant([2, 0, 5])


def _masked_sum(v):
    """The sum of squares of the values above 0.3: row 1 of example 0 keeps none."""
    return tf.reduce_sum(tf.boolean_mask(v, v > 0.3) ** 2)


def _double_loop(fn):
    return tf.function(lambda: tf.stack([tf.stack([fn(tf.identity(X[i, j]))
                                                   for j in range(4)]) for i in range(3)]),
                       autograph=False)()


@pytest.mark.parametrize("fn", [_masked_sum, lambda v: tf.gradients(_masked_sum(v), v)[0]],
                         ids=["value", "gradient"])
def test_boolean_mask_inside_an_outer_pfor(fn):
    x = X.numpy()
    x[0, 1] = -np.abs(x[0, 1])  # a row whose mask keeps nothing
    data = tf.constant(x)
    got = pf.vectorized_map(lambda xb: pf.vectorized_map(fn, xb, fallback="error"), data,
                            fallback="error")
    expected = tf.function(lambda: tf.stack([tf.stack([fn(tf.identity(data[i, j]))
                                                       for j in range(4)])
                                             for i in range(3)]), autograph=False)()
    assert got.shape == expected.shape
    assert_allclose(got, expected)


def test_new_axes_on_a_ragged_value():
    w = tf.constant(np.linspace(-1, 1, 6).astype(np.float32))

    def body(i):
        r = X[i, 0][:M[i]]  # ragged: M[i] elements
        return tf.reduce_sum(r[:, None] * w[None, :], 0), tf.reduce_sum(r[None, :], 1)

    got = assert_matches_loop(body, 3)
    assert got[0].shape == (3, 6) and got[1].shape == (3, 1)


def test_gather_with_batch_dims_by_ragged_indices():
    def body(i):
        steps = tf.range(M[i])  # ragged
        index = tf.stack([steps, 5 - steps])  # [2, M[i]]
        return tf.reduce_sum(tf.gather(X[i, :2], index, axis=1, batch_dims=1), 1)

    got = assert_matches_loop(body, 3)
    assert got.shape == (3, 2)


def test_unsorted_segment_sum_by_ids_of_rank_2():
    def body(i):
        steps = tf.range(M[i])
        ids = tf.stack([steps % 3, (steps + 1) % 3])  # ragged [2, M[i]]
        data = tf.stack([X[i, 0][:M[i]], X[i, 1][:M[i]]])
        return tf.math.unsorted_segment_sum(data, ids, 3)

    got = assert_matches_loop(body, 3)
    assert got.shape == (3, 3)


def _sized_body(size):
    """A value of no static size (``size`` known at run time) against a ragged one
    that is as long in every iteration."""
    lengths = tf.fill([3], size)

    def body(i):
        fixed = X[i, 0][:size]  # stacked, of no static size
        ragged = X[i, 1][:tf.gather(lengths, i)]  # per-iteration bound: ragged
        shape = tf.stack([size, 1])
        return (tf.add_n([fixed, ragged]), tf.add_n([ragged, fixed]), fixed * ragged,
                tf.reshape(ragged, shape))
    return body


def test_values_of_no_static_size_meet_ragged_ones():
    size = 4
    run = tf.function(lambda s: pf.pfor(_sized_body(s), 3, fallback="error"),
                      autograph=False)
    got = run(tf.constant(size))
    expected = sequential(_sized_body(tf.constant(size)), 3)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        assert_allclose(g, e)
    assert got[3].shape == (3, size, 1)


def test_values_of_no_static_size_that_do_not_match_fail_as_the_loop_does():
    def body_for(size):
        def body(i):
            fixed = X[i, 0][:size]
            ragged = X[i, 1][:tf.gather(M, i)]
            return tf.add_n([fixed, ragged])
        return body

    with pytest.raises(tf.errors.InvalidArgumentError):
        sequential(body_for(tf.constant(2)), 3)
    run = tf.function(lambda s: pf.pfor(body_for(s), 3, fallback="error"), autograph=False)
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(tf.constant(2))
