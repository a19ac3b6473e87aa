"""pf.data.map_batched gives the same elements as map(fn).batch(b), vectorized."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

import pfor_core as pf


def _elements(dataset):
    return [tf.nest.map_structure(lambda t: t.numpy(), e) for e in dataset]


def _assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        tf.nest.assert_same_structure(g, w)
        for a, b in zip(tf.nest.flatten(g), tf.nest.flatten(w)):
            np.testing.assert_allclose(a, b, rtol=1e-6)


@given(count=st.integers(0, 11), batch=st.integers(1, 4), drop=st.booleans())
def test_same_elements_as_map_then_batch(count, batch, drop):
    x = np.arange(count * 3, dtype=np.float32).reshape(count, 3)
    ds = tf.data.Dataset.from_tensor_slices(x)

    def fn(row):
        return tf.tanh(row) * 2.0, tf.reduce_sum(row)

    got = _elements(ds.apply(pf.data.map_batched(fn, batch, drop_remainder=drop,
                                                 fallback="error")))
    _assert_same(got, _elements(ds.map(fn).batch(batch, drop_remainder=drop)))


def test_nested_elements_and_tuple_arguments():
    ds = tf.data.Dataset.from_tensor_slices(
        ({"a": np.ones([5, 2], np.float32), "b": np.arange(5)}, np.arange(5.0, dtype=np.float32)))

    def fn(features, label):
        return {"y": features["a"] * tf.cast(features["b"], tf.float32) + label}

    got = _elements(ds.apply(pf.data.map_batched(fn, 2, fallback="error")))
    _assert_same(got, _elements(ds.map(fn).batch(2)))


def test_bad_arguments():
    with pytest.raises(ValueError, match="batch_size"):
        pf.data.map_batched(tf.identity, 0)
    with pytest.raises(TypeError, match="fn must be callable"):
        pf.data.map_batched(3, 2)
    with pytest.raises(TypeError, match="dataset.apply"):
        pf.data.map_batched(tf.identity, 2)([1, 2])
