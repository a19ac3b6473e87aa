"""Joining and splitting ops in every layout: concat, stack, unstack, split.

The iteration axis is a new leading dimension, so joining and splitting keep working on
stacked tensors with the per-iteration axis shifted by one (negative axes count from
the end and stay). Joining a mix of stacked and invariant values must tile the
invariant ones, since every iteration's result holds them; splitting needs an
invariant split dimension and sizes (otherwise shapes differ between iterations).
Inputs of unknown rank need nothing else, but their axes are checked at run time
(``shifted_axis_input``), as the loop's kernel checks them.

Ragged values (pattern letter R): ConcatV2 along a dimension that varies puts each
iteration's pieces one after the other: the operands' padded tensors are concatenated,
one zero slot appended, and a per-iteration index picks, for every output position, the
element of the operand it falls in (the zero slot for the padding), so the padding is
zero by construction and a gradient reaching it lands in the dropped slot. Along a fixed
dimension, or for Pack, the dimensions that vary must vary alike in every operand (sizes
checked at run time; a varying one against a fixed one is declined) and the padded
tensors are joined.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Ragged, Stacked, padded_operands, shapes
from pfor_converters_math.ragged_common import is_ragged, join, static_axes
from pfor_converters_math.shape_ops import axis_checked, shift_axis, shifted_axis_input


def convert_concat_v2(ctx):
    *values, axis = ctx.inputs
    if "R" in ctx.pattern:  # ragged operands: convert_ragged_concat
        return ctx.decline("a ragged operand")
    if axis.is_stacked:
        return ctx.decline("stacked concat axis")
    tensors = [ctx.stack(v) for v in values]
    axis_t = shifted_axis_input(axis, ctx, shapes.max_rank(values))
    return Stacked(tensor=ctx.emit(*tensors, axis_t)[0])


def convert_concat(ctx):
    """The v1 op: the axis comes first."""
    axis, *values = ctx.inputs
    tensors = [ctx.stack(v) for v in values]
    axis_t = shifted_axis_input(axis, ctx, shapes.max_rank(values))
    return Stacked(tensor=ctx.emit(axis_t, *tensors)[0])


def convert_pack(ctx):
    if "R" in ctx.pattern:  # ragged operands: convert_ragged_pack
        return ctx.decline("a ragged operand")
    tensors = [ctx.stack(v) for v in ctx.inputs]
    axis = ctx.attr("axis")
    tensors[0] = axis_checked(ctx, axis, shapes.max_rank(ctx.inputs) + 1, tensors[0])
    return Stacked(tensor=ctx.emit(*tensors, attrs={"axis": shift_axis(axis)})[0])


def convert_unpack(ctx):
    (x,) = ctx.inputs
    axis = ctx.attr("axis")
    tensor = axis_checked(ctx, axis, shapes.rank_of(x), x.tensor)
    return [Stacked(tensor=t) for t in ctx.emit(tensor, attrs={"axis": shift_axis(axis)})]


def convert_split(ctx):
    axis, x = ctx.inputs
    axis_t = shifted_axis_input(axis, ctx, shapes.rank_of(x))
    return [Stacked(tensor=t) for t in ctx.emit(axis_t, x.tensor)]


def convert_split_v(ctx):
    x, sizes, axis = ctx.inputs
    axis_t = shifted_axis_input(axis, ctx, shapes.rank_of(x))
    return [Stacked(tensor=t) for t in ctx.emit(x.tensor, sizes.tensor, axis_t)]


def _ragged_split_axis(ctx, x, axis):
    """The split axis of a ragged ``x``, or a decline where it varies (the loop then
    splits each iteration's extent) or is not known when converting."""
    a = tf.get_static_value(axis.tensor)
    if a is None:
        raise Decline("a split axis known only at run time")
    a = int(a) % x.rank
    if x.lengths[a] is not None:
        raise Decline("a split along a dimension that varies")
    return a


def convert_ragged_split(ctx):
    axis, x = ctx.inputs
    a = _ragged_split_axis(ctx, x, axis)
    return [x.with_padded(t) for t in tf.split(x.padded, int(ctx.attr("num_split")), a + 1)]


def convert_ragged_split_v(ctx):
    x, sizes, axis = ctx.inputs
    a = _ragged_split_axis(ctx, x, axis)
    return [x.with_padded(t) for t in tf.split(x.padded, sizes.tensor, a + 1,
                                               num=int(ctx.attr("num_split")))]


def _join_others(ctx, values, skip, rank):
    """Dimensions other than ``skip`` that vary in some operand: joined (checked,
    padded alike). Returns (lengths per dimension, padded/stacked tensors)."""
    tensors = [v.padded if is_ragged(v) else ctx.stack(v) for v in values]
    lengths = [None] * rank
    for d in range(rank):
        if d == skip:
            continue
        if not any(is_ragged(v) and v.lengths[d] is not None for v in values):
            continue
        current = [v.with_padded(t) if is_ragged(v) else Stacked(tensor=t)
                   for v, t in zip(values, tensors)]
        lengths[d], joined = join(ctx, current, [1 + d] * len(values), f"dimension {d}")
        for k, t in joined.items():
            tensors[k] = t
    return lengths, tensors


def convert_ragged_concat(ctx):
    *values, axis = ctx.inputs
    if not any(is_ragged(v) for v in values):
        return ctx.decline("no ragged operand")
    ranks = {v.rank if is_ragged(v) else v.shape.rank for v in values}
    if len(ranks) != 1 or None in ranks:
        return ctx.decline("operands of one known rank expected")
    rank = ranks.pop()
    a = int(static_axes(ctx, axis, rank)[0])
    lengths, tensors = _join_others(ctx, values, a, rank)
    if not any(is_ragged(v) and v.lengths[a] is not None for v in values):
        lengths[a] = None
        return Ragged(padded=tf.concat(tensors, a + 1), lengths=tuple(lengths))
    # Along a varying dimension: each iteration's pieces one after the other.
    widths = [padded_operands.padded_dims(ctx, Stacked(tensor=t))[a + 1] for t in tensors]
    zero = [[0, 0]] * (rank + 1)
    zero[a + 1] = [0, 1]
    joined = tf.pad(tf.concat(tensors, a + 1), zero)  # one zero slot at the end
    total_width = sum(widths) if all(isinstance(w, int) for w in widths) else tf.add_n(
        [tf.cast(w, tf.int32) for w in widths])
    positions = tf.range(total_width)[None, :]
    index = tf.fill(tf.stack([ctx.n, total_width]), tf.cast(total_width, tf.int32))
    start = tf.zeros([ctx.n], tf.int32)[:, None]
    offset = 0
    for v, width in zip(values, widths):
        extent = v.extents()[a] if is_ragged(v) else tf.fill([ctx.n], tf.cast(width, tf.int32))
        extent = extent[:, None]
        inside = (positions >= start) & (positions < start + extent)
        index = tf.where(inside, positions - start + offset, index)
        start = start + extent
        offset = offset + width
    out = tf.gather(joined, index, axis=a + 1, batch_dims=1)
    lengths[a] = start[:, 0]
    return Ragged(padded=out, lengths=tuple(lengths))


def convert_ragged_pack(ctx):
    values = ctx.inputs
    rank = values[0].rank
    if any(v.rank != rank for v in values) or any(
            (x is None) != (y is None) for v in values for x, y in zip(v.lengths, values[0].lengths)):
        return ctx.decline("operands that vary in different dimensions")
    lengths, tensors = _join_others(ctx, values, None, rank)
    a = int(ctx.attr("axis")) % (rank + 1)
    lengths.insert(a, None)
    return Ragged(padded=tf.stack(tensors, a + 1), lengths=tuple(lengths))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("ConcatV2", convert_concat_v2)
    registry.add("Concat", convert_concat, inputs="U*...")
    registry.add("Pack", convert_pack)
    registry.add("Unpack", convert_unpack, inputs="S")
    registry.add("Split", convert_split, inputs="US")
    registry.add("SplitV", convert_split_v, inputs="SUU")
    # Along a dimension that does not vary: each part keeps the lengths.
    registry.add("Split", convert_ragged_split, inputs="UR")
    registry.add("SplitV", convert_ragged_split_v, inputs="RUU")
    # Any number of operands, ragged or not, then the axis ("?": any layout); declines
    # inputs without a ragged operand (the stacked converter takes those).
    registry.add("ConcatV2", convert_ragged_concat, inputs="?...")
    registry.add("Pack", convert_ragged_pack, inputs="R...")
