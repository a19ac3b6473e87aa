"""Acceptance for the applications (issue 6): every user-facing function on the three
models of the paper's evaluation, an MLP, the MNIST CNN (fewer channels, for speed) and
an LSTM (keras.layers.LSTM), with fallback="error", against references that do not
vectorize: ``tape.jacobian(..., experimental_use_pfor=False)``, a Python loop of
GradientTapes, ``tf.map_fn``.

Inputs are continuous random values: max-pool windows without ties, relu inputs away
from 0, so batching cannot change which element a gradient flows through.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing

pytestmark = pytest.mark.grappler  # real models, optimized as users run them

TOL = dict(rtol=1e-3, atol=1e-4)  # convolutions and recurrences sum in another order
MODELS = ["mlp", "cnn", "lstm"]
INPUT_SHAPES = {"mlp": [5], "cnn": [28, 28, 1], "lstm": [4, 3]}


def _model(kind):
    keras.utils.set_random_seed(11)
    layers = keras.layers
    body = {
        "mlp": [layers.Dense(8, activation="tanh"), layers.Dense(3)],
        # The paper's MNIST model: conv-pool-conv-pool-dense-dropout-dense.
        "cnn": [layers.Conv2D(4, 5, activation="relu"), layers.MaxPool2D(),
                layers.Conv2D(6, 5, activation="relu"), layers.MaxPool2D(),
                layers.Flatten(), layers.Dense(16, activation="relu"), layers.Dropout(0.5),
                layers.Dense(10)],
        "lstm": [layers.LSTM(5), layers.Dense(3)],
    }[kind]
    model = keras.Sequential([keras.Input(INPUT_SHAPES[kind])] + body)
    return lambda x: model(x, training=False), model.trainable_variables


def _inputs(kind, n, seed=0):
    return tf.random.stateless_normal([n] + INPUT_SHAPES[kind], seed=[seed, 17])


def _labels(n, classes, seed=1):
    return tf.random.stateless_uniform([n], seed=[seed, 3], maxval=classes, dtype=tf.int32)


def _xent(labels, logits):
    return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
        labels, logits, from_logits=True))


@pytest.mark.parametrize("kind", MODELS)
def test_vmap_map_fn_and_vectorized_map(kind):
    model, _ = _model(kind)
    x = _inputs(kind, 3)

    def one(xi):
        return model(xi[None])[0]

    expected = tf.map_fn(one, x, fn_output_signature=tf.float32)
    vmapped = pf.vmap(one, fallback="error")
    testing.assert_allclose(vmapped(x), expected, **TOL, what="vmap")
    testing.assert_allclose(vmapped(x[::-1]), expected[::-1], **TOL, what="vmap, 2nd call")
    assert vmapped.trace_count == 1
    testing.assert_allclose(pf.map_fn(one, x, fn_output_signature=tf.float32,
                                      fallback="error"), expected, **TOL, what="map_fn")
    testing.assert_allclose(pf.vectorized_map(one, x, fallback="error"), expected, **TOL,
                            what="vectorized_map")


def _loop_jacobian(f, x):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = f(x)
    return tape.jacobian(y, x, experimental_use_pfor=False)


def _loop_batch_jacobian(f, x):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = f(x)
    return tape.batch_jacobian(y, x, experimental_use_pfor=False)


@pytest.mark.parametrize("kind", MODELS)
def test_jacobian_and_batch_jacobian_wrt_the_input(kind):
    model, _ = _model(kind)
    x = _inputs(kind, 2, seed=2)
    testing.assert_allclose(pf.jacobian(model, x, fallback="error"),
                            _loop_jacobian(model, x), **TOL, what="jacobian")
    testing.assert_allclose(pf.batch_jacobian(model, x, fallback="error"),
                            _loop_batch_jacobian(model, x), **TOL, what="batch_jacobian")


@pytest.mark.parametrize("kind", MODELS)
def test_tape_jacobians_wrt_the_weights_and_the_input(kind):
    model, variables = _model(kind)
    x = _inputs(kind, 2, seed=3)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = model(x)
    got = pf.tape_jacobian(tape, y, variables, fallback="error")
    expected = tape.jacobian(y, variables, experimental_use_pfor=False)
    assert len(got) == len(variables)
    for g, e, v in zip(got, expected, variables):
        assert g.shape == y.shape + v.shape
        testing.assert_allclose(g, e, **TOL, what=f"d y / d {v.name}")
    testing.assert_allclose(pf.tape_batch_jacobian(tape, y, x, fallback="error"),
                            tape.batch_jacobian(y, x, experimental_use_pfor=False), **TOL,
                            what="tape_batch_jacobian")


@pytest.mark.parametrize("kind", MODELS)
def test_per_example_gradients(kind):
    """Each row equals a GradientTape on that example alone, and their mean equals the
    batch gradient of the mean loss."""
    model, variables = _model(kind)
    n = 4
    x, labels = _inputs(kind, n, seed=4), _labels(n, model(_inputs(kind, 1)).shape[-1])

    def loss_fn(xi, yi):  # keepdims=True: the model gets a batch of one
        return _xent(yi, model(xi))

    grads = pf.per_example_gradients(loss_fn, variables, x, labels, keepdims=True,
                                     fallback="error")
    assert [g.shape for g in grads] == [[n] + v.shape for v in variables]
    for k in range(n):
        with tf.GradientTape() as tape:
            loss = loss_fn(x[k:k + 1], labels[k:k + 1])
        for g, e in zip(grads, tape.gradient(loss, variables)):
            testing.assert_allclose(g[k], e, **TOL, what=f"example {k}")
    with tf.GradientTape() as tape:
        loss = _xent(labels, model(x))
    for g, e in zip(grads, tape.gradient(loss, variables)):
        testing.assert_allclose(tf.reduce_mean(g, 0), e, **TOL, what="mean")


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_per_example_gradients_clipped_by_the_batch_norm(kind):
    """Collectives in a body: each example's gradient scaled by the batch's global
    gradient norm (pf.all_sum), against the loop of tapes and numpy."""
    model, variables = _model(kind)
    n = 3
    x, labels = _inputs(kind, n, seed=5), _labels(n, model(_inputs(kind, 1)).shape[-1])

    def body(i):
        with tf.GradientTape() as tape:
            loss = _xent(tf.gather(labels, [i]), model(tf.gather(x, [i])))
        grads = tape.gradient(loss, variables)
        sq = tf.add_n([tf.reduce_sum(g * g) for g in grads])
        total = tf.sqrt(pf.all_sum(sq))
        return [g / total for g in grads] + [pf.all_max(sq), pf.all_gather(loss)]

    got = pf.pfor(body, n, fallback="error")
    rows = []
    for k in range(n):
        with tf.GradientTape() as tape:
            loss = _xent(labels[k:k + 1], model(x[k:k + 1]))
        rows.append((loss, tape.gradient(loss, variables)))
    sqs = [sum(float(tf.reduce_sum(g * g)) for g in grads) for _, grads in rows]
    total = np.sqrt(sum(sqs))
    for j in range(len(variables)):
        expected = tf.stack([grads[j] for _, grads in rows]) / total
        testing.assert_allclose(got[j], expected, **TOL, what=f"clipped gradient {j}")
    np.testing.assert_allclose(got[-2].numpy(), np.full([n], max(sqs)), rtol=1e-3)
    losses = tf.stack([loss for loss, _ in rows])
    testing.assert_allclose(got[-1], tf.tile(losses[None], [n, 1]), **TOL, what="all_gather")


@pytest.mark.parametrize("kind", ["mlp", "lstm"])
def test_hessian_of_the_loss_wrt_the_input(kind):
    """Second derivatives (a jacobian of a jacobian) of one example's loss, against
    nested GradientTapes without pfor. (The CNN's relus make its hessian zero almost
    everywhere, so it is left out.)"""
    model, _ = _model(kind)
    xi = _inputs(kind, 1, seed=6)
    label = _labels(1, 3)

    def loss(v):
        return _xent(label, model(v))

    with tf.GradientTape(persistent=True) as outer:
        outer.watch(xi)
        with tf.GradientTape() as inner:
            inner.watch(xi)
            y = loss(xi)
        grad = inner.gradient(y, xi)
    expected = outer.jacobian(grad, xi, experimental_use_pfor=False)
    testing.assert_allclose(pf.hessian(loss, xi, fallback="error"), expected, **TOL,
                            what="hessian")


@pytest.mark.parametrize("kind", MODELS)
def test_map_batched_input_pipeline(kind):
    """pf.data.map_batched of a model's per-example prediction equals
    map(...).batch(...), last partial batch included."""
    model, _ = _model(kind)
    x = _inputs(kind, 5, seed=7)

    def predict(xi):
        return tf.argmax(model(xi[None])[0], output_type=tf.int32), model(xi[None])[0]

    ds = tf.data.Dataset.from_tensor_slices(x)
    got = list(ds.apply(pf.data.map_batched(predict, 2, fallback="error")))
    expected = list(ds.map(predict).batch(2))
    assert len(got) == len(expected) == 3
    for (gi, gy), (ei, ey) in zip(got, expected):
        testing.assert_allclose(gy, ey, **TOL, what="logits")
        np.testing.assert_array_equal(gi.numpy(), ei.numpy())
