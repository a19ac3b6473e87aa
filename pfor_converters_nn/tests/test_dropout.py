"""Dropout: its arithmetic (scale, compare, select) converts here, its random draw in the
state pack. Stateless dropout with per-iteration seeds is deterministic, so it is
compared with the sequential loop; stateful dropout (tf.nn.dropout, Keras' Dropout
layer in training mode) is checked for what randomness="different" / "same" promise."""

import keras
import numpy as np
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing


@settings(max_examples=25)
@given(st.data())
def test_stateless_dropout_matches_loop(data):
    """tf.nn.experimental.stateless_dropout, seeds from the loop index, values and
    noise shape (broadcast masks) drawn, values stacked or invariant."""
    shape = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3), label="shape")
    rate = data.draw(st.sampled_from([0.0, 0.25, 0.5, 0.9]), label="rate")
    broadcast = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    noise_shape = [1 if b else d for b, d in zip(broadcast, shape)]
    n = data.draw(st.sampled_from([0, 1, 2, 3]), label="n")
    x_stacked = data.draw(st.booleans(), label="x stacked")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = tf.constant(rng.standard_normal([n] * x_stacked + shape), tf.float32)

    def body(i):
        xi = tf.gather(x, i) if x_stacked else x
        return tf.nn.experimental.stateless_dropout(xi, rate, seed=tf.stack([i, 7]),
                                                    noise_shape=noise_shape)

    testing.assert_matches_loop(body, n, graph=data.draw(st.booleans(), label="graph"))


def test_stateful_dropout_layouts():
    """tf.nn.dropout and keras' Dropout(training=True) with no fallback: each entry is
    dropped or scaled by 1 / (1 - rate); iterations draw different masks, or one mask
    with randomness="same"."""
    keras.utils.set_random_seed(0)
    layer = keras.layers.Dropout(0.5)
    x = tf.ones([4, 64])
    for drop in (lambda v: tf.nn.dropout(v, 0.5), lambda v: layer(v, training=True)):
        different = pf.pfor(lambda i: drop(tf.gather(x, i)), 4, fallback="error").numpy()
        same = pf.pfor(lambda i: drop(tf.gather(x, i)), 4, fallback="error",
                       randomness="same").numpy()
        for out in (different, same):
            assert set(np.unique(out)) <= {0.0, 2.0}
        assert all((same[k] == same[0]).all() for k in range(4))
        assert not all((different[k] == different[0]).all() for k in range(4))
