"""Cross-entropy ops, L2Loss and the public losses built on them, against the
sequential loop."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing
from pfor_core.testing import strategies

DTYPES = st.sampled_from([np.float32, np.float64])


def logits(rng, shape, dtype, scale=2.0):
    # Moderate values: keras' losses on probabilities take log(1 - p), which loses
    # all precision once sigmoid saturates.
    return tf.constant((rng.standard_normal(shape) * scale).astype(dtype))


def distribution(rng, shape, dtype, axis=-1):
    """Values that sum to one along ``axis`` (labels, or probabilities)."""
    p = rng.random(shape) + 0.05
    return tf.constant((p / p.sum(axis=axis, keepdims=True)).astype(dtype))


def class_indices(rng, shape, classes, dtype):
    return tf.constant(rng.integers(0, classes, shape).astype(dtype))


def softmax_xent(features, labels):
    return tuple(tf.raw_ops.SoftmaxCrossEntropyWithLogits(features=features, labels=labels))


def sparse_softmax_xent(features, labels):
    return tuple(tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=features,
                                                                labels=labels))


@given(batch=st.integers(0, 3), classes=st.integers(0, 3), n=st.integers(0, 3),
       dtype=DTYPES, broadcast=st.sampled_from([None, 0, 1]),
       mode=st.sampled_from(testing.DRAWN_MODES), data=st.data())
def test_softmax_xent_op(batch, classes, n, dtype, broadcast, mode, data):
    """Both outputs; ``broadcast`` gives that operand one row ([1, c] against [b, c])."""
    stacked = testing.draw_stacked(data, 2)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    rows = [1 if broadcast == k else batch for k in range(2)]
    args = [logits(rng, ([n] if stacked[0] else []) + [rows[0], classes], dtype),
            distribution(rng, ([n] if stacked[1] else []) + [rows[1], classes], dtype)]
    testing.check_op(softmax_xent, args, stacked=stacked, n=n, mode=mode)


@given(batch=st.integers(0, 3), classes=st.integers(1, 3), n=st.integers(0, 3),
       dtype=DTYPES, label_dtype=st.sampled_from([np.int32, np.int64]),
       mode=st.sampled_from(testing.DRAWN_MODES), data=st.data())
def test_sparse_softmax_xent_op(batch, classes, n, dtype, label_dtype, mode, data):
    stacked = testing.draw_stacked(data, 2)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    args = [logits(rng, ([n] if stacked[0] else []) + [batch, classes], dtype),
            class_indices(rng, ([n] if stacked[1] else []) + [batch], classes, label_dtype)]
    testing.check_op(sparse_softmax_xent, args, stacked=stacked, n=n, mode=mode)


# Public losses: name -> (function(labels, logits), kind of labels). The keras losses on
# probabilities get softmax/sigmoid outputs.
LOSSES = {
    "softmax_xent": (lambda y, x: tf.nn.softmax_cross_entropy_with_logits(y, x), "dist"),
    "softmax_xent_axis0": (lambda y, x: tf.nn.softmax_cross_entropy_with_logits(y, x, axis=0),
                           "dist0"),
    "sparse_softmax_xent": (lambda y, x: tf.nn.sparse_softmax_cross_entropy_with_logits(y, x),
                            "index"),
    "sigmoid_xent": (lambda y, x: tf.nn.sigmoid_cross_entropy_with_logits(y, x), "binary"),
    "keras_bce": (lambda y, x: keras.losses.binary_crossentropy(y, tf.sigmoid(x)), "binary"),
    "keras_bce_logits": (lambda y, x: keras.losses.binary_crossentropy(y, x, from_logits=True),
                         "binary"),
    "keras_cce": (lambda y, x: keras.losses.categorical_crossentropy(y, tf.nn.softmax(x)),
                  "dist"),
    "keras_cce_logits": (
        lambda y, x: keras.losses.categorical_crossentropy(y, x, from_logits=True), "dist"),
    "keras_scce": (
        lambda y, x: keras.losses.sparse_categorical_crossentropy(y, tf.nn.softmax(x)), "index"),
    "keras_scce_logits": (
        lambda y, x: keras.losses.sparse_categorical_crossentropy(y, x, from_logits=True),
        "index"),
}


def labels_for(kind, rng, shape, dtype, rank):
    """Labels for logits of ``shape`` (the stacked axis included, if any), whose
    per-iteration rank is ``rank``."""
    if kind == "dist":
        return distribution(rng, shape, dtype)
    if kind == "dist0":  # distributions along axis 0 of each iteration
        return distribution(rng, shape, dtype, axis=-rank)
    if kind == "index":
        return class_indices(rng, shape[:-1], shape[-1], np.int32)
    return tf.constant(rng.random(shape).astype(dtype))  # binary: soft targets in [0, 1]


def draw_case(data, n):
    """A loss, per-iteration logits shape (rank 1..3, classes >= 1), dtype, invariance."""
    name = data.draw(st.sampled_from(sorted(LOSSES)))
    shape = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    if name == "softmax_xent_axis0" and len(shape) < 2:
        shape = shape + [2]
    if name in ("keras_cce", "keras_cce_logits", "keras_scce"):
        # Keras warns about one class; and traced, it reads the logits back from the
        # softmax while eagerly it clips the probabilities (p == 1 when one class).
        shape[-1] = max(shape[-1], 2)
    return name, shape, data.draw(DTYPES), testing.draw_stacked(data, 2)


@given(n=st.integers(0, 3), mode=st.sampled_from(testing.DRAWN_MODES), data=st.data())
def test_public_losses(n, mode, data):
    name, shape, dtype, stacked = draw_case(data, n)
    fn, kind = LOSSES[name]
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = logits(rng, ([n] if stacked[0] else []) + shape, dtype)
    y = labels_for(kind, rng, ([n] if stacked[1] else []) + shape, dtype, len(shape))
    testing.check_op(lambda a, b: fn(b, a), [x, y], stacked=stacked, n=n, mode=mode)


@given(n=st.integers(0, 3), data=st.data())
def test_per_example_loss_gradients(n, data):
    """d loss(labels_i, x_i @ w) / d(w, x_i) with the tape inside the body."""
    name, shape, dtype, (x_stacked, y_stacked) = draw_case(data, n)
    if name == "softmax_xent_axis0":
        name = "softmax_xent"
    fn, kind = LOSSES[name]
    w_stacked = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    features = data.draw(st.integers(1, 3))
    x = logits(rng, ([n] if x_stacked else []) + shape[:-1] + [features], dtype, 0.7)
    w = logits(rng, ([n] if w_stacked else []) + [features, shape[-1]], dtype, 0.7)
    y = labels_for(kind, rng, ([n] if y_stacked else []) + shape, dtype, len(shape))

    def loop_fn(i):
        xi, wi, yi = (tf.gather(t, i) if s else t
                      for t, s in ((x, x_stacked), (w, w_stacked), (y, y_stacked)))
        with tf.GradientTape() as tape:
            tape.watch([xi, wi])
            z = tf.tensordot(xi, wi, 1)
            loss = tf.reduce_sum(fn(yi, z))
        return [loss] + tape.gradient(loss, [wi, xi])

    testing.assert_matches_loop(loop_fn, n, graph=data.draw(st.booleans()))


@given(data=st.data(), shape=strategies.shapes(max_rank=3),
       dtype=strategies.dtypes("float16", "float32", "float64"))
def test_l2_loss_stacked_and_ragged(data, shape, dtype):
    """L2Loss (tf.nn.l2_loss: weight decay inside per-example losses) of a stacked or
    ragged value of any rank, as the sequential loop gives it; no fallback."""
    layouts = strategies.layouts(1, choices=strategies.WITH_RAGGED if shape else
                                 strategies.LAYOUTS)
    testing.check_inputs(data, tf.nn.l2_loss, [shape], dtype, layouts=layouts)


@pytest.mark.parametrize("shape", [[], [3], [2, 0, 3]])
def test_l2_loss_of_unknown_rank(shape):
    x = tf.random.stateless_normal([4] + shape, seed=[3, shape.__len__()])
    testing.check_op_unknown_shapes(tf.nn.l2_loss, [x], stacked=[True], n=4,
                                    known_rank=False)


def test_l2_loss_in_per_example_gradients():
    """Weight decay inside each example's loss: per-example gradients match a loop of
    tapes, with no fallback."""
    w = tf.Variable(tf.random.stateless_normal([3, 2], seed=[1, 1]))
    xs = tf.random.stateless_normal([5, 3], seed=[2, 2])

    def loss(x):
        return tf.reduce_sum(tf.tanh(tf.linalg.matvec(w, x, transpose_a=True))) + \
            1e-2 * tf.nn.l2_loss(w * x[:, None])

    got = pf.per_example_gradients(loss, [w], xs, fallback="error")[0]
    want = []
    for j in range(5):
        with tf.GradientTape() as tape:
            value = loss(xs[j])
        want.append(tape.gradient(value, w))
    testing.assert_allclose(got, tf.stack(want))
