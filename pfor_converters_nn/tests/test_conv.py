"""Convolutions and their gradient kernels against the sequential loop: every
invariance mix of input / filter / out_backprop, strides, dilations, padding; and the
per-example filter gradients as patches (conv_grad.py) with no fallback: strides,
dilations, SAME / VALID / EXPLICIT padding, several images per iteration, eagerly and
under XLA, the grouped kernel still taking what they decline."""


import numpy as np
import pytest
import tensorflow as tf
from hypothesis import assume, given
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing

TOL = dict(rtol=1e-4, atol=1e-4)


def _runs(fn) -> bool:
    try:
        fn()
    except tf.errors.OpError:
        return False
    return True


# The CPU's gradient kernels have groups and dilations only with oneDNN, which
# TF_ENABLE_ONEDNN_OPTS=0 turns off and which does not serve every CPU: ask a kernel.
ONEDNN = _runs(lambda: tf.raw_ops.Conv2DBackpropInput(
    input_sizes=[1, 1, 1, 2], filter=tf.zeros([1, 1, 1, 2]), out_backprop=tf.zeros([1, 1, 1, 2]),
    strides=[1] * 4, padding="VALID"))
FORWARD = ("Conv2D", "Conv1D", "Conv3D", "DepthwiseConv2dNative")
GRADS = ("Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3DBackpropInputV2",
         "Conv3DBackpropFilterV2", "DepthwiseConv2dNativeBackpropInput",
         "DepthwiseConv2dNativeBackpropFilter")


@st.composite
def conv_setups(draw, kinds):
    """An op kind, per-iteration input and filter shapes and attrs the CPU kernels run."""
    kind = draw(st.sampled_from(kinds))
    rank = 3 if "3D" in kind else 1 if kind == "Conv1D" else 2
    depthwise = kind.startswith("Depthwise")
    # No empty batch: TensorFlow's eager conv kernels return an empty batch with the
    # input's spatial shape (tf.nn.conv2d(zeros([0, 3, 3, 1]), f, 2, "SAME") is
    # [0, 3, 3, 1] eagerly, [0, 2, 2, 1] in a graph), so the loop reference is wrong.
    batch = draw(st.integers(1, 2))
    spatial = [draw(st.integers(3, 6)) for _ in range(rank)]
    kernel = [draw(st.integers(1, 3)) for _ in range(rank)]
    cin, cout = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = draw(st.integers(1, 2))
    # CPU kernels: no dilation with strides, none for Conv3D / depthwise, none in the
    # gradient kernels without oneDNN.
    no_dilation = stride > 1 or rank == 3 or depthwise or not ONEDNN
    dilation = 1 if no_dilation else draw(st.integers(1, 2))
    padding = draw(st.sampled_from(["SAME", "VALID", "EXPLICIT"] if rank == 2 else
                                   ["SAME", "VALID"]))
    if padding == "EXPLICIT":
        dilation = 1  # the generic CPU kernels (EXPLICIT) have no dilation
        padding = [[0, 0]] + [[draw(st.integers(0, 2)), draw(st.integers(0, 2))]
                              for _ in range(rank)] + [[0, 0]]
    # Every spatial dim at least the dilated kernel, so VALID has an output.
    spatial = [max(s, (k - 1) * dilation + 1) for s, k in zip(spatial, kernel)]
    # Feature groups (Keras' groups=G): Conv2D only; the CPU computes grouped gradients
    # only with oneDNN, which has no EXPLICIT padding.
    groups = 1
    if (kind.startswith("Conv2D") and ONEDNN
            and (kind == "Conv2D" or not isinstance(padding, list))):
        groups = draw(st.sampled_from([1, 1, 2, 3]))
    return dict(kind=kind, x=[batch] + spatial + [groups * cin],
                f=kernel + [cin, groups * cout], stride=stride, dilation=dilation,
                padding=padding)


def forward(kind, stride, dilation, padding):
    flat = [p for pair in padding for p in pair] if isinstance(padding, list) else []
    pad = "EXPLICIT" if flat else padding
    if kind == "Conv1D":
        return lambda x, f: tf.nn.conv1d(x, f, stride, padding, dilations=dilation)
    if kind == "Conv3D":
        return lambda x, f: tf.nn.conv3d(x, f, [1, stride, stride, stride, 1], padding)
    if kind == "Conv2D":
        return lambda x, f: tf.nn.conv2d(x, f, stride, padding, dilations=dilation)
    return lambda x, f: tf.raw_ops.DepthwiseConv2dNative(
        input=x, filter=f, strides=[1, stride, stride, 1], padding=pad,
        explicit_paddings=flat)


def backprop(kind, setup, out_shape):
    """The gradient kernel as a function of (input or filter, out_backprop)."""
    rank = len(setup["x"])
    strides = [1] + [setup["stride"]] * (rank - 2) + [1]
    dil = [1] + [setup["dilation"]] * (rank - 2) + [1]
    padding = setup["padding"]
    flat = [p for pair in padding for p in pair] if isinstance(padding, list) else []
    attrs = dict(strides=strides, padding="EXPLICIT" if flat else padding)
    if kind.startswith("Conv2D") or kind.startswith("Depthwise"):
        attrs.update(dilations=dil, explicit_paddings=flat)
    op = getattr(tf.raw_ops, kind)
    if "Input" in kind:
        return lambda f, dy: op(input_sizes=setup["x"], filter=f, out_backprop=dy, **attrs)
    return lambda x, dy: op(input=x, filter_sizes=setup["f"], out_backprop=dy, **attrs)


def values(rng, n, shape, stacked):
    return tf.constant(rng.standard_normal(([n] if stacked else []) + list(shape)), tf.float32)


@given(setup=conv_setups(FORWARD), n=st.sampled_from([0, 1, 2, 3]), data=st.data(),
       mode=st.sampled_from(testing.DRAWN_MODES), seed=st.integers(0, 99))
def test_conv_forward(setup, n, data, mode, seed):
    rng = np.random.default_rng(seed)
    stacked = testing.draw_stacked(data, 2)
    if setup["kind"] == "DepthwiseConv2dNative":
        setup["f"][-1] = data.draw(st.integers(1, 2))  # channel multiplier
    x = values(rng, n, setup["x"], stacked[0])
    f = values(rng, n, setup["f"], stacked[1])
    op = forward(setup["kind"], setup["stride"], setup["dilation"], setup["padding"])
    testing.check_op(op, [x, f], stacked=stacked, n=n, mode=mode, **TOL)


@given(setup=conv_setups(GRADS), n=st.sampled_from([0, 1, 2, 3]), data=st.data(),
       mode=st.sampled_from(testing.DRAWN_MODES), seed=st.integers(0, 99))
def test_conv_backprop(setup, n, data, mode, seed):
    rng = np.random.default_rng(seed)
    kind = setup["kind"]
    depthwise = kind.startswith("Depthwise")
    if depthwise:
        setup["f"][-1] = data.draw(st.integers(1, 2))
    fwd_kind = "Conv3D" if "3D" in kind else "DepthwiseConv2dNative" if depthwise else "Conv2D"
    fwd = forward(fwd_kind, setup["stride"], setup["dilation"], setup["padding"])
    out_shape = fwd(tf.zeros(setup["x"]), tf.zeros(setup["f"])).shape.as_list()
    stacked = testing.draw_stacked(data, 2)
    first = values(rng, n, setup["f"] if "Input" in kind else setup["x"], stacked[0])
    dy = values(rng, n, out_shape, stacked[1])
    testing.check_op(backprop(kind, setup, out_shape), [first, dy], stacked=stacked, n=n,
                     mode=mode, **TOL)


@given(setup=conv_setups(("Conv2D", "Conv1D", "Conv3D", "DepthwiseConv2dNative")),
       n=st.sampled_from([0, 1, 2, 3]), data=st.data(), mode=st.sampled_from(testing.DRAWN_MODES),
       seed=st.integers(0, 99))
def test_per_example_gradients(setup, n, data, mode, seed):
    """A GradientTape inside the body over a conv with a captured (or stacked) filter:
    gradients wrt filter and input, no fallback."""
    rng = np.random.default_rng(seed)
    if setup["kind"] == "DepthwiseConv2dNative":
        setup["f"][-1] = data.draw(st.integers(1, 2))
    filter_stacked = data.draw(st.booleans())
    x = values(rng, n, setup["x"], True)
    f = values(rng, n, setup["f"], filter_stacked)
    op = forward(setup["kind"], setup["stride"], setup["dilation"], setup["padding"])

    def body(x, f):
        with tf.GradientTape() as tape:
            tape.watch([x, f])
            y = op(x, f)
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, [x, f])

    testing.check_op(body, [x, f], stacked=[True, filter_stacked], n=n, mode=mode, **TOL)


# Per-example filter gradients as patches.

PATCHES_N = 3


def _filter_gradient(x, dy, kernel, strides, dilations, padding):
    explicit = []
    if isinstance(padding, list):
        explicit, padding = [p for pair in padding for p in pair], "EXPLICIT"
    return tf.raw_ops.Conv2DBackpropFilter(
        input=x, filter_sizes=kernel, out_backprop=dy, strides=[1, *strides, 1],
        dilations=[1, *dilations, 1], padding=padding, explicit_paddings=explicit)


def _out_size(size, k, stride, dilation, padding):
    if isinstance(padding, list):
        size += sum(padding)
        padding = "VALID"
    span = (k - 1) * dilation + 1
    return -(-size // stride) if padding == "SAME" else (size - span) // stride + 1


@given(batch=st.integers(1, 2), size=st.integers(5, 9), k=st.integers(1, 3),
       stride=st.integers(1, 2), dilation=st.integers(1, 2), cin=st.integers(1, 3),
       cout=st.integers(1, 3), seed=st.integers(0, 2**16),
       padding=st.sampled_from(["SAME", "VALID", "EXPLICIT"]))
def test_filter_gradients_match_the_loop(batch, size, k, stride, dilation, cin, cout, seed,
                                         padding):
    if padding == "EXPLICIT":
        padding = [[0, 0], [1, 0], [0, 2], [0, 0]]
        out = [_out_size(size, k, stride, dilation, p) for p in ([1, 0], [0, 2])]
    else:
        out = [_out_size(size, k, stride, dilation, padding)] * 2
    # TensorFlow's kernels take only one of stride and dilation above 1, and its CPU
    # kernel no dilation above 1 with EXPLICIT padding; and there must be positions.
    assume(not (stride > 1 and dilation > 1) and min(out) >= 1)
    assume(not (isinstance(padding, list) and dilation > 1))
    assume(ONEDNN or dilation == 1)  # the loop's own kernel needs oneDNN for dilations
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=[PATCHES_N, batch, size, size, cin]), tf.float32)
    dy = tf.constant(rng.normal(size=[PATCHES_N, batch, *out, cout]), tf.float32)
    body = lambda i: _filter_gradient(tf.gather(x, i), tf.gather(dy, i), [k, k, cin, cout],
                                      [stride] * 2, [dilation] * 2, padding)
    testing.assert_matches_loop(body, PATCHES_N, rtol=1e-4, atol=1e-4)
    report = pf.explain(body, PATCHES_N)
    used = [r.converter for r in report.rows if r.op_type == "Conv2DBackpropFilter"]
    assert used == ["pfor_converters_nn.conv_grad.convert_backprop_filter_windows"], used


def test_under_xla_and_per_example_gradients_of_a_convnet():
    """What per-example gradients of a convnet emit, compiled: the grouped kernel the
    other path uses is pathologically slow under XLA on CPU."""
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=[4, 10, 10, 2]), tf.float32)
    w = tf.Variable(rng.normal(size=[3, 3, 2, 4]).astype(np.float32))
    loss = lambda image: tf.reduce_sum(tf.nn.relu(tf.nn.conv2d(
        image[None], w, strides=2, padding="SAME")) ** 2)
    _assert_compiled_per_example_gradients(loss, w, x)


def _assert_compiled_per_example_gradients(loss, w, x):
    """pf.per_example_gradients of ``loss`` w.r.t. ``w`` under XLA against a loop of tapes."""
    compiled = tf.function(lambda: pf.per_example_gradients(loss, [w], x, fallback="error")[0],
                           jit_compile=True)
    want = []
    for b in range(x.shape[0]):
        with tf.GradientTape() as tape:
            y = loss(x[b])
        want.append(tape.gradient(y, w))
    testing.assert_allclose(compiled(), tf.stack(want), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["grouped", "unknown size"])
def test_declined_cases_go_to_the_grouped_kernel(case):
    if case == "grouped" and not ONEDNN:
        pytest.skip("this CPU has no grouped gradient kernel (no oneDNN): the loop fails")
    rng = np.random.default_rng(2)
    x = tf.constant(rng.normal(size=[PATCHES_N, 1, 6, 6, 4]), tf.float32)
    dy = tf.constant(rng.normal(size=[PATCHES_N, 1, 4, 4, 2]), tf.float32)
    cin = 2 if case == "grouped" else 4  # grouped: 4 input channels, filter depth 2

    if case == "unknown size":  # a variable of unknown shape: its reads have no static size
        x = tf.Variable(x, shape=tf.TensorShape([None, None, None, None, 4]))

    def body(i):
        image = tf.gather(x, i)
        return _filter_gradient(image, tf.gather(dy, i), [3, 3, cin, 2], [1, 1], [1, 1],
                                "VALID")

    testing.assert_matches_loop(body, PATCHES_N, rtol=1e-4, atol=1e-4)
    used = [r.converter for r in pf.explain(body, PATCHES_N).rows
            if r.op_type == "Conv2DBackpropFilter"]
    assert used == ["pfor_converters_nn.conv_grad.convert_backprop_filter_stacked_both"], used


# Per-example depthwise filter gradients from the kernel taps' windows (conv_grad.py).

WINDOWS = "pfor_converters_nn.conv_grad.convert_backprop_filter_windows"
JOINED = "pfor_converters_nn.conv_grad.convert_backprop_filter_stacked_both"


def _depthwise_filter_gradient(kind, x, dy, kernel, channels, multiplier, stride, dilation,
                               padding):
    explicit = []
    if isinstance(padding, list):
        explicit, padding = [p for pair in padding for p in pair], "EXPLICIT"
    attrs = dict(input=x, out_backprop=dy, strides=[1, stride, stride, 1], padding=padding,
                 explicit_paddings=explicit, dilations=[1, dilation, dilation, 1])
    if kind == "depthwise":
        return tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
            filter_sizes=[*kernel, channels, multiplier], **attrs)
    return tf.raw_ops.Conv2DBackpropFilter(  # groups == channels, as Keras' Conv2D(groups=c)
        filter_sizes=[*kernel, 1, channels * multiplier], **attrs)


@given(kind=st.sampled_from(["depthwise", "grouped"]), batch=st.integers(1, 2),
       size=st.integers(3, 9), kernel=st.lists(st.integers(1, 5), min_size=2, max_size=2),
       stride=st.integers(1, 3), dilation=st.integers(1, 2), channels=st.integers(2, 4),
       multiplier=st.integers(1, 2), seed=st.integers(0, 2**16),
       padding=st.sampled_from(["SAME", "VALID", "EXPLICIT"]))
def test_depthwise_filter_gradients_match_the_loop(kind, batch, size, kernel, stride, dilation,
                                                   channels, multiplier, seed, padding):
    """Depthwise kernels and Conv2D with one input channel per group, both operands
    stacked: the taps' windows (strides through the stride phases), no fallback."""
    # The CPU kernels: depthwise gradients have no dilation; grouped ones need oneDNN,
    # which has no EXPLICIT padding; none take both a stride and a dilation above 1.
    assume(kind == "grouped" or dilation == 1)
    assume(kind == "depthwise" or (ONEDNN and padding != "EXPLICIT"))
    assume(stride == 1 or dilation == 1)
    if padding == "EXPLICIT":
        padding = [[0, 0], [2, 0], [1, 1], [0, 0]]
        out = [_out_size(size, k, stride, dilation, p) for k, p in zip(kernel, ([2, 0], [1, 1]))]
    else:
        out = [_out_size(size, k, stride, dilation, padding) for k in kernel]
    assume(min(out) >= 1)
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=[PATCHES_N, batch, size, size, channels]), tf.float32)
    dy = tf.constant(rng.normal(size=[PATCHES_N, batch, *out, channels * multiplier]),
                     tf.float32)
    body = lambda i: _depthwise_filter_gradient(kind, tf.gather(x, i), tf.gather(dy, i), kernel,
                                                channels, multiplier, stride, dilation, padding)
    testing.assert_matches_loop(body, PATCHES_N, rtol=1e-4, atol=1e-4, fallback="error")
    used = [r.converter for r in pf.explain(body, PATCHES_N).rows if "Backprop" in r.op_type]
    assert used == [WINDOWS], used


@pytest.mark.parametrize("kernel, expected", [(3, JOINED), (5, WINDOWS)])
def test_large_images_under_small_kernels_take_the_joined_kernel(kernel, expected):
    """2**18 elements under a 3x3 kernel: the channel-joined kernel is the faster one
    (conv_grad._joined_channels_pay); a 5x5 kernel takes the taps."""
    rng = np.random.default_rng(3)
    n, channels = 4, 64
    x = tf.constant(rng.normal(size=[n, 1, 32, 32, channels]), tf.float32)
    dy = tf.constant(rng.normal(size=[n, 1, 32, 32, channels]), tf.float32)
    body = lambda i: _depthwise_filter_gradient("depthwise", tf.gather(x, i), tf.gather(dy, i),
                                                [kernel, kernel], channels, 1, 1, 1, "SAME")
    testing.assert_matches_loop(body, n, rtol=1e-4, atol=1e-3, fallback="error")
    used = [r.converter for r in pf.explain(body, n).rows if "Backprop" in r.op_type]
    assert used == [expected], used


def test_per_example_gradients_of_a_depthwise_convnet_under_xla():
    rng = np.random.default_rng(4)
    x = tf.constant(rng.normal(size=[3, 9, 9, 4]), tf.float32)
    w = tf.Variable(rng.normal(size=[5, 5, 4, 1]).astype(np.float32))
    loss = lambda image: tf.reduce_sum(tf.tanh(tf.nn.depthwise_conv2d(
        image[None], w, [1, 2, 2, 1], "SAME")) ** 2)
    _assert_compiled_per_example_gradients(loss, w, x)
