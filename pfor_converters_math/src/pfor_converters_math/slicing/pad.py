"""Pads in every layout: Pad, PadV2, MirrorPad.

Invariant paddings of a stacked input get a ``[0, 0]`` row for the iteration axis.
Stacked paddings whose totals agree between iterations write each iteration's input at
its own offsets (``common.place``). A ragged input with invariant paddings pads the
padded tensor: a dimension that varies gets ``before + L_i + after``; a nonzero constant
is written into the padding first and the result masked. Paddings that differ per
iteration (padding to a fixed size, ``[[0, 128 - L_i]]``) move each dimension of a
ragged input by a per-iteration gather.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Stacked, padded_operands, shapes
from pfor_converters_math.shape_ops import prepend
from pfor_converters_math.slicing.common import uniform_sizes, place


def convert_pad(ctx):
    """Pad / PadV2 / MirrorPad: no padding on the iteration axis."""
    x, paddings, *rest = ctx.inputs
    tensor = x.tensor
    reflect_empty = (ctx.op_type == "MirrorPad" and ctx.attr("mode") == b"REFLECT"
                     and ctx.n_static in (None, 0))
    if reflect_empty and x.shape.rank is None:
        return ctx.decline("REFLECT padding of a possibly empty stack needs a known rank")
    if reflect_empty:
        # REFLECT needs every axis longer than its padding, so also n > 0: give an
        # empty stack one dummy row, dropped again below (no copy when n > 0).
        tensor = tf.pad(tensor, [[0, tf.maximum(1 - ctx.n, 0)]] + [[0, 0]] * x.shape.rank)
    out = ctx.emit(tensor, prepend(paddings, [0, 0]), *[v.tensor for v in rest])[0]
    return Stacked(tensor=out[:ctx.n] if reflect_empty else out)


def convert_pad_stacked_paddings(ctx):
    """Pad / PadV2 with per-iteration paddings whose totals agree between iterations
    (otherwise the loop's outputs differ in shape: an error naming the op)."""
    x, paddings, *rest = ctx.inputs
    out_static = ctx.output_shapes[0]
    if x.shape.rank is None or out_static.rank is None:
        return ctx.decline("the rank is unknown")
    fill = rest[0].tensor if rest else tf.zeros([], x.dtype)
    pads = tf.cast(ctx.stack(paddings), tf.int32)  # [n, rank, 2]
    values = ctx.stack(x)
    size = shapes.dims(values, ctx.n)[1:]
    nonnegative = tf.debugging.assert_non_negative(
        pads, message=f"{ctx.op_type} '{ctx.op.name}': paddings must be non-negative")
    with tf.control_dependencies([nonnegative]):
        befores = tf.identity(pads[:, :, 0])
    totals = [uniform_sizes(pads[:, k, 0] + pads[:, k, 1], ctx, "pads by totals")
              for k in range(x.shape.rank)]
    dims = [d if d is not None else size[k] + totals[k]
            for k, d in enumerate(out_static.as_list())]
    offsets = [befores[:, k] for k in range(x.shape.rank)]
    return Stacked(tensor=place(values, offsets, dims, tf.cast(fill, values.dtype), ctx.n))


def _paddings(ctx, value, rank):
    if value.is_stacked:
        return None
    static = tf.get_static_value(value.tensor)
    if static is None or static.shape != (rank, 2):
        return None
    return static.astype("int64").tolist()


def convert_ragged_pad(ctx):
    x, paddings = ctx.inputs[:2]
    constant = ctx.inputs[2] if len(ctx.inputs) > 2 else None
    if constant is not None and constant.is_stacked:
        return ctx.decline("the padding value differs per iteration")
    fill = tf.zeros([], x.dtype) if constant is None else tf.cast(constant.tensor, x.dtype)
    static = _paddings(ctx, paddings, x.rank)
    if static is None and not paddings.is_stacked:
        return ctx.decline("paddings known only at run time")
    if static is not None:
        if any(p < 0 for pair in static for p in pair):
            return ctx.decline("negative paddings")
        filled = x.padded if constant is None else x.masked(fill=fill)
        out = tf.pad(filled, [[0, 0]] + static, constant_values=fill)
        lengths = [None if length is None else length + before + after
                   for length, (before, after) in zip(x.lengths, static)]
        return padded_operands.result(out, lengths, masked=constant is not None)
    if ctx.compiled:
        return ctx.decline("paddings that differ per iteration give a size known only at run time")
    amounts = tf.cast(paddings.tensor, tf.int32)  # [n, rank, 2]
    amounts = ctx.check(tf.reduce_all(amounts >= 0), "paddings must be non-negative:",
                        [amounts], tensor=amounts)
    out = x.padded
    extents = x.extents()
    lengths = []
    known = ctx.output_shapes[0].as_list()  # sizes the body knows are the same everywhere
    for d in range(x.rank):
        before, after = amounts[:, d, 0], amounts[:, d, 1]
        width = tf.shape(out, out_type=tf.int32)[d + 1]
        total = before + extents[d] + after
        new_width = (known[d] if known[d] is not None else
                     tf.reduce_max(tf.concat([total, [0]], 0)))
        slot = [[0, 0]] * (x.rank + 1)
        slot[d + 1] = [0, 1]
        source = tf.range(new_width)[None, :] - before[:, None]
        inside = (source >= 0) & (source < extents[d][:, None])
        index = tf.where(inside, source, width)  # outside: the zero slot
        out = tf.gather(tf.pad(out, slot), index, axis=d + 1, batch_dims=1)
        if constant is not None:
            shape = [-1] + [1] * x.rank
            shape[d + 1] = new_width
            out = tf.where(tf.reshape(inside, shape), out, fill)
        lengths.append(total if known[d] is None else None)
    if all(length is None for length in lengths):
        return Stacked(tensor=out)
    return padded_operands.result(out, lengths)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(["Pad", "MirrorPad"], convert_pad, inputs="SU")
    registry.add("PadV2", convert_pad, inputs="SUU")
    registry.add("Pad", convert_pad_stacked_paddings, inputs="*S")
    registry.add("PadV2", convert_pad_stacked_paddings, inputs="*S*")
    registry.add("Pad", convert_ragged_pad, inputs="R*")
    registry.add("PadV2", convert_ragged_pad, inputs="R*U")
