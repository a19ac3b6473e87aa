"""Convolutions (Conv2D, Conv3D, DepthwiseConv2dNative): code chosen by which inputs vary.

- Stacked input, invariant filter: the iteration axis folds into the batch axis
  ([n, b, ...] -> [n*b, ...]), one convolution runs, the result splits back.
- Invariant input, stacked filter: output channels are independent, so the n filters
  are laid side by side as one filter [k..., cin, n*cout]; one plain convolution, then
  the n*cout output channels split into [n, ..., cout]. Nothing is tiled.
- Both stacked: the iteration axis moves into the channels (input [b, ..., n*cin]) and
  runs as a grouped convolution with n groups (filter [k..., cin, n*cout]). TF's Conv2D
  and its gradient kernels run groups on CPU (oneDNN), GPU (cuDNN) and XLA, so this is
  one op with no wasted work. Conv3D and EXPLICIT padding have no grouped CPU kernel
  (the grouped CPU path is oneDNN's): there the filters form a block-diagonal filter
  [k..., n*cin, n*cout], n times the flops of the loop but one op with no loop (the
  zero blocks are the cost).
- Depthwise convolution is per channel, so the iteration axis simply joins the
  channels: input [b, h, w, n*c], filter [kh, kw, n*c, m] compute every iteration exactly.

Grouped convolutions (Keras' groups=G: input channels G times the filter's) keep their
groups apart: where one operand is invariant, n joins the channels inside each group
(layout [G][n][c], so the kernel's G groups each see their n iterations); with both
stacked the layout is [n][G][c] and the kernel runs n*G groups; the block-diagonal
filter has n*G blocks.

Only channels-last layouts are handled (CPU has no channels-first kernels); others
decline. Strides, dilations and padding (also EXPLICIT: batch and channel entries are
zero, so they stay valid) are untouched. Converters that merge n into channels compute
nothing when n == 0 (kernels refuse zero channels): see ``nonempty``.
"""

from __future__ import annotations

import functools

import tensorflow as tf

from pfor_core.extend import Stacked, shapes
from pfor_converters_nn import folding


def channels_last(ctx) -> bool:
    return ctx.attr("data_format") in (b"NHWC", b"NDHWC", "NHWC", "NDHWC")


def _move(t, src, dst):
    perm = list(range(t.shape.rank))
    perm.insert(dst, perm.pop(src))
    return tf.transpose(t, perm)


def to_channels(ctx, value) -> tf.Tensor:
    """[n, b, ..., c] (or an invariant [b, ..., c], tiled) -> [b, ..., n*c], n-major."""
    if not value.is_stacked:
        t = value.tensor
        return tf.tile(t, [1] * (t.shape.rank - 1) + [ctx.n_dim])
    d = ctx.dims(value)
    moved = _move(value.tensor, 0, len(d) - 2)
    return shapes.reshape(moved, d[1:-1] + [shapes.product([d[0], d[-1]])])


def from_channels(ctx, t, c) -> tf.Tensor:
    """[b, ..., n*c] -> [n, b, ..., c]."""
    d = shapes.dims(t)
    split = shapes.reshape(t, d[:-1] + [ctx.n_dim, c])
    return _move(split, split.shape.rank - 2, 0)


def channels_of(ctx, value):
    """Per-iteration size of a value's last (channel) axis."""
    return ctx.dims(value)[-1] if value.is_stacked else shapes.dims(value.tensor)[-1]


def groups_of(channels, filter_in):
    """Feature groups of a convolution: input channels over the filter's input depth."""
    if isinstance(channels, int) and isinstance(filter_in, int):
        return channels // filter_in
    return tf.cast(channels, tf.int32) // tf.cast(filter_in, tf.int32)


def join_last(ctx, t, groups) -> tf.Tensor:
    """Stacked [n, ..., G*c] -> [..., G*n*c]: n joins the last axis inside each of the G
    groups (for an op whose other operand is invariant, so the kernel's own G groups
    each take their n iterations)."""
    d = ctx.dims(t)
    if isinstance(groups, int) and groups == 1:
        moved = _move(t, 0, len(d) - 2)
    else:
        split = shapes.reshape(t, d[:-1] + [groups, d[-1] // groups])
        moved = _move(split, 0, len(d) - 1)                      # [..., G, n, c]
    return shapes.reshape(moved, d[1:-1] + [shapes.product([d[0], d[-1]])])


def split_last(ctx, t, groups, c) -> tf.Tensor:
    """[..., G*n*c] -> stacked [n, ..., G*c]; undoes ``join_last``."""
    if isinstance(groups, int) and groups == 1:
        return from_channels(ctx, t, c)
    d = shapes.dims(t)
    split = shapes.reshape(t, d[:-1] + [groups, ctx.n_dim, c])
    moved = _move(split, split.shape.rank - 2, 0)                # [n, ..., G, c]
    return shapes.reshape(moved, [ctx.n_dim] + d[:-1] + [shapes.product([groups, c])])


def filter_out(ctx, f) -> tf.Tensor:
    """Stacked filter [n, k..., cin, cout] -> [k..., cin, n*cout] (n-major)."""
    d = ctx.dims(f)
    moved = _move(f.tensor, 0, len(d) - 2)
    return shapes.reshape(moved, d[1:-1] + [shapes.product([d[0], d[-1]])])


def filter_in(ctx, f) -> tf.Tensor:
    """Stacked filter [n, k..., cin, cout] -> [k..., n*cin, cout]."""
    d = ctx.dims(f)
    moved = _move(f.tensor, 0, len(d) - 3)
    return shapes.reshape(moved, d[1:-2] + [shapes.product([d[0], d[-2]]), d[-1]])


def unfilter_out(ctx, t, cout) -> tf.Tensor:
    """[k..., cin, n*cout] -> [n, k..., cin, cout]."""
    d = shapes.dims(t)
    split = shapes.reshape(t, d[:-1] + [ctx.n_dim, cout])
    return _move(split, split.shape.rank - 2, 0)


def unfilter_in(ctx, t, cin) -> tf.Tensor:
    """[k..., n*cin, cout] -> [n, k..., cin, cout]."""
    d = shapes.dims(t)
    split = shapes.reshape(t, d[:-2] + [ctx.n_dim, cin, d[-1]])
    return _move(split, split.shape.rank - 3, 0)


def block_diagonal(ctx, f, groups=1) -> tf.Tensor:
    """Stacked filter [n, k..., cin, G*cout] -> [k..., n*G*cin, n*G*cout], block
    (j, g) = group g of filter j (G feature groups)."""
    d = ctx.dims(f)
    r = len(d) - 3
    t, blocks, cout = f.tensor, d[0], d[-1]
    if not (isinstance(groups, int) and groups == 1):
        cout = d[-1] // groups
        t = _move(shapes.reshape(t, d[:-1] + [groups, cout]), r + 2, 1)  # [n, G, k..., cin, c]
        blocks = shapes.product([d[0], groups])
        t = shapes.reshape(t, [blocks] + d[1:-1] + [cout])
    diag = tf.linalg.diag(_move(t, 0, r + 2))                   # [k..., cin, cout, B, B]
    perm = list(range(r)) + [r + 2, r, r + 3, r + 1]             # [k..., B, cin, B, cout]
    return shapes.reshape(tf.transpose(diag, perm), d[1:r + 1] + [
        shapes.product([blocks, d[-2]]), shapes.product([blocks, cout])])


def diagonal_blocks(ctx, t, cin, cout, groups=1) -> tf.Tensor:
    """[k..., n*G*cin, n*G*cout] -> [n, k..., cin, G*cout]: the diagonal blocks."""
    d = shapes.dims(t)
    n = ctx.n_dim
    grouped_ = not (isinstance(groups, int) and groups == 1)
    blocks = shapes.product([n, groups]) if grouped_ else n
    r = len(d) - 2
    split = shapes.reshape(t, d[:r] + [blocks, cin, blocks, cout])
    perm = list(range(r)) + [r + 1, r + 3, r, r + 2]             # [k..., cin, cout, B, B]
    diag = tf.linalg.diag_part(tf.transpose(split, perm))      # [k..., cin, cout, B]
    out = _move(diag, r + 2, 0)                                  # [B, k..., cin, cout]
    if not grouped_:
        return out
    out = _move(shapes.reshape(out, [n, groups] + d[:r] + [cin, cout]), 1, r + 2)
    return shapes.reshape(out, [n] + d[:r] + [cin, shapes.product([groups, cout])])


def scale_entries(ctx, sizes, entries, factors=None) -> tf.Tensor:
    """An invariant shape vector with each entry in ``entries`` multiplied by n, and by
    the matching entry of ``factors`` (ints or scalar tensors) if given."""
    factors = [1] * len(entries) if factors is None else factors
    static = tf.get_static_value(sizes)
    if (static is not None and ctx.n_static is not None
            and all(isinstance(f, int) for f in factors)):
        out = [int(v) for v in static]
        for k, f in zip(entries, factors):
            out[k] *= ctx.n_static * f
        return tf.constant(out, sizes.dtype)
    n = tf.cast(ctx.n, sizes.dtype)
    rank = sizes.shape[0]
    scale = {e % rank: n * tf.cast(f, sizes.dtype) for e, f in zip(entries, factors)}
    return sizes * tf.stack([scale.get(k, tf.constant(1, sizes.dtype)) for k in range(rank)])


def nonempty(ctx, compute):
    """``compute()`` (a stacked result) when n > 0; when n == 0 an empty result whose
    per-iteration shape comes from the op run once on zeros. Merging n into channels
    would make zero-channel kernels, which fail, and kernels given an empty batch
    return wrongly shaped results, which later gradient kernels reject."""
    if ctx.n_static is not None and ctx.n_static > 0:
        return compute()
    if ctx.n_static == 0:
        return empty_result(ctx)
    out = tf.cond(ctx.n > 0, compute, lambda: empty_result(ctx))
    out.set_shape(tf.TensorShape([None]).concatenate(ctx.output_shapes[0]))
    return out


def empty_result(ctx) -> tf.Tensor:
    args = [tf.zeros(shapes.shape_tensor(shapes.dims(v.tensor)[1:]), v.dtype)
            if v.is_stacked else v.tensor for v in ctx.inputs]
    out = ctx.emit(*args)[0]
    return tf.zeros(shapes.shape_tensor([0] + shapes.dims(out)), out.dtype)


def grouped(ctx) -> bool:
    """Whether a grouped kernel runs this op: 2-D, not EXPLICIT padding (whose CPU
    kernels have no groups), and a kernel with groups present for its type and dtype
    (cuDNN; on CPU the forward kernels have groups, the gradients only with oneDNN,
    which TF_ENABLE_ONEDNN_OPTS=0 or a CPU it does not serve leaves out, and float64
    runs on Eigen's kernels: so it is asked of the kernel itself, once)."""
    return ("Conv2D" in ctx.op_type and ctx.attr("padding") not in (b"EXPLICIT", "EXPLICIT")
            and _grouped_kernel_present(ctx.op_type, ctx.op.outputs[0].dtype))


@functools.lru_cache(maxsize=None)
def _grouped_kernel_present(op_type: str, dtype) -> bool:
    if tf.config.list_physical_devices("GPU"):
        return True
    if op_type not in ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"):
        return False
    try:
        with tf.init_scope():  # eagerly, also while a graph is built
            _grouped_probe(op_type, dtype)
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError,
            tf.errors.NotFoundError):
        return False
    return True


def _grouped_probe(op_type: str, dtype):
    """The op with two groups of one channel, on zeros."""
    x = tf.zeros([1, 1, 1, 2], dtype)
    kw = dict(strides=[1] * 4, padding="VALID")
    if op_type == "Conv2D":
        return tf.raw_ops.Conv2D(input=x, filter=x, **kw)
    if op_type == "Conv2DBackpropInput":
        return tf.raw_ops.Conv2DBackpropInput(input_sizes=[1, 1, 1, 2], filter=x,
                                              out_backprop=x, **kw)
    return tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=[1, 1, 1, 2],
                                           out_backprop=x, **kw)


def convert_conv_folded(ctx):
    """Stacked input, invariant filter: fold n into the batch."""
    if not channels_last(ctx):
        return ctx.decline("only channels-last convolutions are converted")
    conv = lambda: ctx.emit(folding.fold(ctx, 0), ctx.inputs[1].tensor)[0]  # noqa: E731
    return Stacked(tensor=folded(ctx, conv, 0))


def folded(ctx, compute, k):
    """Unfold ``compute()`` (batch n*b, b from input k); an empty n needs the guard only
    where the output's static shape cannot fix the kernel's empty-batch shape."""
    run = lambda: folding.unfold(ctx, compute(), k, ctx.output_shapes[0])
    if ctx.output_shapes[0].is_fully_defined():
        return run()
    return nonempty(ctx, run)


def convert_conv_stacked_filter(ctx):
    """Stacked filter: side-by-side filters (invariant input), grouped (both stacked, 2-D)
    or block-diagonal (both stacked, 3-D)."""
    if not channels_last(ctx):
        return ctx.decline("only channels-last convolutions are converted")
    x, f = ctx.inputs
    cout = ctx.output_shapes[0].as_list()[-1] or ctx.dims(f)[-1]
    groups = groups_of(channels_of(ctx, x), ctx.dims(f)[-2])

    def compute():
        if not x.is_stacked:
            out = ctx.emit(x.tensor, join_last(ctx, f.tensor, groups))[0]
            return split_last(ctx, out, groups, cout // groups)
        if grouped(ctx):
            out = ctx.emit(to_channels(ctx, x), filter_out(ctx, f))[0]
        else:
            out = ctx.emit(to_channels(ctx, x), block_diagonal(ctx, f, groups))[0]
        return from_channels(ctx, out, cout)

    return Stacked(tensor=nonempty(ctx, compute))


def convert_depthwise(ctx):
    """Stacked filter: n joins the channels (exact, the kernel is per channel)."""
    if not channels_last(ctx):
        return ctx.decline("only channels-last convolutions are converted")
    x, f = ctx.inputs
    cm = ctx.output_shapes[0].as_list()[-1] or shapes.product(ctx.dims(f)[-2:])

    def compute():
        out = ctx.emit(to_channels(ctx, x), filter_in(ctx, f))[0]
        return from_channels(ctx, out, cm)

    return Stacked(tensor=nonempty(ctx, compute))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    ops = ["Conv2D", "Conv3D", "DepthwiseConv2dNative"]
    registry.add(ops, convert_conv_folded, inputs="SU")
    registry.add(["Conv2D", "Conv3D"], convert_conv_stacked_filter, inputs="*S")
    registry.add("DepthwiseConv2dNative", convert_depthwise, inputs="*S")
