"""Reductions, arg-reductions and scans of ragged values (x[:n_i]) against the
sequential loop: over the ragged axis and others, keep_dims both ways, empty rows
(what TensorFlow gives for an empty reduction), gradients."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing

WIDTH = 4


def _draw(data, n, dtype):
    lengths = tf.constant(data.draw(testing.lengths_strategy(n, WIDTH), label="lengths"), tf.int32)
    shape = [n, WIDTH, 3]
    size = int(np.prod(shape))
    if dtype == tf.bool:
        values = data.draw(st.lists(st.booleans(), min_size=size, max_size=size))
    elif dtype.is_integer:
        values = data.draw(st.lists(st.integers(-5, 5), min_size=size, max_size=size))
    else:
        values = data.draw(st.lists(st.floats(-2, 2, width=32), min_size=size, max_size=size))
    return tf.constant(np.asarray(values).reshape(shape), dtype), lengths


REDUCTIONS = {
    tf.float32: [tf.reduce_sum, tf.reduce_prod, tf.reduce_max, tf.reduce_min,
                 tf.reduce_mean, tf.math.reduce_euclidean_norm],
    tf.int32: [tf.reduce_sum, tf.reduce_max, tf.reduce_min, tf.reduce_mean],
    tf.bool: [tf.reduce_all, tf.reduce_any],
}


@pytest.mark.parametrize("dtype", [tf.float32, tf.int32, tf.bool], ids=str)
@settings(max_examples=20)
@given(data=st.data())
def test_reductions(dtype, data):
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _draw(data, n, dtype)
    op = data.draw(st.sampled_from(REDUCTIONS[dtype]), label="op")
    axis = data.draw(st.sampled_from([0, 1, -1, [0, 1], [], None, -2]), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    ragged = axis in (1, -1, [])  # the ragged axis is kept
    testing.assert_matches_loop(lambda i: op(testing.rows(x, lengths, i), axis=axis, keepdims=keepdims),
                                n, ragged=ragged, modes=testing.draw_modes(data))


@settings(max_examples=12)
@given(data=st.data())
def test_arg_reductions(data):
    n = data.draw(st.integers(0, 4), label="n")
    dtype = data.draw(st.sampled_from([tf.float32, tf.int32]), label="dtype")
    x, lengths = _draw(data, n, dtype)
    op = data.draw(st.sampled_from([tf.argmax, tf.argmin]), label="op")
    axis = data.draw(st.sampled_from([0, 1, -1]), label="axis")
    if axis == 0:  # the loop fails on an empty axis: draw lengths from 1
        lengths = tf.maximum(lengths, 1)
    testing.assert_matches_loop(lambda i: op(testing.rows(x, lengths, i), axis=axis), n,
                                ragged=axis != 0, modes=testing.draw_modes(data))


def test_arg_reduction_over_an_empty_axis_fails_like_the_loop():
    x = tf.ones([3, WIDTH])
    lengths = tf.constant([2, 0, 1])
    testing.assert_fails_like_loop(lambda i: tf.argmax(testing.rows(x, lengths, i)), 3,
                                   match="empty")


@settings(max_examples=16)
@given(data=st.data())
def test_scans(data):
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _draw(data, n, tf.float32)
    op = data.draw(st.sampled_from([tf.cumsum, tf.math.cumprod,
                                    tf.math.cumulative_logsumexp]), label="op")
    axis = data.draw(st.sampled_from([0, 1, -2]), label="axis")
    exclusive, reverse = data.draw(st.booleans()), data.draw(st.booleans())
    testing.assert_matches_loop(
             lambda i: op(testing.rows(x, lengths, i), axis=axis, exclusive=exclusive, reverse=reverse),
             n, ragged=True, modes=testing.draw_modes(data))


GRADIENT_BODIES = {
    "sum": lambda r: tf.reduce_sum(r * r, 0),
    "mean": lambda r: tf.reduce_mean(r, 0),
    "max": lambda r: tf.reduce_max(r, 0),
    "min_all": lambda r: tf.reduce_min(r),
    "prod": lambda r: tf.reduce_prod(r, 0),
    "norm": lambda r: tf.math.reduce_euclidean_norm(r, 0),
    "log_mean": lambda r: tf.math.log(tf.reduce_mean(tf.exp(r), 0)),
    "cumsum": lambda r: tf.reduce_sum(tf.cumsum(r, 0, reverse=True) ** 2, 0),
    "logsumexp": lambda r: tf.reduce_sum(tf.math.cumulative_logsumexp(r, 0), 0),
    "inner_mean": lambda r: tf.reduce_sum(tf.reduce_mean(tf.sqrt(tf.abs(r)), 1), 0),
}


@settings(max_examples=14)
@given(data=st.data())
def test_gradients(data):
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _draw(data, n, tf.float32)
    name = data.draw(st.sampled_from(sorted(GRADIENT_BODIES)), label="body")
    body = GRADIENT_BODIES[name]
    chunked = data.draw(st.booleans(), label="chunked")
    testing.assert_gradients_match(lambda i: body(testing.rows(x, lengths, i)), [x], n, chunked=chunked)
