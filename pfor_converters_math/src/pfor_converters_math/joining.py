"""Joining and splitting converters: concat, stack, unstack, split.

The iteration axis is a new leading dimension, so joining and splitting keep working on
stacked tensors with the per-iteration axis shifted by one (negative axes count from
the end and stay). Joining a mix of stacked and invariant values must tile the
invariant ones, since every iteration's result holds them; splitting needs an
invariant split dimension and sizes (otherwise shapes differ between iterations).
"""

from __future__ import annotations

from pfor_converters_math.shape_ops import shift_axis, shifted_axis_input


def convert_concat_v2(ctx):
    *values, axis = ctx.inputs
    if axis.is_stacked:
        return ctx.decline("stacked concat axis")
    tensors = [ctx.stack(v) for v in values]
    return ctx.emit_stacked(*tensors, shifted_axis_input(axis))


def convert_concat(ctx):
    """The v1 op: the axis comes first."""
    axis, *values = ctx.inputs
    tensors = [ctx.stack(v) for v in values]
    return ctx.emit_stacked(shifted_axis_input(axis), *tensors)


def convert_pack(ctx):
    tensors = [ctx.stack(v) for v in ctx.inputs]
    axis = shift_axis(ctx.attr("axis"))
    return ctx.emit_stacked(*tensors, attrs={"axis": axis})


def convert_unpack(ctx):
    (x,) = ctx.inputs
    axis = shift_axis(ctx.attr("axis"))
    return ctx.emit_stacked(x.tensor, attrs={"axis": axis})


def convert_split(ctx):
    axis, x = ctx.inputs
    return ctx.emit_stacked(shifted_axis_input(axis), x.tensor)


def convert_split_v(ctx):
    x, sizes, axis = ctx.inputs
    return ctx.emit_stacked(x.tensor, sizes.tensor, shifted_axis_input(axis))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("ConcatV2", convert_concat_v2)
    registry.add("Concat", convert_concat, inputs="U*...")
    registry.add("Pack", convert_pack)
    registry.add("Unpack", convert_unpack, inputs="S")
    registry.add("Split", convert_split, inputs="US")
    registry.add("SplitV", convert_split_v, inputs="SUU")
