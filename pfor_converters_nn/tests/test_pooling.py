"""Pooling and pooling-gradient ops against the sequential loop, every invariance mix."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from pfor_core import testing

iters = st.sampled_from([0, 1, 2, 3, 2])


def draw_pool(data):
    """A pooling configuration: spatial rank, window, strides, padding, input shape."""
    spatial = data.draw(st.sampled_from([2, 2, 3]), label="spatial")
    window = data.draw(st.integers(1, 2), label="window")
    stride = data.draw(st.integers(1, 2), label="stride")
    padding = data.draw(st.sampled_from(["SAME", "VALID"]), label="padding")
    low = window if padding == "VALID" else 1
    sizes = [data.draw(st.integers(low, 4)) for _ in range(spatial)]
    batch = data.draw(st.integers(0, 2), label="batch")
    channels = data.draw(st.integers(1, 2), label="channels")
    return spatial, window, stride, padding, [batch] + sizes + [channels]


def pool_fn(kind, spatial, window, stride, padding):
    ksize = [1] + [window] * spatial + [1]
    strides = [1] + [stride] * spatial + [1]
    if kind == "v2":
        return lambda v: tf.raw_ops.MaxPoolV2(input=v, ksize=tf.constant(ksize),
                                              strides=tf.constant(strides), padding=padding)
    pool = {(2, "max"): tf.nn.max_pool2d, (2, "avg"): tf.nn.avg_pool2d,
            (3, "max"): tf.nn.max_pool3d, (3, "avg"): tf.nn.avg_pool3d}[spatial, kind]
    return lambda v: pool(v, ksize, strides, padding)


def draw_kind(data, spatial):
    kinds = ["max", "avg"] + (["v2"] if spatial == 2 else [])
    return data.draw(st.sampled_from(kinds), label="kind")


@settings(max_examples=25)
@given(st.data())
def test_pooling_forward(data):
    spatial, window, stride, padding, shape = draw_pool(data)
    kind = draw_kind(data, spatial)
    n = data.draw(iters, label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = tf.constant(rng.standard_normal([n] + shape), tf.float32)
    testing.check(data, pool_fn(kind, spatial, window, stride, padding), [x], stacked=[True], n=n)


@settings(max_examples=25)
@given(st.data())
def test_pooling_gradients_in_body(data):
    """First and second derivatives of pooling taken inside the body (MaxPoolGrad,
    AvgPoolGrad, MaxPoolGradGrad and their 3-D forms), weights stacked or not."""
    spatial, window, stride, padding, shape = draw_pool(data)
    kind = draw_kind(data, spatial)
    if spatial == 3 and kind == "max":
        shape[0] = max(shape[0], 1)  # MaxPool3DGradGrad rejects an empty batch
    pool = pool_fn(kind, spatial, window, stride, padding)
    n = data.draw(iters, label="n")
    stacked = [True] + [data.draw(st.booleans()) for _ in range(2)]
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    out_shape = pool(tf.zeros(shape)).shape.as_list()
    x = tf.constant(rng.standard_normal([n] + shape), tf.float32)
    w = tf.constant(rng.standard_normal([n] * stacked[1] + out_shape), tf.float32)
    u = tf.constant(rng.standard_normal([n] * stacked[2] + shape), tf.float32)

    def body(xi, wi, ui):
        with tf.GradientTape() as outer:
            outer.watch(wi)
            with tf.GradientTape() as inner:
                inner.watch(xi)
                loss = tf.reduce_sum(pool(xi) * wi)
            grad = inner.gradient(loss, xi)
            second = tf.reduce_sum(grad * ui)
        return grad, outer.gradient(second, wi)

    # Not with unknown input shapes: there plain TensorFlow's second derivative of a
    # max pool inside a tf.function is already wrong (zero), loop or no loop.
    testing.check(data, body, [x, w, u], stacked=stacked, n=n, modes=testing.DRAWN_MODES[:2])


def rows(rng, n, shape, stacked):
    return tf.constant(rng.standard_normal([n] * stacked + shape), tf.float32)


@settings(max_examples=30)
@given(st.data())
def test_max_pool_grad_ops(data):
    """MaxPoolGrad(V2), MaxPoolGradGrad(V2), MaxPool3DGrad(Grad) called directly, every
    stacked/invariant mix of their three tensor inputs."""
    spatial, window, stride, padding, shape = draw_pool(data)
    second = data.draw(st.booleans(), label="grad of grad")
    v2 = spatial == 2 and data.draw(st.booleans(), label="v2")
    if spatial == 3 and second:
        shape[0] = max(shape[0], 1)  # MaxPool3DGradGrad rejects an empty batch
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 3)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    ksize = [1] + [window] * spatial + [1]
    strides = [1] + [stride] * spatial + [1]
    pool = tf.nn.max_pool2d if spatial == 2 else tf.nn.max_pool3d
    x = rows(rng, n, shape, stacked[0])
    # The forward output of x's rows (of its first row when invariant), so that the
    # kernels see consistent maxima where the invariance allows.
    y = pool(tf.reshape(x, [-1] + shape[1:]), ksize, strides, padding)
    out_shape = shape[:1] + y.shape.as_list()[1:]
    y = tf.reshape(y, [n] * stacked[0] + out_shape)
    if stacked[1] != stacked[0]:
        y = rows(rng, n, out_shape, stacked[1])
    if second and out_shape == shape and not stacked[2]:
        # Known TF 2.21 kernel bug: MaxPool(3D)GradGrad forwards a temporary `grad` buffer
        # to its output and zeroes it before reading it when the pooling keeps the shape
        # (stride 1, SAME), so an invariant grad, which pfor tiles into a temporary,
        # reads as zeros (a loop whose grad is a temporary gets zeros too).
        stacked[2] = True
    g = rows(rng, n, shape if second else out_shape, stacked[2])
    name = ("MaxPool" if spatial == 2 else "MaxPool3D") + ("GradGrad" if second else "Grad")
    if v2:
        name += "V2"
        ksize, strides = tf.constant(ksize), tf.constant(strides)
    op = getattr(tf.raw_ops, name)

    def fn(a, b, c):
        return op(orig_input=a, orig_output=b, grad=c, ksize=ksize, strides=strides,
                  padding=padding)

    testing.check(data, fn, [x, y, g], stacked=stacked, n=n)


@settings(max_examples=20)
@given(st.data())
def test_avg_pool_grad_ops(data):
    """AvgPoolGrad and AvgPool3DGrad: the forward input's shape is invariant."""
    spatial, window, stride, padding, shape = draw_pool(data)
    n = data.draw(iters, label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    ksize = [1] + [window] * spatial + [1]
    strides = [1] + [stride] * spatial + [1]
    pool = tf.nn.avg_pool2d if spatial == 2 else tf.nn.avg_pool3d
    out_shape = pool(tf.zeros(shape), ksize, strides, padding).shape.as_list()
    g = rows(rng, n, out_shape, True)
    op = tf.raw_ops.AvgPoolGrad if spatial == 2 else tf.raw_ops.AvgPool3DGrad

    def fn(c):
        return op(orig_input_shape=tf.constant(shape), grad=c, ksize=ksize, strides=strides,
                  padding=padding)

    testing.check(data, fn, [g], stacked=[True], n=n)


@settings(max_examples=25)
@given(st.data())
def test_max_pool_with_argmax(data):
    """MaxPoolWithArgmax (indices with or without the batch entry) and
    MaxPoolGradWithArgmax with every invariance mix of input, gradient and argmax."""
    _, window, stride, padding, shape = draw_pool(data)
    shape = [max(shape[0], 1)] + shape[1:3] + shape[-1:]  # 2-D only; no empty batch
    with_batch = data.draw(st.booleans(), label="include_batch_in_index")
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 3)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    attrs = dict(ksize=[1, window, window, 1], strides=[1, stride, stride, 1],
                 padding=padding, include_batch_in_index=with_batch)
    x = rows(rng, n, shape, stacked[0])
    out_shape = tf.nn.max_pool2d(tf.zeros(shape), window, stride, padding).shape.as_list()
    g = rows(rng, n, out_shape, stacked[1])
    # Valid argmax values: those of x's rows (or of random inputs of the same shape).
    source = x if stacked[0] == stacked[2] else rows(rng, n, shape, stacked[2])
    folded = tf.reshape(source, [-1] + shape[1:])
    if folded.shape[0]:
        _, argmax = tf.raw_ops.MaxPoolWithArgmax(input=folded, **attrs)
    else:  # the kernel rejects an empty batch
        argmax = tf.zeros([0] + out_shape[1:], tf.int64)
    if with_batch and stacked[2]:  # indices of each row's own batch
        size = int(np.prod(shape))
        offsets = tf.range(n, dtype=tf.int64)[:, None] * size
        argmax = tf.reshape(tf.reshape(argmax, [n, -1]) - offsets, [n] + out_shape)
    argmax = tf.reshape(argmax, [n] * stacked[2] + out_shape)

    def fn(a, b, c):
        forward = tf.raw_ops.MaxPoolWithArgmax(input=a, **attrs)
        grad = tf.raw_ops.MaxPoolGradWithArgmax(input=a, grad=b, argmax=c, **attrs)
        return list(forward) + [grad]

    testing.check(data, fn, [x, g, argmax], stacked=stacked, n=n)


@given(st.data())
@settings(max_examples=6)
def test_max_pool_grad_with_argmax_rejects_an_index_outside_its_input(data):
    """The kernel aborts the process on an argmax outside the input (so this compares
    with no loop); folded with a per-iteration offset, such an index of one iteration
    would land in another's input. pfor checks it and fails cleanly instead."""
    import pytest

    import pfor_core as pf

    include_batch = data.draw(st.booleans(), label="include_batch_in_index")
    n = data.draw(st.integers(1, 3), label="n")
    size = 2 * 4 * 4 if include_batch else 4 * 4  # what one index may address
    bad = data.draw(st.sampled_from([size, size + 3, -1]), label="bad")
    images = tf.reshape(tf.range(n * 2 * 4 * 4, dtype=tf.float32), [n, 2, 4, 4, 1])
    attrs = dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID",
                 include_batch_in_index=include_batch)

    @tf.function(autograph=False)
    def run(argmax_value):
        def loop_fn(i):
            argmax = tf.fill([2, 2, 2, 1], argmax_value + tf.cast(i, tf.int64) * 0)
            return tf.raw_ops.MaxPoolGradWithArgmax(
                input=tf.gather(images, i), grad=tf.ones([2, 2, 2, 1]), argmax=argmax,
                **attrs)
        return pf.pfor(loop_fn, n, fallback="error")

    with pytest.raises(tf.errors.InvalidArgumentError, match="argmax holds an index"):
        run(tf.constant(bad, tf.int64))
    run(tf.constant(size - 1, tf.int64))  # the last valid index passes


@pytest.mark.parametrize("spatial", [2, 3])
def test_max_pool_grad_grad_keeps_an_invariant_gradient(spatial):
    """Regression: with stride 1 and SAME padding the CPU MaxPoolGradGrad kernel may
    take over the folded (tiled) gradient's buffer and zero it before reading it."""
    rng = np.random.default_rng(0)
    shape = [1] + [2] * spatial + [1]
    x = tf.constant(rng.standard_normal([3] + shape), tf.float32)
    u = tf.constant(rng.standard_normal(shape), tf.float32)
    pool = pool_fn("max", spatial, 1, 1, "SAME")
    raw = {2: tf.raw_ops.MaxPoolGradGrad, 3: tf.raw_ops.MaxPool3DGradGrad}[spatial]
    ones = [1] * (spatial + 2)

    def op(xi, ui):
        return raw(orig_input=xi, orig_output=pool(xi), grad=ui, ksize=ones, strides=ones,
                   padding="SAME")

    for mode in ("eager", "graph"):
        testing.check_op(op, [x, u], stacked=[True, False], n=3, mode=mode)
