"""Grammar elements for tf.nn: convolutions, pooling, activations, softmax,
normalization, losses and image ops. Each iteration's images are ``[batch, h, w, c]``
(NHWC, what the CPU kernels take)."""

from __future__ import annotations

import tensorflow as tf
from hypothesis import strategies as st

from fuzz_grammar import FLOATS, NUMERIC, Op


def _images(b, rank=4, dtypes=FLOATS, where=None):
    def shape():
        spatial = tuple(b.draw(st.integers(1, 4)) for _ in range(rank - 2))
        return (b.draw(st.integers(1, 2)),) + spatial + (b.draw(st.integers(1, 3)),)
    return b.operand(dtypes, rank=rank, fresh_shape=shape, where=where)


def _window(b, spatial):
    """Kernel size, stride and padding that fit the spatial dims."""
    k = b.draw(st.integers(1, 3))
    padding = b.draw(st.sampled_from(["SAME", "VALID"]))
    if padding == "VALID" and min(spatial) < k:
        padding = "SAME"
    return k, b.draw(st.integers(1, 2)), padding


def _weights(b, dtype, shape):
    return b.operand((dtype,), where=lambda v: v.shape == shape, fresh_shape=lambda: shape)


def conv2d(b):
    x = _images(b)
    if x is None:
        return None
    k, stride, padding = _window(b, x.shape[1:3])
    dilation = b.draw(st.integers(1, 2)) if stride == 1 and padding == "SAME" else 1
    f = _weights(b, x.dtype, (k, k, x.shape[3], b.draw(st.integers(1, 3))))
    if f is None:
        return None
    return b.emit("conv2d", f"tf.nn.conv2d({{0}}, {{1}}, strides={stride}, "
                  f"padding={padding!r}, dilations={dilation})", [x, f])


def depthwise_conv2d(b):
    x = _images(b)
    if x is None:
        return None
    k, stride, padding = _window(b, x.shape[1:3])
    f = _weights(b, x.dtype, (k, k, x.shape[3], b.draw(st.integers(1, 2))))
    if f is None:
        return None
    return b.emit("depthwise_conv2d", f"tf.nn.depthwise_conv2d({{0}}, {{1}}, "
                  f"strides=[1, {stride}, {stride}, 1], padding={padding!r})", [x, f])


def conv1d(b):
    x = _images(b, rank=3)
    if x is None:
        return None
    k, stride, padding = _window(b, x.shape[1:2])
    f = _weights(b, x.dtype, (k, x.shape[2], b.draw(st.integers(1, 3))))
    if f is None:
        return None
    return b.emit("conv1d", f"tf.nn.conv1d({{0}}, {{1}}, stride={stride}, padding={padding!r})",
                  [x, f])


def conv2d_transpose(b):
    x = _images(b)
    if x is None:
        return None
    k, stride, padding = _window(b, x.shape[1:3])
    out_c = b.draw(st.integers(1, 2))
    f = _weights(b, x.dtype, (k, k, out_c, x.shape[3]))
    if f is None:
        return None
    size = [d * stride if padding == "SAME" else (d - 1) * stride + k for d in x.shape[1:3]]
    shape = [x.shape[0]] + size + [out_c]
    # Per-iteration images and filters in float64: no grouped kernel on CPU (own feature).
    feature = ("conv2d_transpose_stacked_float64"
               if x.varying and f.varying and x.dtype == tf.float64 else "conv2d_transpose")
    return b.emit(feature, f"tf.nn.conv2d_transpose({{0}}, {{1}}, {shape}, "
                  f"strides={stride}, padding={padding!r})", [x, f])


def pool(feature, fn):
    def make(b):
        x = _images(b)
        if x is None:
            return None
        k, stride, padding = _window(b, x.shape[1:3])
        return b.emit(feature, f"tf.nn.{fn}({{0}}, ksize={k}, strides={stride}, "
                      f"padding={padding!r})", [x], exact=fn == "max_pool2d")
    return Op(feature, make)


# Activations whose converter looks for a folded op before them (unfolded.py).
AFTER_FOLDS = ("relu", "relu6", "elu", "selu", "leaky_relu", "softplus", "softsign")


def _after_fold(feature, a):
    """Such an op applied straight to a per-iteration input gets its own feature: the
    gathered rows may be the captured eager tensor itself (once a bug, see fuzz_grammar)."""
    return "activation_of_input_row" if a.origin == "row" else feature


def activation(feature, template, *, exact=False, dtypes=FLOATS, converted=True):
    def make(b):
        a = b.operand(dtypes, min_dim=0, dynamic=True)
        if a is None:
            return None
        if feature in AFTER_FOLDS:
            feature_here = _after_fold(feature, a)
            if not b.allowed(feature_here):
                return None
        else:
            feature_here = feature
        return b.emit(feature_here, template, [a], exact=exact, converted=converted)
    return Op(feature, make, converted)


def along_axis(feature, template):
    def make(b):
        a = b.operand(FLOATS, min_rank=1, min_dim=0, dynamic=True)
        if a is None:
            return None
        axis = b.draw(st.integers(-a.rank, a.rank - 1))
        return b.emit(feature, template.replace("AXIS", str(axis)), [a])
    return Op(feature, make)


def moments(b):
    a = b.operand(FLOATS, min_rank=1)
    if a is None:
        return None
    axes = b.draw(st.lists(st.integers(0, a.rank - 1), min_size=1, unique=True))
    return b.emit("moments", f"tf.nn.moments({{0}}, axes={sorted(axes)})"
                  f"[{b.draw(st.integers(0, 1))}]", [a])


def bias_add(b):
    x = b.operand(NUMERIC, min_rank=2)
    if x is None:
        return None
    bias = _weights(b, x.dtype, x.shape[-1:])
    feature = _after_fold("bias_add", x)
    if bias is None or not b.allowed(feature):
        return None
    return b.emit(feature, "tf.nn.bias_add({0}, {1})", [x, bias], exact=True)


def fused_batch_norm(b):
    x = _images(b, dtypes=(tf.float32,))
    if x is None:
        return None
    scale = _weights(b, tf.float32, x.shape[-1:])
    offset = _weights(b, tf.float32, x.shape[-1:])
    if scale is None or offset is None:
        return None
    return b.emit("fused_batch_norm", "tf.compat.v1.nn.fused_batch_norm({0}, {1}, {2}, "
                  "is_training=True)[0]", [x, scale, offset])


def _logits(b):
    return b.operand(FLOATS, min_rank=1, max_rank=2)


def softmax_xent(b):
    logits = _logits(b)
    if logits is None:
        return None
    labels = _weights(b, logits.dtype, logits.shape)
    if labels is None:
        return None
    return b.emit("softmax_xent", "tf.nn.softmax_cross_entropy_with_logits("
                  "labels=tf.nn.softmax({1}), logits={0})", [logits, labels])


def sparse_xent(b):
    logits = b.operand(FLOATS, rank=2)
    if logits is None:
        return None
    labels = b.fresh(tf.int32, logits.shape[:1], low=0, high=logits.shape[1] - 1)
    return b.emit("sparse_xent", "tf.nn.sparse_softmax_cross_entropy_with_logits("
                  "labels={1}, logits={0})", [logits, labels])


def sigmoid_xent(b):
    logits = b.operand(FLOATS, min_dim=0)
    if logits is None:
        return None
    labels = _weights(b, logits.dtype, logits.shape)
    if labels is None:
        return None
    return b.emit("sigmoid_xent", "tf.nn.sigmoid_cross_entropy_with_logits("
                  "labels=tf.sigmoid({1}), logits={0})", [logits, labels])


def in_top_k(b):
    predictions = b.operand((tf.float32,), rank=2, exact=True)
    if predictions is None:
        return None
    targets = b.fresh(tf.int32, predictions.shape[:1], low=0, high=predictions.shape[1] - 1)
    k = b.draw(st.integers(1, predictions.shape[1]))
    return b.emit("in_top_k", f"tf.cast(tf.math.in_top_k({{1}}, {{0}}, {k}), tf.int32)",
                  [predictions, targets], exact=True)


def lrn(b):
    x = _images(b, dtypes=(tf.float32,))
    if x is None:
        return None
    return b.emit("lrn", f"tf.nn.local_response_normalization({{0}}, "
                  f"depth_radius={b.draw(st.integers(0, 2))})", [x])


def resize(b):
    x = b.operand(FLOATS, min_rank=3, max_rank=4)
    if x is None:
        return None
    size = [b.draw(st.integers(1, 4)), b.draw(st.integers(1, 4))]
    method = b.draw(st.sampled_from(["bilinear", "nearest", "bicubic", "area"]))
    return b.emit("resize", f"tf.image.resize({{0}}, {size}, method={method!r})", [x])


def space_to_depth(b):
    x = _images(b, dtypes=NUMERIC,
                where=lambda v: v.shape[1] % 2 == 0 and v.shape[2] % 2 == 0)
    if x is None:
        return None
    return b.emit("space_to_depth", "tf.nn.space_to_depth({0}, 2)", [x], exact=True)


def depth_to_space(b):
    x = _images(b, dtypes=NUMERIC, where=lambda v: v.shape[3] % 4 == 0)
    if x is None:
        return None
    return b.emit("depth_to_space", "tf.nn.depth_to_space({0}, 2)", [x], exact=True)


NN = [
    Op("conv2d", conv2d), Op("depthwise_conv2d", depthwise_conv2d), Op("conv1d", conv1d),
    Op("conv2d_transpose", conv2d_transpose),
    pool("max_pool", "max_pool2d"), pool("avg_pool", "avg_pool2d"),
    activation("relu", "tf.nn.relu({0})", exact=True, dtypes=NUMERIC),
    activation("relu6", "tf.nn.relu6({0})", exact=True),
    activation("elu", "tf.nn.elu({0})"),
    activation("selu", "tf.nn.selu({0})"),
    activation("leaky_relu", "tf.nn.leaky_relu({0}, alpha=0.25)", exact=True),
    activation("gelu", "tf.nn.gelu({0})"),
    activation("softsign", "tf.nn.softsign({0})"),
    activation("softplus", "tf.nn.softplus({0})"),
    activation("silu", "tf.nn.silu({0})"),
    activation("log_sigmoid", "tf.math.log_sigmoid({0})"),
    along_axis("softmax", "tf.nn.softmax({0}, axis=AXIS)"),
    along_axis("log_softmax", "tf.nn.log_softmax({0}, axis=AXIS)"),
    along_axis("l2_normalize", "tf.math.l2_normalize({0}, axis=AXIS)"),
    Op("moments", moments), Op("bias_add", bias_add),
    Op("fused_batch_norm", fused_batch_norm),
    Op("softmax_xent", softmax_xent), Op("sparse_xent", sparse_xent),
    Op("sigmoid_xent", sigmoid_xent), Op("in_top_k", in_top_k),
    activation("l2_loss", "tf.nn.l2_loss({0})"),
    activation("fake_quant", "tf.quantization.fake_quant_with_min_max_args({0})",
               dtypes=(tf.float32,), converted=False),  # FakeQuantWithMinMaxArgs: no converter
    Op("lrn", lrn), Op("resize", resize),
    Op("space_to_depth", space_to_depth), Op("depth_to_space", depth_to_space),
]
