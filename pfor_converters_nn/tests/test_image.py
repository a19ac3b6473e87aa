"""Image resizing ops, their gradient ops, in_top_k and top_k against the sequential
loop, every invariance mix, with no fallback."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing

iters = st.sampled_from([0, 1, 2, 3, 2])


def images(rng, shape, dtype=tf.float32):
    return tf.constant(rng.standard_normal(shape), dtype)


def draw_images(data):
    """Per-iteration image batch shape [b, h, w, c] and an output size."""
    batch = data.draw(st.integers(0, 2), label="batch")
    in_size = [data.draw(st.integers(1, 4)) for _ in range(2)]
    channels = data.draw(st.integers(1, 2), label="channels")
    size = [data.draw(st.integers(1, 5)) for _ in range(2)]
    return [batch] + in_size + [channels], size


def raw_resize(kind, size, align_corners, half_pixel):
    """The raw resize op of ``kind``; align_corners excludes half_pixel_centers."""
    attrs = dict(align_corners=align_corners, half_pixel_centers=half_pixel)
    if kind == "area":
        attrs = dict(align_corners=align_corners)
    op = {"bilinear": tf.raw_ops.ResizeBilinear, "nearest": tf.raw_ops.ResizeNearestNeighbor,
          "bicubic": tf.raw_ops.ResizeBicubic, "area": tf.raw_ops.ResizeArea}[kind]
    return lambda x: op(images=x, size=size, **attrs)


def draw_attrs(data):
    align = data.draw(st.booleans(), label="align_corners")
    half = not align and data.draw(st.booleans(), label="half_pixel_centers")
    return align, half


@settings(max_examples=30)
@given(st.data())
def test_resize_ops(data):
    """ResizeBilinear / NearestNeighbor / Bicubic / Area with their attrs; the size is a
    constant or an invariant tensor computed in the body."""
    shape, size = draw_images(data)
    kind = data.draw(st.sampled_from(["bilinear", "nearest", "bicubic", "area"]))
    align, half = draw_attrs(data)
    dtype = data.draw(st.sampled_from([tf.float32, tf.float64]), label="dtype")
    n = data.draw(iters, label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = images(rng, [n] + shape, dtype)
    if data.draw(st.booleans(), label="size as a tensor"):
        size = tf.constant(size) * tf.constant(1)
    testing.check(data, raw_resize(kind, size, align, half), [x], stacked=[True], n=n)


METHODS = ["bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5", "gaussian",
           "mitchellcubic"]


@settings(max_examples=30)
@given(st.data())
def test_tf_image_resize_and_gradients(data):
    """tf.image.resize (every method, antialias or not; 3-D or 4-D images) and its
    gradient inside the body: ResizeBilinearGrad, ResizeNearestNeighborGrad,
    ResizeBicubicGrad, ScaleAndTranslate(Grad), with the gradient weights stacked or
    not."""
    shape, size = draw_images(data)
    if data.draw(st.booleans(), label="3-D image"):
        shape = shape[1:]
    method = data.draw(st.sampled_from(METHODS), label="method")
    antialias = data.draw(st.booleans(), label="antialias")
    n = data.draw(iters, label="n")
    stacked = [True, data.draw(st.booleans(), label="weights stacked")]
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    resize = lambda v: tf.image.resize(v, size, method=method, antialias=antialias)  # noqa: E731
    out_shape = resize(tf.zeros(shape)).shape.as_list()
    x = images(rng, [n] + shape)
    w = images(rng, [n] * stacked[1] + out_shape)

    def body(xi, wi):
        with tf.GradientTape() as tape:
            tape.watch(xi)
            y = resize(xi)
            loss = tf.reduce_sum(y * wi)
        if method == "area":  # ResizeArea has no gradient (antialias or not)
            return y
        return y, tape.gradient(loss, xi)

    testing.check(data, body, [x, w], stacked=stacked, n=n, atol=1e-4)


def grad_op(kind, align, half):
    """Raw gradient op (grads, original image) of ``kind``."""
    attrs = dict(align_corners=align, half_pixel_centers=half)
    if kind == "bilinear":
        return lambda g, x: tf.raw_ops.ResizeBilinearGrad(grads=g, original_image=x, **attrs)
    if kind == "bicubic":
        return lambda g, x: tf.raw_ops.ResizeBicubicGrad(grads=g, original_image=x, **attrs)
    scale, translation = tf.constant([0.75, 1.5]), tf.constant([0.25, -0.5])
    return lambda g, x: tf.raw_ops.ScaleAndTranslateGrad(
        grads=g, original_image=x, scale=scale, translation=translation,
        kernel_type=kind, antialias=align)


@settings(max_examples=30)
@given(st.data())
def test_resize_grad_ops(data):
    """ResizeBilinearGrad, ResizeBicubicGrad and ScaleAndTranslateGrad called directly,
    every stacked/invariant mix of gradients and original image."""
    shape, size = draw_images(data)
    kind = data.draw(st.sampled_from(["bilinear", "bicubic", "lanczos3", "triangle"]))
    align, half = draw_attrs(data)
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 2)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    grads = images(rng, [n] * stacked[0] + shape[:1] + size + shape[-1:])
    x = images(rng, [n] * stacked[1] + shape)
    testing.check(data, grad_op(kind, align, half), [grads, x], stacked=stacked, n=n, atol=1e-4)


@settings(max_examples=20)
@given(st.data())
def test_resize_nearest_grad_op(data):
    shape, size = draw_images(data)
    align, half = draw_attrs(data)
    n = data.draw(iters, label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    grads = images(rng, [n] + shape[:1] + size + shape[-1:])

    def fn(g):
        return tf.raw_ops.ResizeNearestNeighborGrad(grads=g, size=shape[1:3],
                                                    align_corners=align,
                                                    half_pixel_centers=half)

    testing.check(data, fn, [grads], stacked=[True], n=n)


def test_stacked_size_declines():
    """A per-iteration output size cannot be one op: no converter takes it (the
    shapes differ between iterations, so even the fallback refuses)."""
    x = tf.zeros([2, 1, 4, 4, 1])

    def body(i):
        return tf.image.resize(tf.gather(x, i), tf.stack([i + 1, i + 1]))

    assert [r.op_type for r in pf.explain(body, 2).fallbacks] == ["ResizeBilinear"]


def predictions(rng, shape, ties):
    """Scores; with ``ties`` drawn from few values so classes tie at the boundary."""
    if ties:
        return tf.constant(rng.integers(0, 3, shape).astype(np.float32))
    return tf.constant(rng.standard_normal(shape).astype(np.float32))


@settings(max_examples=30)
@given(st.data())
def test_in_top_k(data):
    """InTopKV2 (tf.math.in_top_k) and InTopK, predictions and/or targets stacked,
    ties and out-of-range targets included."""
    batch, classes = data.draw(st.integers(0, 3)), data.draw(st.integers(1, 4))
    k = data.draw(st.integers(0, 4), label="k")
    version = data.draw(st.sampled_from(["V2", "V1"]))
    dtype = data.draw(st.sampled_from([np.int32, np.int64])) if version == "V2" else np.int32
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 2)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    p = predictions(rng, [n] * stacked[0] + [batch, classes], data.draw(st.booleans()))
    t = tf.constant(rng.integers(0, classes + 1, [n] * stacked[1] + [batch]).astype(dtype))

    def fn(pi, ti):
        if version == "V1":
            return tf.raw_ops.InTopK(predictions=pi, targets=ti, k=k)
        return tf.math.in_top_k(ti, pi, tf.constant(k, dtype))

    testing.check(data, fn, [p, t], stacked=stacked, n=n)


@settings(max_examples=20)
@given(st.data())
def test_top_k_and_accuracy(data):
    """tf.math.top_k (math pack's TopKV2) and in_top_k used together, with gradients
    of the top values."""
    shape = [data.draw(st.integers(0, 3)), data.draw(st.integers(1, 5))]
    k = data.draw(st.integers(0, shape[1]), label="k")
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 2)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    p = predictions(rng, [n] * stacked[0] + shape, False)
    t = tf.constant(rng.integers(0, shape[1], [n] * stacked[1] + shape[:1]).astype(np.int32))

    def fn(pi, ti):
        with tf.GradientTape() as tape:
            tape.watch(pi)
            values, indices = tf.math.top_k(pi, k)
            loss = tf.reduce_sum(values * values)
        return values, indices, tape.gradient(loss, pi), tf.math.in_top_k(ti, pi, k)

    testing.check(data, fn, [p, t], stacked=stacked, n=n)


@pytest.mark.parametrize("which", ["in_top_k", "resize"])
def test_stacked_k_or_size_with_fallback_error_raises(which):
    x = tf.zeros([2, 3, 4])

    def body(i):
        if which == "in_top_k":
            return tf.math.in_top_k(tf.zeros([3], tf.int32), tf.gather(x, i), i + 1)
        return tf.image.resize(tf.gather(x, i)[None, :, :, None], tf.stack([i + 1, 2]))

    # Sizes and k must be invariant: no converter is registered for a stacked one.
    with pytest.raises(pf.ConversionError, match=r"take inputs (SU|\*\*U) .*none these"):
        pf.pfor(body, 2, fallback="error")


ADJUST = {
    "contrast": lambda x, f: tf.image.adjust_contrast(x, f),
    "hue": lambda x, f: tf.image.adjust_hue(x, f),
    "saturation": lambda x, f: tf.image.adjust_saturation(x, f),
}


@settings(max_examples=30)
@given(st.data())
def test_adjust_color(data):
    """AdjustContrastv2 / AdjustHue / AdjustSaturation: images with 0..2 leading dims
    (float32: the CPU has no float16 kernels), the factor stacked (per-example
    augmentation) or not."""
    which = data.draw(st.sampled_from(sorted(ADJUST)), label="op")
    lead = data.draw(st.lists(st.integers(0, 2), max_size=2), label="leading dims")
    shape = lead + [data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), 3]
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 2)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = tf.constant(rng.random([n] * stacked[0] + shape), tf.float32)
    low, high = (-1.0, 1.0) if which == "hue" else (0.0, 2.0)
    f = tf.constant(rng.uniform(low, high, [n] * stacked[1]), tf.float32)
    testing.check(data, ADJUST[which], [x, f], stacked=stacked, n=n, atol=1e-4)


def test_random_augmentation_per_example():
    """tf.image.random_* draw one factor per iteration under pfor (stacked factors):
    no fallback, and each row is its image adjusted by some factor in range (checked
    through the op's own invariances: hue keeps value = max channel, saturation and
    hue keep it too, contrast keeps the per-channel mean)."""
    rng = np.random.default_rng(0)
    x = tf.constant(rng.random([4, 5, 5, 3]), tf.float32)

    def body(i):
        xi = tf.gather(x, i)
        return [tf.image.random_hue(xi, 0.3), tf.image.random_saturation(xi, 0.5, 1.5),
                tf.image.random_contrast(xi, 0.5, 1.5)]

    hue, saturation, contrast = pf.pfor(body, 4, fallback="error")
    value = tf.reduce_max(x, axis=-1)
    testing.assert_allclose(tf.reduce_max(hue, axis=-1), value, atol=1e-5)
    testing.assert_allclose(tf.reduce_max(saturation, axis=-1), value, atol=1e-5)
    testing.assert_allclose(tf.reduce_mean(contrast, axis=[1, 2]),
                            tf.reduce_mean(x, axis=[1, 2]), atol=1e-5)


@settings(max_examples=20)
@given(st.data())
def test_depth_to_space_and_back(data):
    """SpaceToDepth and DepthToSpace (and their gradients, each other) in the body."""
    block = data.draw(st.integers(2, 3), label="block")
    shape = [data.draw(st.integers(0, 2))] + [block * data.draw(st.integers(1, 2))
                                              for _ in range(2)] + [data.draw(st.integers(1, 2))]
    n = data.draw(iters, label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = images(rng, [n] + shape)

    def body(xi):
        with tf.GradientTape() as tape:
            tape.watch(xi)
            deep = tf.nn.space_to_depth(xi, block)
            loss = tf.reduce_sum(deep * deep * deep)
        return deep, tf.nn.depth_to_space(deep * 2.0, block), tape.gradient(loss, xi)

    testing.check(data, body, [x], stacked=[True], n=n)
