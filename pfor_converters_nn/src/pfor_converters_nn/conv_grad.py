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

Per-example filter gradients from the kernel taps' windows (Conv2DBackpropFilter and
DepthwiseConv2dNativeBackpropFilter with a stacked input and a stacked out_backprop, 2-D,
static shapes): dW_j[i, k, c, o] = sum over positions p of
x_j[p * stride + (i, k) * dilation, c] * dy_j[p, o]. Each tap's window of the padded
input is a slice (of one stride phase when strides exceed 1). Plain Conv2D lays the
windows side by side (the im2col patches, [n, positions, kh*kw*cin]) for one batched
matmul against out_backprop: XLA compiles this well on CPU, where the grouped kernel (n
groups) is pathologically slow (44x at 16 MNIST examples), and without XLA it is also
faster for small kernels (benchmarks/per_example_mnist.py). Depthwise kernels (also
Conv2D with one input channel per group, as ConvNeXt's) multiply each window by
out_backprop and sum over the positions: the channel-joined CPU kernels run 5x5 kernels,
and any kernel over images no larger than itself, at 1-60 ns per tap and element, the
taps at 0.2-0.3 (benchmarks/real_models.py). Tried ahead of the grouped and joined
kernels, which take what they decline.
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


class _Windows:
    """The static geometry of a 2-D filter gradient whose input and out_backprop are
    both stacked, and each kernel tap's input window: for tap (i, k) the
    [n*b, out_h, out_w, c] input values it meets at the output positions."""

    def __init__(self, ctx, kernel):
        x, _, dy = ctx.inputs
        self.x_dims, self.dy_dims = x.shape.as_list(), dy.shape.as_list()
        self.kernel = kernel
        _, self.s_h, self.s_w, _ = ctx.attr("strides")
        _, self.d_h, self.d_w, _ = ctx.attr("dilations")
        _, height, width, _ = self.x_dims
        _, self.out_h, self.out_w, _ = self.dy_dims
        kh, kw = kernel
        self.pads = [_pads(ctx, height, self.out_h, kh, self.s_h, self.d_h, 1),
                     _pads(ctx, width, self.out_w, kw, self.s_w, self.d_w, 2)]

    def taps(self, ctx, x):
        """Yield every tap's window of the stacked input ``x``, row-major over the
        kernel. Strides above 1 split the padded images into their stride phases once
        (a reshape and a transpose), so each window is a plain slice: strided slices of
        every window are several times slower."""
        batch, height, width, c = self.x_dims
        n = ctx.n_static if ctx.n_static is not None else ctx.n
        kh, kw = self.kernel
        (top, bottom), (left, right) = self.pads
        rows = self._padded(height + top + bottom, kh, self.s_h, self.d_h, self.out_h)
        cols = self._padded(width + left + right, kw, self.s_w, self.d_w, self.out_w)
        images = shapes.reshape(x, [n * batch, height, width, c])
        images = tf.pad(images, [[0, 0], [top, rows - height - top],
                                 [left, cols - width - left], [0, 0]])
        phased = self.s_h > 1 or self.s_w > 1
        if phased:
            images = tf.transpose(tf.reshape(images, [
                n * batch, rows // self.s_h, self.s_h, cols // self.s_w, self.s_w, c]),
                [0, 2, 4, 1, 3, 5])
        for i in range(kh):
            for k in range(kw):
                a, b = i * self.d_h, k * self.d_w
                if phased:
                    yield images[:, a % self.s_h, b % self.s_w, a // self.s_h:a // self.s_h
                                 + self.out_h, b // self.s_w:b // self.s_w + self.out_w, :]
                else:
                    yield images[:, a:a + self.out_h, b:b + self.out_w, :]

    @staticmethod
    def _padded(size, k, stride, dilation, out):
        """The padded extent, rounded up to whole strides (the phases' reshape)."""
        span = max(size, (out - 1) * stride + (k - 1) * dilation + 1)
        return -(-span // stride) * stride


def _static_geometry(ctx):
    """(filter shape, _Windows) where every size is static and the op 2-D, else None."""
    x, sizes, dy = ctx.inputs
    filter_shape = tf.get_static_value(sizes.tensor)
    if (filter_shape is None or None in x.shape.as_list() or None in dy.shape.as_list()
            or len(x.shape) != 4):
        return None
    filter_shape = [int(d) for d in filter_shape]
    return filter_shape, _Windows(ctx, filter_shape[:2])


@_checked
def convert_backprop_filter_windows(ctx):
    """Both stacked, static shapes: every iteration's filter gradient from the kernel
    taps' input windows. Depthwise (one input channel per group: also Conv2D with
    groups equal to its channels): per tap, the window times out_backprop summed over
    the positions. Plain Conv2D: the windows laid side by side (im2col) and one batched
    matmul with out_backprop."""
    geometry = _static_geometry(ctx)
    if geometry is None:
        return ctx.decline("windows need static shapes")
    (kh, kw, depth, cout), windows = geometry
    channels = windows.x_dims[-1]
    if ctx.op_type == "DepthwiseConv2dNativeBackpropFilter" or depth == 1 < channels:
        if _joined_channels_pay(ctx, windows):
            return ctx.decline("small kernel over large images: the joined kernel is faster")
        # Multiplier m: the depthwise filter is [kh, kw, c, m], the grouped one [kh, kw, 1, c*m].
        multiplier = cout * depth // channels
        return Stacked(tensor=_depthwise_taps(ctx, windows, channels, multiplier,
                                              [kh, kw, depth, cout]))
    if channels != depth:
        return ctx.decline("grouped convolution with several channels per group")
    if kh * kw > _MAX_TAPS_EAGER and not ctx.compiled:
        return ctx.decline("large kernel: the grouped kernel is cheaper without XLA")
    return Stacked(tensor=_patches_matmul(ctx, windows, depth, cout))


def _joined_channels_pay(ctx, windows) -> bool:
    """Whether the channel-joined depthwise kernel (n in the channels, one op) beats the
    taps. Measured on CPU (n*b*h*w*c elements, ns per tap and element): it runs at
    0.1-0.2 for kernels of up to 3x3 over images larger than the kernel with 2**18
    elements or more, and at 1-60 for 5x5 and larger or images no larger than the
    kernel, where the taps run at 0.2-0.3. XLA compiles the taps into fused loops."""
    kh, kw = windows.kernel
    batch, height, width, c = windows.x_dims
    n = ctx.n_static
    if ctx.compiled or n is None or kh * kw > 9:
        return False
    extent = max((kh - 1) * windows.d_h + 1, (kw - 1) * windows.d_w + 1)
    return min(height, width) > extent and n * batch * height * width * c >= 2 ** 18


def _depthwise_taps(ctx, windows, channels, multiplier, filter_shape):
    """dW_j[i, k, c, m] = sum over positions p of (tap (i, k)'s window of x_j)[p, c] *
    dy_j[p, c * multiplier + m]: per tap, the window times out_backprop, summed."""
    x, _, dy = ctx.inputs
    n = ctx.n_static if ctx.n_static is not None else ctx.n
    positions = windows.x_dims[0] * windows.out_h * windows.out_w
    grads = shapes.reshape(dy.tensor, [n, positions, channels, multiplier])
    per_tap = [tf.reduce_sum(shapes.reshape(w, [n, positions, channels, 1]) * grads, 1)
               for w in windows.taps(ctx, x.tensor)]
    return shapes.reshape(tf.stack(per_tap, 1), [n] + filter_shape)


def _patches_matmul(ctx, windows, cin, cout):
    """dW_j[i, k, c, o] = sum over positions p of x_j[p * stride + (i, k) * dilation, c]
    * dy_j[p, o]: the im2col patches [n, positions, kh*kw*cin] times out_backprop."""
    x, _, dy = ctx.inputs
    n = ctx.n_static if ctx.n_static is not None else ctx.n
    kh, kw = windows.kernel
    positions = windows.x_dims[0] * windows.out_h * windows.out_w
    patches = shapes.reshape(tf.stack(list(windows.taps(ctx, x.tensor)), axis=3),
                             [n, positions, kh * kw * cin])
    grads = shapes.reshape(dy.tensor, [n, positions, cout])
    out = tf.linalg.matmul(patches, grads, transpose_a=True)
    return shapes.reshape(out, [n, kh, kw, cin, cout])


def register(registry):
    """Add the gradient kernels' converters to the pack's registrar (the windows ahead
    of the grouped and channel-joined kernels, which take what they decline)."""
    inputs = ["Conv2DBackpropInput", "Conv3DBackpropInputV2", "DepthwiseConv2dNativeBackpropInput"]
    filters = ["Conv2DBackpropFilter", "Conv3DBackpropFilterV2",
               "DepthwiseConv2dNativeBackpropFilter"]
    registry.add(inputs, convert_backprop_input_folded, inputs="UUS")
    registry.add(inputs, convert_backprop_input_stacked_filter, inputs="USU")
    registry.add(inputs, convert_backprop_input_stacked_both, inputs="USS")
    registry.add(filters, convert_backprop_filter_stacked_input, inputs="SUU")
    registry.add(filters, convert_backprop_filter_stacked_grad, inputs="UUS")
    registry.add(filters, convert_backprop_filter_stacked_both, inputs="SUS")
    registry.add(["Conv2DBackpropFilter", "DepthwiseConv2dNativeBackpropFilter"],
                 convert_backprop_filter_windows, inputs="SUS", priority=1)
