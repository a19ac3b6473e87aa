"""Convolution gradient kernels: the same layouts as the forward converters in conv.py.

Backprop-input (input_sizes, filter, out_backprop): with an invariant filter the
gradients fold n into the batch (input_sizes' batch entry times n). With a stacked
filter n moves into the channels: the input channels are independent, so an invariant
out_backprop meets the filters stacked along input channels [k..., n*cin, cout]; a
stacked one runs grouped (2-D, not EXPLICIT padding) or against the block-diagonal
filter (3-D, EXPLICIT padding).

Backprop-filter (input, filter_sizes, out_backprop), the per-example gradient kernel:
dW_j = sum over batch and positions of input_j (x) out_backprop_j. With one side
invariant the other side's n goes into its channels and one plain kernel computes every
iteration (no tiling): [k..., n*cin, cout] or [k..., cin, n*cout]. With both stacked a
grouped kernel with n groups gives exactly the n per-iteration gradients in one op (2-D);
otherwise (3-D, EXPLICIT padding) the full [n*cin, n*cout] cross gradient is computed
and its diagonal blocks kept.
Depthwise kernels are per channel: n joins the channels of every operand.
Grouped convolutions (input channels G times the filter's depth) use conv.py's group
layouts: [G][n][c] beside an invariant operand, [n][G][c] with both stacked, n*G blocks
for the block-diagonal filter.

Per-example filter gradients as patches times out_backprop (Conv2DBackpropFilter with a
stacked input and a stacked out_backprop, 2-D, static shapes): dW_j[i, k, c, o] = sum
over positions p of x_j[p * stride + (i, k) * dilation, c] * dy_j[p, o]. The input's
kh*kw shifted windows are cut out with strided slices and laid side by side (the im2col
patches, [n, positions, kh*kw*cin]), then one batched matmul against out_backprop
([n, positions, cout]) gives every iteration's filter gradient. XLA compiles this well
on CPU, where the grouped convolution (n groups) is pathologically slow (44x at 16
MNIST examples); without XLA it is also faster for small kernels
(benchmarks/per_example_mnist.py). It is tried ahead of the grouped kernel, which takes
what it declines.
"""

from __future__ import annotations

import functools

import tensorflow as tf

from pfor_core.extend import Stacked, shapes

from pfor_converters_nn import conv, folding

# Up to this many kernel taps the patches pay without XLA too (measured on the MNIST
# model's 5x5 kernels); under XLA they always do.
_MAX_TAPS_EAGER = 49


def _checked(fn):
    @functools.wraps(fn)
    def converter(ctx):
        if not conv.channels_last(ctx):
            return ctx.decline("only channels-last convolutions are converted")
        if ctx.inputs[0 if "Input" in ctx.op_type else 1].is_stacked:
            return ctx.decline("stacked sizes")
        return fn(ctx)

    return converter


@_checked
def convert_backprop_input_folded(ctx):
    """Invariant sizes and filter, stacked out_backprop: fold n into the batch."""
    sizes, f, dy = ctx.inputs
    return Stacked(tensor=conv.folded(ctx, lambda: ctx.emit(
        conv.scale_entries(ctx, sizes.tensor, [0]), f.tensor, folding.fold(ctx, 2))[0], 2))


def size_entry(ctx, sizes, k):
    """Entry k of an invariant sizes vector (= dim k of the op's output): an int where
    static, else a scalar tensor."""
    shape = ctx.output_shapes[0]
    if shape.rank is not None and shape[k] is not None:
        return shape[k]
    value = tf.get_static_value(sizes)
    return int(value[k]) if value is not None else sizes[k]


def _input_grad(ctx, compute_plain):
    """Backprop-input with a stacked filter: depthwise kernels join n to the channels of
    every operand; others run ``compute_plain(wide_sizes, cin, groups)``."""
    sizes, f, dy = ctx.inputs
    cin = size_entry(ctx, sizes.tensor, -1)
    wide_sizes = conv.scale_entries(ctx, sizes.tensor, [-1])
    if ctx.op_type == "DepthwiseConv2dNativeBackpropInput":
        def compute():
            out = ctx.emit(wide_sizes, conv.filter_in(ctx, f), conv.to_channels(ctx, dy))[0]
            return conv.from_channels(ctx, out, cin)
    else:
        groups = conv.groups_of(cin, ctx.dims(f)[-2])
        compute = lambda: compute_plain(wide_sizes, cin, groups)  # noqa: E731
    return Stacked(tensor=conv.nonempty(ctx, compute))


@_checked
def convert_backprop_input_stacked_filter(ctx):
    """Stacked filter, invariant out_backprop: the filters stacked along the input
    channels; the input channels come out [G][n][cin / G] (n inside each group)."""
    _, f, dy = ctx.inputs

    def compute(wide_sizes, cin, groups):
        out = ctx.emit(wide_sizes, conv.filter_in(ctx, f), dy.tensor)[0]
        return conv.split_last(ctx, out, groups, cin // groups)

    return _input_grad(ctx, compute)


@_checked
def convert_backprop_input_stacked_both(ctx):
    """Stacked filter and out_backprop: grouped (2-D) or block-diagonal (3-D, EXPLICIT
    padding), n in the channels."""
    _, f, dy = ctx.inputs

    def compute(wide_sizes, cin, groups):
        if conv.grouped(ctx):
            out = ctx.emit(wide_sizes, conv.filter_out(ctx, f), conv.to_channels(ctx, dy))[0]
        else:
            out = ctx.emit(wide_sizes, conv.block_diagonal(ctx, f, groups),
                           conv.to_channels(ctx, dy))[0]
        return conv.from_channels(ctx, out, cin)

    return _input_grad(ctx, compute)


def _filter_grad(ctx, compute_plain):
    """Backprop-filter: depthwise kernels join n to the channels of every operand;
    others run ``compute_plain(sizes, cin, cout, groups)``."""
    x, sizes, dy = ctx.inputs
    cin = size_entry(ctx, sizes.tensor, -2)
    if ctx.op_type == "DepthwiseConv2dNativeBackpropFilter":
        def compute():
            wide = conv.scale_entries(ctx, sizes.tensor, [-2])
            out = ctx.emit(conv.to_channels(ctx, x), wide, conv.to_channels(ctx, dy))[0]
            return conv.unfilter_in(ctx, out, cin)
    else:
        cout = conv.channels_of(ctx, dy)
        groups = conv.groups_of(conv.channels_of(ctx, x), cin)
        compute = lambda: compute_plain(sizes.tensor, cin, cout, groups)  # noqa: E731
    return Stacked(tensor=conv.nonempty(ctx, compute))


@_checked
def convert_backprop_filter_stacked_input(ctx):
    """Stacked input, invariant out_backprop: n joins the input's channels inside each
    group; one plain kernel gives [k..., n*cin, cout]."""
    x, _, dy = ctx.inputs

    def compute(sizes, cin, cout, groups):
        wide = conv.scale_entries(ctx, sizes, [-2])
        out = ctx.emit(conv.join_last(ctx, x.tensor, groups), wide, dy.tensor)[0]
        return conv.unfilter_in(ctx, out, cin)

    return _filter_grad(ctx, compute)


@_checked
def convert_backprop_filter_stacked_grad(ctx):
    """Invariant input, stacked out_backprop: n joins the gradient's channels inside
    each group; one plain kernel gives [k..., cin, n*cout]."""
    x, _, dy = ctx.inputs

    def compute(sizes, cin, cout, groups):
        wide = conv.scale_entries(ctx, sizes, [-1])
        out = ctx.emit(x.tensor, wide, conv.join_last(ctx, dy.tensor, groups))[0]
        return conv.split_last(ctx, out, groups, cout // groups)

    return _filter_grad(ctx, compute)


@_checked
def convert_backprop_filter_stacked_both(ctx):
    """Both stacked, the per-example gradient: a grouped kernel with n groups (2-D), or
    the full cross gradient of the n*G (iteration, group) blocks, diagonal kept."""
    x, _, dy = ctx.inputs

    def compute(sizes, cin, cout, groups):
        if conv.grouped(ctx):
            wide = conv.scale_entries(ctx, sizes, [-1])
            out = ctx.emit(conv.to_channels(ctx, x), wide, conv.to_channels(ctx, dy))[0]
            return conv.unfilter_out(ctx, out, cout)
        wide = conv.scale_entries(ctx, sizes, [-2, -1], factors=[groups, 1])
        out = ctx.emit(conv.to_channels(ctx, x), wide, conv.to_channels(ctx, dy))[0]
        return conv.diagonal_blocks(ctx, out, cin, cout // groups, groups)

    return _filter_grad(ctx, compute)


def _pads(ctx, size, out, k, stride, dilation, axis):
    padding = ctx.attr("padding")
    padding = padding.decode() if isinstance(padding, bytes) else padding
    if padding == "VALID":
        return 0, 0
    if padding == "EXPLICIT":
        explicit = ctx.attr("explicit_paddings")
        return explicit[2 * axis], explicit[2 * axis + 1]
    total = max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def convert_backprop_filter_patches(ctx):
    x, sizes, dy = ctx.inputs
    filter_shape = tf.get_static_value(sizes.tensor)
    x_dims, dy_dims = x.shape.as_list(), dy.shape.as_list()
    if filter_shape is None or None in x_dims or None in dy_dims or len(x_dims) != 4:
        return ctx.decline("patches need static shapes")
    kh, kw, cin, cout = (int(d) for d in filter_shape)
    batch, height, width, channels = x_dims
    _, out_h, out_w, _ = dy_dims
    if channels != cin:
        return ctx.decline("grouped convolution")
    if kh * kw > _MAX_TAPS_EAGER and not ctx.compiled:
        return ctx.decline("large kernel: the grouped kernel is cheaper without XLA")
    _, s_h, s_w, _ = ctx.attr("strides")
    _, d_h, d_w, _ = ctx.attr("dilations")
    top, bottom = _pads(ctx, height, out_h, kh, s_h, d_h, 1)
    left, right = _pads(ctx, width, out_w, kw, s_w, d_w, 2)
    n = ctx.n_static if ctx.n_static is not None else ctx.n
    images = shapes.reshape(x.tensor, [n * batch, height, width, cin])
    images = tf.pad(images, [[0, 0], [top, bottom], [left, right], [0, 0]])
    windows = [images[:, i * d_h:i * d_h + (out_h - 1) * s_h + 1:s_h,
                      j * d_w:j * d_w + (out_w - 1) * s_w + 1:s_w, :]
               for i in range(kh) for j in range(kw)]
    positions = batch * out_h * out_w
    patches = shapes.reshape(tf.stack(windows, axis=3), [n, positions, kh * kw * cin])
    grads = shapes.reshape(dy.tensor, [n, positions, cout])
    out = tf.linalg.matmul(patches, grads, transpose_a=True)
    return Stacked(tensor=shapes.reshape(out, [n, kh, kw, cin, cout]))


def register(registry):
    """Add the gradient kernels' converters to the pack's registrar (the patches ahead
    of the grouped kernel, which takes what they decline)."""
    inputs = ["Conv2DBackpropInput", "Conv3DBackpropInputV2", "DepthwiseConv2dNativeBackpropInput"]
    filters = ["Conv2DBackpropFilter", "Conv3DBackpropFilterV2",
               "DepthwiseConv2dNativeBackpropFilter"]
    registry.add(inputs, convert_backprop_input_folded, inputs="UUS")
    registry.add(inputs, convert_backprop_input_stacked_filter, inputs="USU")
    registry.add(inputs, convert_backprop_input_stacked_both, inputs="USS")
    registry.add(filters, convert_backprop_filter_stacked_input, inputs="SUU")
    registry.add(filters, convert_backprop_filter_stacked_grad, inputs="UUS")
    registry.add(filters, convert_backprop_filter_stacked_both, inputs="SUS")
    registry.add("Conv2DBackpropFilter", convert_backprop_filter_patches, inputs="SUS",
                 priority=1)
