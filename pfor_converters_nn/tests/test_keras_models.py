"""Acceptance: real Keras 3 models inside pf.pfor with fallback="error" equal the
sequential loop, for inference and for per-example gradients (the loss and the
GradientTape inside the loop body).

Models are small (few channels, n=3) so the file stays fast; inputs are continuous
random values so max-pool windows have no ties that batching could break differently.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing

N = 3
TOLERANCE = dict(rtol=1e-3, atol=1e-4)  # convolutions sum in a different order batched


def seeded(seed=0):
    keras.utils.set_random_seed(seed)
    return np.random.default_rng(seed)


def example(t, i):
    """Row i of a batch, keeping a batch axis of one (as Keras models expect)."""
    return tf.expand_dims(tf.gather(t, i), 0)


def check_inference_and_gradients(model_fn, variables, x, y, loss_fn, *, graph=False):
    """Per-example forward outputs, and gradients of loss_fn(y_i, model(x_i))."""
    def forward(i):
        return model_fn(example(x, i))

    def gradients(i):
        with tf.GradientTape() as tape:
            loss = loss_fn(example(y, i), model_fn(example(x, i)))
        return [loss] + tape.gradient(loss, variables)

    testing.assert_matches_loop(forward, N, **TOLERANCE)
    grads = testing.assert_matches_loop(gradients, N, graph=graph, **TOLERANCE)
    assert all(g.shape == [N] + list(v.shape) for g, v in zip(grads[1:], variables))


def sparse_xent(labels, logits):
    return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
        labels, logits, from_logits=True))


def mnist_model(hidden=64):
    """The paper's MNIST model (fewer channels and hidden units, for test speed)."""
    layers = keras.layers
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(8, 5, activation="relu"), layers.MaxPool2D(),
        layers.Conv2D(16, 5, activation="relu"), layers.MaxPool2D(),
        layers.Flatten(), layers.Dense(hidden, activation="relu"), layers.Dropout(0.5),
        layers.Dense(10)])


def test_mnist_model():
    """Inference and per-example gradients (dropout off: training=False keeps the
    comparison with the loop deterministic); gradients also with iters a run-time
    tensor inside tf.function."""
    rng = seeded()
    model = mnist_model()
    x = tf.constant(rng.standard_normal([N, 28, 28, 1]), tf.float32)
    y = tf.constant(rng.integers(0, 10, [N]), tf.int32)
    check_inference_and_gradients(lambda v: model(v, training=False),
                                  model.trainable_variables, x, y, sparse_xent, graph=True)


def test_mnist_model_dropout_training_mode():
    """training=True: the dropout masks (state pack) and their arithmetic convert with
    no fallback; with one example in every iteration, randomness="same" gives equal
    rows and "different" does not. (Random masks cannot be compared with the loop.)"""
    rng = seeded(7)
    model = mnist_model()
    x = tf.constant(rng.standard_normal([1, 28, 28, 1]), tf.float32)
    rows = {mode: pf.pfor(lambda i: model(x, training=True), N, fallback="error",
                          randomness=mode).numpy() for mode in ("same", "different")}
    assert all(np.array_equal(rows["same"][k], rows["same"][0]) for k in range(N))
    assert not all(np.array_equal(rows["different"][k], rows["different"][0])
                   for k in range(N))


def test_mnist_per_example_gradients_api():
    """pf.per_example_gradients on the same model equals one tape per example."""
    rng = seeded(1)
    model = mnist_model(hidden=32)
    x = tf.constant(rng.standard_normal([N, 28, 28, 1]), tf.float32)
    y = tf.constant(rng.integers(0, 10, [N]), tf.int32)
    variables = model.trainable_variables

    def loss_fn(xi, yi):
        return sparse_xent(yi, model(xi, training=False))

    got = pf.per_example_gradients(loss_fn, variables, x, y, keepdims=True, fallback="error")
    for i in range(N):
        with tf.GradientTape() as tape:
            loss = loss_fn(x[i:i + 1], y[i:i + 1])
        for g, e in zip(got, tape.gradient(loss, variables)):
            testing.assert_allclose(g[i], e, **TOLERANCE)


def test_vgg_style_stack():
    """conv-conv-pool twice, then dense, on 48x48x3 inputs."""
    rng = seeded(2)
    layers = keras.layers
    model = keras.Sequential([
        keras.Input((48, 48, 3)),
        layers.Conv2D(4, 3, padding="same", activation="relu"),
        layers.Conv2D(4, 3, padding="same", activation="relu"), layers.MaxPool2D(),
        layers.Conv2D(8, 3, padding="same", activation="relu"),
        layers.Conv2D(8, 3, padding="same", activation="relu"), layers.MaxPool2D(),
        layers.Flatten(), layers.Dense(16, activation="relu"), layers.Dense(5)])
    x = tf.constant(rng.standard_normal([N, 48, 48, 3]), tf.float32)
    y = tf.constant(rng.integers(0, 5, [N]), tf.int32)
    check_inference_and_gradients(lambda v: model(v, training=False),
                                  model.trainable_variables, x, y, sparse_xent)


def test_assorted_conv_layers():
    """Strided, dilated (SpaceToBatchND), depthwise, separable and transposed
    convolutions, bilinear and nearest up-sampling (image resize ops), average and
    global max pooling, elu / selu / leaky relu / softplus."""
    rng = seeded(8)
    layers = keras.layers
    model = keras.Sequential([
        keras.Input((12, 12, 3)),
        layers.Conv2D(4, 3, strides=2, padding="same", activation="elu"),
        layers.UpSampling2D(interpolation="bilinear"),
        layers.DepthwiseConv2D(3, activation="selu"),
        layers.SeparableConv2D(4, 3, padding="same"), layers.LeakyReLU(0.1),
        layers.Conv2DTranspose(3, 3, strides=2), layers.AveragePooling2D(2),
        layers.UpSampling2D(interpolation="nearest"),
        layers.Conv2D(4, 3, dilation_rate=2, activation="softplus"),
        layers.GlobalMaxPooling2D(), layers.Dense(5)])
    x = tf.constant(rng.standard_normal([N, 12, 12, 3]), tf.float32)
    y = tf.constant(rng.integers(0, 5, [N]), tf.int32)
    check_inference_and_gradients(lambda v: model(v, training=False),
                                  model.trainable_variables, x, y, sparse_xent)


def test_conv1d_model_binary_cross_entropy():
    """Conv1D (plain and dilated), 1-D max pooling, sigmoid outputs and Keras'
    binary cross-entropy on probabilities."""
    rng = seeded(9)
    layers = keras.layers
    model = keras.Sequential([
        keras.Input((10, 4)), layers.Conv1D(4, 3, activation="tanh"), layers.MaxPool1D(),
        layers.Conv1D(3, 2, dilation_rate=2), layers.GlobalAveragePooling1D(),
        layers.Dense(2, activation="sigmoid")])
    x = tf.constant(rng.standard_normal([N, 10, 4]), tf.float32)
    y = tf.constant(rng.integers(0, 2, [N, 2]), tf.float32)

    def loss_fn(labels, probabilities):
        return tf.reduce_mean(keras.losses.binary_crossentropy(labels, probabilities))

    check_inference_and_gradients(lambda v: model(v, training=False),
                                  model.trainable_variables, x, y, loss_fn)


class EncoderBlock(keras.layers.Layer):
    """Token embedding, self-attention and a gelu feed-forward, each with a residual
    and layer normalization. With ``mask_zero`` token 0 is padding that attention
    skips (Keras propagates the mask from the embedding)."""

    def __init__(self, vocab, dim, heads, hidden, approximate, mask_zero=False):
        super().__init__()
        gelu = lambda v: keras.activations.gelu(v, approximate=approximate)  # noqa: E731
        self.embed = keras.layers.Embedding(vocab, dim, mask_zero=mask_zero)
        self.attend = keras.layers.MultiHeadAttention(heads, dim // heads)
        self.norm1 = keras.layers.LayerNormalization()
        self.norm2 = keras.layers.LayerNormalization()
        self.up = keras.layers.Dense(hidden, activation=gelu)
        self.down = keras.layers.Dense(dim)
        self.head = keras.layers.Dense(vocab)

    def call(self, tokens):
        h = self.embed(tokens)
        h = self.norm1(h + self.attend(h, h))
        h = self.norm2(h + self.down(self.up(h)))
        return self.head(h)


@pytest.mark.parametrize("approximate, mask_zero", [(True, False), (False, True)])
def test_transformer_encoder_block(approximate, mask_zero):
    """Integer tokens per example (with padding of different lengths when masked); the
    loss is next-token cross-entropy."""
    rng = seeded(3)
    vocab, length = 11, 5
    block = EncoderBlock(vocab, dim=8, heads=2, hidden=16, approximate=approximate,
                         mask_zero=mask_zero)
    tokens = rng.integers(1, vocab, [N, length])
    if mask_zero:
        tokens[np.arange(length) >= np.arange(N)[:, None] + 2] = 0
    tokens = tf.constant(tokens, tf.int32)
    block(tokens[:1])
    targets = tf.roll(tokens, -1, axis=1)
    check_inference_and_gradients(lambda t: block(t, training=False),
                                  block.trainable_variables, tokens, targets, sparse_xent,
                                  graph=True)


def batch_norm_model():
    layers = keras.layers
    return keras.Sequential([
        keras.Input((6, 6, 2)), layers.Conv2D(3, 3), layers.BatchNormalization(),
        layers.ReLU(), layers.GlobalAveragePooling2D(), layers.Dense(4)])


def batches(rng, batch=4):
    """Per-iteration batches: BatchNormalization normalizes over each one."""
    x = tf.constant(rng.standard_normal([N, batch, 6, 6, 2]) * 2 + 1, tf.float32)
    y = tf.constant(rng.integers(0, 4, [N, batch]), tf.int32)
    return x, y


def test_batch_norm_inference():
    rng = seeded(4)
    model = batch_norm_model()
    for v in model.non_trainable_variables:  # population statistics that are not 0 / 1
        v.assign(tf.constant(rng.random(v.shape) + 0.5, tf.float32))
    x, y = batches(rng)

    def gradients(i):
        with tf.GradientTape() as tape:
            loss = sparse_xent(tf.gather(y, i), model(tf.gather(x, i), training=False))
        return [loss] + tape.gradient(loss, model.trainable_variables)

    testing.assert_matches_loop(lambda i: model(tf.gather(x, i), training=False), N,
                                **TOLERANCE)
    testing.assert_matches_loop(gradients, N, **TOLERANCE)


def test_batch_norm_training_stateless():
    """Training mode through Keras 3's functional stateless_call: each iteration's
    batch statistics, its new moving statistics (returned, not assigned) and its
    gradients equal the loop's, with no fallback."""
    rng = seeded(5)
    model = batch_norm_model()
    x, y = batches(rng)
    non_trainable = [v.value for v in model.non_trainable_variables]

    def body(i):
        trainable = [tf.convert_to_tensor(v) for v in model.trainable_variables]
        with tf.GradientTape() as tape:
            tape.watch(trainable)
            logits, new_stats = model.stateless_call(trainable, non_trainable,
                                                     tf.gather(x, i), training=True)
            loss = sparse_xent(tf.gather(y, i), logits)
        return [logits, loss] + list(new_stats) + tape.gradient(loss, trainable)

    got = testing.assert_matches_loop(body, N, **TOLERANCE)
    # The new moving statistics really differ between iterations.
    moving_mean = got[2]
    assert not np.allclose(moving_mean[0], moving_mean[1])


def test_batch_norm_training_assign_is_refused():
    """Plain layer(x, training=True) assigns per-iteration moving statistics, which the
    lock-step (SIMD) semantics cannot order: a ConversionError that names the op and
    says what to do."""
    rng = seeded(6)
    layer = keras.layers.BatchNormalization()
    x, _ = batches(rng)
    layer.build(x.shape[1:])

    with pytest.raises(pf.ConversionError) as info:
        pf.pfor(lambda i: layer(tf.gather(x, i), training=True), N, fallback="error")
    message = str(info.value)
    assert "AssignVariableOp" in message
    assert "differs between iterations" in message
    assert "after pfor" in message  # what to do instead
