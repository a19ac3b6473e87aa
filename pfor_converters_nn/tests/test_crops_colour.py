"""CropAndResize (and its gradient ops, called directly and through tf.GradientTape)
with per-iteration images, boxes and box indices; RGBToHSV / HSVToRGB of stacked and
ragged images: against the sequential loop, every invariance mix, with no fallback."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing

iters = st.sampled_from([0, 1, 2, 3, 3])


def draw_crop_inputs(data, rng, stacked, n):
    """(image [B, H, W, C], boxes [nb, 4], box_ind [nb]) with a leading n where stacked."""
    batch = data.draw(st.integers(1, 2), label="batch")
    height, width = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    channels = data.draw(st.integers(1, 2), label="channels")
    count = data.draw(st.integers(0, 3), label="boxes")
    image = tf.constant(rng.standard_normal([n] * stacked[0] + [batch, height, width,
                                                                channels]), tf.float32)
    # Boxes partly outside [0, 1] (extrapolated) and flipped (y2 < y1).
    boxes = tf.constant(rng.uniform(-0.2, 1.2, [n] * stacked[1] + [count, 4]), tf.float32)
    box_ind = tf.constant(rng.integers(0, batch, [n] * stacked[2] + [count]), tf.int32)
    return image, boxes, box_ind


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_crop_and_resize(data):
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 3)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    args = draw_crop_inputs(data, rng, stacked, n)
    size = [data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))]
    method = data.draw(st.sampled_from(["bilinear", "nearest"]), label="method")
    extrapolation = data.draw(st.sampled_from([0.0, -1.5]), label="extrapolation")

    def fn(image, boxes, box_ind):
        return tf.image.crop_and_resize(image, boxes, box_ind, size, method=method,
                                        extrapolation_value=extrapolation)

    testing.check(data, fn, list(args), stacked=stacked, n=n, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_crop_and_resize_gradients_in_the_body(data):
    """Per-example gradients of crops (CropAndResizeGradImage and
    CropAndResizeGradBoxes, built by TensorFlow's gradient)."""
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 3)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    args = draw_crop_inputs(data, rng, stacked, n)

    def fn(image, boxes, box_ind):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([image, boxes])
            crops = tf.image.crop_and_resize(image, boxes, box_ind, [2, 3])
            loss = tf.reduce_sum(crops * crops)
        return tape.gradient(loss, image), tape.gradient(loss, boxes)

    testing.check(data, fn, list(args), stacked=stacked, n=n, atol=1e-4, rtol=1e-4)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_crop_and_resize_grad_ops(data):
    """The gradient ops called directly, each input stacked or invariant."""
    n = data.draw(iters, label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    which = data.draw(st.sampled_from(["image", "boxes"]), label="op")
    stacked = testing.draw_stacked(data, 4)
    image, boxes, box_ind = draw_crop_inputs(data, rng, [stacked[1]] + stacked[2:], n)
    count = boxes.shape[-2]
    grads = tf.constant(rng.standard_normal([n] * stacked[0] + [count, 2, 2,
                                                                image.shape[-1]]), tf.float32)
    method = data.draw(st.sampled_from(["bilinear", "nearest"])) if which == "image" \
        else "bilinear"
    image_size = image.shape[-4:].as_list()

    def fn(g, img, b, ind):
        if which == "image":
            return tf.raw_ops.CropAndResizeGradImage(grads=g, boxes=b, box_ind=ind,
                                                     image_size=image_size, T=tf.float32,
                                                     method=method)
        return tf.raw_ops.CropAndResizeGradBoxes(grads=g, image=img, boxes=b, box_ind=ind)

    testing.check(data, fn, [grads, image, boxes, box_ind], stacked=stacked, n=n,
                  atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("bad", [-1, 2])
def test_box_index_out_of_its_iterations_batch_fails_like_the_loop(bad):
    """An index valid for the folded batch but not for its own iteration's images (the
    kernel raises OutOfRangeError, pfor's check InvalidArgumentError)."""
    images = tf.zeros([2, 2, 3, 3, 1])
    box_ind = tf.constant([[0, 1], [1, bad]])
    boxes = tf.constant([[0.0, 0.0, 1.0, 1.0]] * 2)
    testing.assert_fails_like_loop(lambda i: tf.image.crop_and_resize(
        images[i], boxes, box_ind[i], [2, 2]), 2, error=tf.errors.OpError,
        match="box_ind|box_index")


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_colour_space_round_trip(data):
    """rgb_to_hsv and hsv_to_rgb of images with 0..2 leading dims, float32 or float64."""
    lead = data.draw(st.lists(st.integers(0, 2), max_size=2), label="leading dims")
    n = data.draw(iters, label="n")
    dtype = data.draw(st.sampled_from([tf.float32, tf.float64]), label="dtype")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = tf.constant(rng.random([n] + lead + [2, 3]), dtype)
    testing.check(data, lambda v: (tf.image.rgb_to_hsv(v), tf.image.hsv_to_rgb(v)), [x],
                  stacked=[True], n=n)


def test_colour_space_of_ragged_images():
    """Images of per-iteration widths (a ragged value) convert on the padding."""
    x = tf.constant(np.random.default_rng(0).random([3, 4, 3]), tf.float32)
    widths = tf.constant([4, 0, 2])

    def loop_fn(i):
        image = x[i, :widths[i]]
        return tf.reduce_sum(tf.image.hsv_to_rgb(tf.image.rgb_to_hsv(image)), axis=0)

    testing.assert_matches_loop(loop_fn, 3, graph=True)


@pytest.mark.parametrize("which", ["image", "boxes"])
def test_crop_and_resize_grad_ops_every_invariance_mix(which):
    rng = np.random.default_rng(5)
    n = 2
    images = tf.constant(rng.standard_normal([n, 2, 3, 4, 1]), tf.float32)
    boxes = tf.constant(rng.uniform(-0.2, 1.2, [n, 3, 4]), tf.float32)
    box_ind = tf.constant(rng.integers(0, 2, [n, 3]), tf.int32)
    grads = tf.constant(rng.standard_normal([n, 3, 2, 2, 1]), tf.float32)

    def fn(g, img, b, ind):
        if which == "image":
            return tf.raw_ops.CropAndResizeGradImage(grads=g, boxes=b, box_ind=ind,
                                                     image_size=[2, 3, 4, 1], T=tf.float32)
        return tf.raw_ops.CropAndResizeGradBoxes(grads=g, image=img, boxes=b, box_ind=ind)

    full = [grads, images, boxes, box_ind]
    for combo in testing.invariance_combinations(4):
        args = [a if s else a[0] for a, s in zip(full, combo)]
        testing.check_op(fn, args, stacked=list(combo), n=n, atol=1e-4, rtol=1e-4)
