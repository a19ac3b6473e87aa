"""tf.image.extract_patches (ExtractImagePatches) and ExtractVolumePatches of stacked
images, and per-example gradients through extract_patches, against the sequential
loop with no fallback."""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing

iters = st.sampled_from([0, 1, 2, 3, 3])


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_extract_image_patches_and_gradient(data):
    # An empty image batch (0 images per iteration) is left out: the gradient's
    # UnsortedSegmentSum of an empty slice does not convert (see the report).
    batch = data.draw(st.integers(1, 2), label="batch")
    sizes = [1, data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), 1]
    strides = [1, data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)), 1]
    rates = [1, data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)), 1]
    # At least the dilated patch's size (VALID has no patch otherwise).
    height, width = [(sizes[k] - 1) * rates[k] + data.draw(st.integers(1, 3)) for k in (1, 2)]
    padding = data.draw(st.sampled_from(["SAME", "VALID"]), label="padding")
    n = data.draw(iters, label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = tf.constant(rng.standard_normal([n, batch, height, width, 2]), tf.float32)
    weights = rng.standard_normal([n])

    def fn(image, w):
        with tf.GradientTape() as tape:
            tape.watch(image)
            patches = tf.image.extract_patches(image, sizes, strides, rates, padding)
            loss = tf.reduce_sum(patches * patches) * tf.cast(w, tf.float32)
        return patches, tape.gradient(loss, image)

    got = testing.check(data, fn, [x, tf.constant(weights)], stacked=[True, True], n=n,
                        atol=1e-4)
    testing.assert_rows(got, n)


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_extract_volume_patches(data):
    ksizes = [1] + [data.draw(st.integers(1, 2)) for _ in range(3)] + [1]
    shape = [data.draw(st.integers(0, 2))] + [ksizes[k] - 1 + data.draw(st.integers(1, 2))
                                              for k in (1, 2, 3)] + [1]
    padding = data.draw(st.sampled_from(["SAME", "VALID"]), label="padding")
    n = data.draw(iters, label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = tf.constant(rng.standard_normal([n] + shape), tf.float32)

    def fn(v):
        return tf.raw_ops.ExtractVolumePatches(input=v, ksizes=ksizes, strides=[1, 1, 2, 1, 1],
                                               padding=padding)

    # Not with unknown input dimensions: TF's shape function then gives the op a rank-4
    # result (a TensorFlow bug), and pfor declines.
    got = testing.check(data, fn, [x], stacked=[True], n=n, modes=("eager", "graph"))
    testing.assert_rows(got, n)
