"""The core's lean shape helpers (``extend.shapes``) against the TensorFlow functions they
stand for: ``owners`` is ``tf.repeat(tf.range(n), counts)``, ``masked_elements`` is
``tf.boolean_mask``, ``dims`` gives every dimension, eagerly, in graphs of unknown
shapes and under XLA."""

import numpy as np
import tensorflow as tf
from hypothesis import given, strategies as st

from pfor_core import shapes


@given(counts=st.lists(st.integers(0, 4), max_size=6),
       dtype=st.sampled_from([tf.int32, tf.int64]))
def test_owners_is_repeat_of_a_range(counts, dtype):
    counts = tf.constant(counts, dtype)
    want = tf.repeat(tf.range(tf.size(counts)), counts)
    np.testing.assert_array_equal(shapes.owners(counts), want)
    unknown = tf.function(shapes.owners, input_signature=[tf.TensorSpec([None], dtype)])
    np.testing.assert_array_equal(unknown(counts), want)
    got64 = shapes.owners(counts, tf.int64)
    assert got64.dtype == tf.int64
    np.testing.assert_array_equal(got64, want)


def test_owners_compiles_under_xla():
    run = tf.function(shapes.owners, jit_compile=True)
    np.testing.assert_array_equal(run(tf.constant([2, 0, 1])), [0, 0, 2])


@given(shape=st.lists(st.integers(0, 3), min_size=1, max_size=3), leading=st.integers(1, 3),
       seed=st.integers(0, 2**16))
def test_masked_elements_is_boolean_mask(shape, leading, seed):
    leading = min(leading, len(shape))
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.standard_normal(shape), tf.float32)
    mask = tf.constant(rng.random(shape[:leading]) < 0.5)
    np.testing.assert_array_equal(shapes.masked_elements(x, mask), tf.boolean_mask(x, mask))
    unknown = tf.function(shapes.masked_elements, input_signature=[
        tf.TensorSpec([None] * len(shape)), tf.TensorSpec([None] * leading, tf.bool)])
    np.testing.assert_array_equal(unknown(x, mask), tf.boolean_mask(x, mask))


def test_masked_elements_are_differentiable():
    x = tf.constant([[1.0, -2.0], [3.0, -4.0]])
    with tf.GradientTape() as tape:
        tape.watch(x)
        got = shapes.masked_elements(x, x > 0)
        loss = tf.reduce_sum(got * [2.0, 5.0])
    np.testing.assert_array_equal(got, [1.0, 3.0])
    np.testing.assert_array_equal(tape.gradient(loss, x),
                                  [[2.0, 0.0], [5.0, 0.0]])


def test_dims_are_ints_where_static_and_one_unpack_where_not():
    @tf.function(input_signature=[tf.TensorSpec([None, 3, None], tf.float32)])
    def run(x):
        dims = shapes.dims(x)
        assert dims[1] == 3
        assert dims[0].op.type == dims[2].op.type == "Unpack"
        return tf.stack([dims[0], dims[2]])

    np.testing.assert_array_equal(run(tf.zeros([2, 3, 5])), [2, 5])
