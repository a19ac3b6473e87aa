"""Normalization against the sequential loop: fused batch norm (inference and training
mode, forward and gradient, every invariance mix), LRN, and the layers that expand to
math ops (Keras BatchNormalization in inference, LayerNormalization, l2_normalize)."""


import keras
import numpy as np
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from pfor_core import testing

iters = st.sampled_from([0, 1, 2, 3, 2])


def _nc_inference_gradient() -> bool:
    """Whether the CPU has FusedBatchNormGrad for NCHW with is_training=False (only
    oneDNN's kernel does; TF_ENABLE_ONEDNN_OPTS=0 or a CPU it does not serve leaves
    Eigen's, which has only NHWC)."""
    x, c = tf.ones([1, 1, 1, 1]), tf.ones([1])
    try:
        tf.raw_ops.FusedBatchNormGradV3(
            y_backprop=x, x=x, scale=c, reserve_space_1=c, reserve_space_2=c,
            reserve_space_3=tf.zeros([0]), data_format="NCHW", is_training=False)
    except tf.errors.OpError:
        return False
    return True


ONEDNN = _nc_inference_gradient()


def draw_layout(data, version):
    """Data format and per-iteration input shape (batch may be empty)."""
    formats = ["NHWC", "NCHW"] + (["NDHWC", "NCDHW"] if version == "V3" else [])
    fmt = data.draw(st.sampled_from(formats), label="format")
    spatial = [data.draw(st.integers(1, 3)) for _ in range(len(fmt) - 2)]
    batch = data.draw(st.integers(0, 3), label="batch")
    channels = data.draw(st.integers(1, 3), label="channels")
    shape = [batch] + (spatial + [channels] if fmt.endswith("C") else [channels] + spatial)
    return fmt, shape, channels


def tensor(rng, shape, dtype=tf.float32, positive=False):
    values = rng.standard_normal(shape)
    return tf.constant(np.abs(values) + 0.5 if positive else values, dtype)


@settings(max_examples=40)
@given(st.data())
def test_fused_batch_norm(data):
    version = data.draw(st.sampled_from(["", "V2", "V3"]), label="version")
    fmt, shape, channels = draw_layout(data, version)
    training = data.draw(st.booleans(), label="is_training")
    half = version != "" and data.draw(st.booleans(), label="float16")
    factor = data.draw(st.sampled_from([1.0, 0.5])) if version == "V3" else 1.0
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 5)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = tensor(rng, [n] * stacked[0] + shape, tf.float16 if half else tf.float32)
    params = [tensor(rng, [n] * s + [channels], positive=k == 3)
              for k, s in enumerate(stacked[1:])]
    attrs = dict(epsilon=0.01, data_format=fmt, is_training=training)
    if version == "V3":
        attrs["exponential_avg_factor"] = factor
    op = getattr(tf.raw_ops, "FusedBatchNorm" + version)

    def fn(*args):
        out = op(x=args[0], scale=args[1], offset=args[2], mean=args[3], variance=args[4],
                 **attrs)
        # Reserve spaces are the kernel's private scratch: unwritten in inference mode
        # (oneDNN) or with an empty batch (float16); reserve_space_3's shape depends on
        # the kernel. The gradient test checks that ours are what the gradient needs.
        return out[:5] if training and shape[0] else out[:3]

    got = testing.check(data, fn, [x] + params, stacked=stacked, n=n)
    testing.assert_rows(got, n)


@settings(max_examples=40)
@given(st.data())
def test_fused_batch_norm_grad(data):
    version = data.draw(st.sampled_from(["", "V2", "V3"]), label="version")
    fmt, shape, channels = draw_layout(data, version)
    if len(shape) == 5:
        # TensorFlow's own 5-D batch-norm gradient of an empty batch has the wrong rank
        # (eagerly, loop or no loop).
        shape[0] = max(shape[0], 1)
    training = data.draw(st.booleans(), label="is_training")
    if not ONEDNN and fmt.startswith("NC"):
        training = True  # TF's own CPU kernel has only NHWC for is_training=False
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 5)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    y_grad, x = [tensor(rng, [n] * s + shape) for s in stacked[:2]]
    params = [tensor(rng, [n] * s + [channels], positive=k == 2)
              for k, s in enumerate(stacked[2:])]
    op = getattr(tf.raw_ops, "FusedBatchNormGrad" + version)
    extra = {"reserve_space_3": tf.zeros([0])} if version == "V3" else {}

    def fn(*args):
        return op(y_backprop=args[0], x=args[1], scale=args[2], reserve_space_1=args[3],
                  reserve_space_2=args[4], epsilon=0.01, data_format=fmt,
                  is_training=training, **extra)[:3]  # the rest are empty placeholders

    got = testing.check(data, fn, [y_grad, x] + params, stacked=stacked, n=n, atol=1e-4)
    testing.assert_rows(got, n)


@settings(max_examples=30)
@given(st.data())
def test_batch_norm_with_tape_in_body(data):
    """tf.compat.v1.nn.fused_batch_norm inside the body, each iteration normalizing its
    own batch (training) or with given statistics (inference), with gradients with
    respect to the input, scale and offset."""
    fmt, shape, channels = draw_layout(data, "V3")
    if len(shape) == 5:
        # TensorFlow's own gradient of a 5-D batch norm of an empty batch has the
        # wrong rank (eagerly, loop or no loop).
        shape[0] = max(shape[0], 1)
    training = data.draw(st.booleans(), label="is_training")
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 4)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = tensor(rng, [n] * stacked[0] + shape)
    scale, offset = [tensor(rng, [n] * s + [channels]) for s in stacked[1:3]]
    w = tensor(rng, [n] * stacked[3] + shape)
    stats = tensor(rng, [channels], positive=True)

    def body(xi, scale_i, offset_i, wi):
        with tf.GradientTape() as tape:
            tape.watch([xi, scale_i, offset_i])
            y, mean, var = tf.compat.v1.nn.fused_batch_norm(
                xi, scale_i, offset_i, mean=None if training else stats - 1.0,
                variance=None if training else stats, epsilon=0.01, data_format=fmt,
                is_training=training)
            loss = tf.reduce_sum(y * wi)
        return [y, mean, var] + tape.gradient(loss, [xi, scale_i, offset_i])

    got = testing.check(data, body, [x, scale, offset, w], stacked=stacked, n=n, atol=1e-4)
    testing.assert_rows(got, n)


@settings(max_examples=20)
@given(st.data())
def test_lrn(data):
    """LRN forward, its gradient in the body, and LRNGrad with every invariance mix."""
    shape = [data.draw(st.integers(0, 2))] + [data.draw(st.integers(1, 3)) for _ in range(3)]
    radius = data.draw(st.integers(0, 2), label="radius")
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 3)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    args = [tensor(rng, [n] * s + shape) for s in stacked]

    def fn(grads, image, w):
        with tf.GradientTape() as tape:
            tape.watch(image)
            y = tf.nn.local_response_normalization(image, radius, bias=1.0, alpha=0.5)
            loss = tf.reduce_sum(y * w)
        direct = tf.raw_ops.LRNGrad(input_grads=grads, input_image=image, output_image=y,
                                    depth_radius=radius, bias=1.0, alpha=0.5)
        return y, tape.gradient(loss, image), direct

    got = testing.check(data, fn, args, stacked=stacked, n=n)
    testing.assert_rows(got, n)


def layer_body(norm, variables):
    def body(xi, wi):
        with tf.GradientTape() as tape:
            tape.watch(xi)
            loss = tf.reduce_sum(norm(xi) * wi)
        return [norm(xi)] + tape.gradient(loss, [xi] + variables)

    return body


@settings(max_examples=20)
@given(st.data())
def test_layers_expanding_to_math_ops(data):
    """Keras BatchNormalization (inference), LayerNormalization, l2_normalize and
    tf.nn.moments + batch_normalization (per-iteration batch statistics) convert
    without fallback, forward and gradients."""
    which = data.draw(st.sampled_from(["batch_norm", "layer_norm", "l2", "moments"]))
    shape = [data.draw(st.integers(1, 3)) for _ in range(3)]
    n = data.draw(iters, label="n")
    stacked = [True, data.draw(st.booleans(), label="weights stacked")]
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = tensor(rng, [n] + shape)
    w = tensor(rng, [n] * stacked[1] + shape)
    variables = []
    if which in ("batch_norm", "layer_norm"):
        layer = (keras.layers.BatchNormalization(epsilon=0.01) if which == "batch_norm"
                 else keras.layers.LayerNormalization(epsilon=0.01))
        layer.build(shape)
        for v in layer.weights:
            v.assign(tensor(rng, v.shape, positive=True))
        variables = layer.trainable_variables
        norm = lambda v: layer(v, training=False)  # noqa: E731
    elif which == "l2":
        norm = lambda v: tf.math.l2_normalize(v, axis=[1, 2])  # noqa: E731
    else:
        def norm(v):
            mean, var = tf.nn.moments(v, axes=[0, 1])
            return tf.nn.batch_normalization(v, mean, var, 0.5, 2.0, 0.01)

    got = testing.check(data, layer_body(norm, variables), [x, w], stacked=stacked, n=n,
                  modes=testing.DRAWN_MODES[:2], atol=1e-4)
    testing.assert_rows(got, n)
