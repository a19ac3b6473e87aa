"""SpaceToBatchND / BatchToSpaceND against the sequential loop (block shapes, paddings,
crops, spatial and remaining dims drawn), and the dilated convolutions that emit them."""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from pfor_core import testing

iters = st.sampled_from([0, 1, 2, 3, 2])


@st.composite
def layouts(draw):
    """block_shape, paddings (each padded size a multiple of its block), input shape."""
    spatial = draw(st.integers(1, 2), label="spatial dims")
    block = [draw(st.integers(1, 3)) for _ in range(spatial)]
    paddings, sizes = [], []
    for b in block:
        before, after = draw(st.integers(0, 2)), draw(st.integers(0, 2))
        size = b * draw(st.integers(1, 2)) - before - after
        if size < 0:
            before, after, size = 0, 0, b
        paddings.append([before, after])
        sizes.append(size)
    rest = draw(st.lists(st.integers(1, 2), max_size=1), label="remaining dims")
    batch = draw(st.integers(0, 2), label="batch")
    return block, paddings, [batch] + sizes + rest


@settings(max_examples=40)
@given(st.data())
def test_space_to_batch_and_back(data):
    """Both ops directly: SpaceToBatchND of the input, BatchToSpaceND of a tensor of
    the shape it returns, crops equal to the paddings or none."""
    block, paddings, shape = data.draw(layouts())
    n = data.draw(iters, label="n")
    crop = data.draw(st.booleans(), label="crop")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = tf.constant(rng.standard_normal([n] + shape), tf.float32)
    out_shape = tf.space_to_batch_nd(tf.zeros(shape), block, paddings).shape.as_list()
    y = tf.constant(rng.standard_normal([n] + out_shape), tf.float32)
    crops = paddings if crop else [[0, 0]] * len(block)

    def fn(xi, yi):
        return (tf.space_to_batch_nd(xi, block, paddings),
                tf.batch_to_space(yi, block, crops))

    got = testing.check(data, fn, [x, y], stacked=[True, True], n=n)
    testing.assert_rows(got, n)


@settings(max_examples=25)
@given(st.data())
def test_dilated_convolution_gradients(data):
    """tf.nn.convolution with dilation_rate (SpaceToBatchND, conv, BatchToSpaceND) and
    its gradients inside the body; filter stacked or not."""
    spatial = data.draw(st.integers(1, 2), label="spatial dims")
    dilation = data.draw(st.integers(2, 3), label="dilation")
    padding = data.draw(st.sampled_from(["SAME", "VALID"]), label="padding")
    kernel = data.draw(st.integers(1, 2), label="kernel")
    size = data.draw(st.integers((kernel - 1) * dilation + 1, 7), label="size")
    shape = [data.draw(st.integers(1, 2))] + [size] * spatial + [data.draw(st.integers(1, 2))]
    cout = data.draw(st.integers(1, 2), label="cout")
    n = data.draw(iters, label="n")
    stacked = [True, data.draw(st.booleans(), label="filter stacked")]
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = tf.constant(rng.standard_normal([n] + shape), tf.float32)
    f = tf.constant(rng.standard_normal([n] * stacked[1] + [kernel] * spatial
                                        + [shape[-1], cout]), tf.float32)

    def body(xi, fi):
        with tf.GradientTape() as tape:
            tape.watch([xi, fi])
            y = tf.nn.convolution(xi, fi, padding=padding, dilations=dilation)
            loss = tf.reduce_sum(y * y)
        return [y] + tape.gradient(loss, [xi, fi])

    # Not with unknown input shapes: tf.nn.convolution's dilation path itself needs
    # static shapes to be traced.
    got = testing.check(data, body, [x, f], stacked=stacked, n=n, modes=testing.DRAWN_MODES[:2], rtol=1e-4,
                  atol=1e-4)
    testing.assert_rows(got, n)
