"""StridedSliceGrad (the gradient of a slice) in every layout.

Invariant bounds and shape with a stacked ``dy``: one StridedSliceGrad with a full
slice of the iteration axis in front. Per-iteration bounds or shape (what the gradients
of ``x[i]``, ``x[i:i + k]`` and ``tf.slice(x, [i], [k])`` become inside a per-example
gradient): each iteration writes its ``dy`` box at its own offsets (``common.place``).
A ragged ``dy`` (the gradient of a slice whose size differs between iterations) is
placed padded at each iteration's begin: its zero padding lands where the gradient is
zero anyway.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import ConversionError, Ragged, Stacked, shapes
from pfor_converters_math.slicing.common import (MASKS, bound_column, prepend_tensor,
                                                 static_list, place)


def convert_strided_slice_grad(ctx):
    """The gradient of a slice with invariant bounds: the per-iteration shape gets the
    iteration axis in front and the slice a full slice over it, as in StridedSlice."""
    shape, begin, end, strides, _ = ctx.inputs
    masks = {k: ctx.attr(k) for k in MASKS}
    shifted = {k: v << 1 for k, v in masks.items()}
    shifted["begin_mask"] |= 1
    shifted["end_mask"] |= 1
    n = tf.cast(ctx.n_dim, shape.dtype)
    whole = tf.concat([tf.reshape(n, [1]), shape.tensor], 0)
    bounds = (prepend_tensor(t, v) for t, v in
              ((begin.tensor, 0), (end.tensor, 0), (strides.tensor, 1)))
    return ctx.emit_stacked(whole, *bounds, ctx.inputs[4].tensor, attrs=shifted)


def convert_strided_slice_grad_at_offsets(ctx):
    """StridedSliceGrad with a stacked begin or end: ``dy`` placed at each iteration's
    begin. Only unit strides and no ellipsis or new axis (others fall back)."""
    _, begin, _, strides, dy = ctx.inputs
    steps = static_list(strides.tensor)
    if steps is None or any(s != 1 for s in steps):
        return ctx.decline("strides must be static and all 1")
    if ctx.attr("ellipsis_mask") or ctx.attr("new_axis_mask"):
        return ctx.decline("an ellipsis or new axis in the slice")
    out_static = ctx.output_shapes[0]
    if out_static.rank is None:
        return ctx.decline("the output rank is unknown")
    rank = out_static.rank
    dims, row_dims = grad_dims(ctx)
    begin_mask, end_mask = ctx.attr("begin_mask"), ctx.attr("end_mask")
    shrink = ctx.attr("shrink_axis_mask")
    starts = ctx.stack(begin) if begin.is_stacked else None
    offsets = []  # None: the whole axis, nothing to place
    for k in range(rank):
        bit = 1 << k
        if k >= len(steps) or (begin_mask & end_mask & bit and not shrink & bit):
            offsets.append(None)
        elif begin_mask & bit and not shrink & bit:
            offsets.append(tf.zeros([ctx.n], tf.int32))
        else:
            first = (starts[:, k] if starts is not None
                     else tf.broadcast_to(begin.tensor[k], [ctx.n]))
            first = tf.cast(first, tf.int32)
            first = tf.where(first < 0, first + row_dims[k], first)
            offsets.append(tf.clip_by_value(first, 0, row_dims[k]))
    values = ctx.stack(dy)
    values_dims = shapes.dims(values, ctx.n)
    full, taken = [values_dims[0]], 1
    for k in range(rank):
        if k < len(steps) and shrink & (1 << k):
            full.append(1)
        else:
            full.append(values_dims[taken])
            taken += 1
    values = shapes.reshape(values, full)
    return grad_output(ctx, place(values, offsets, dims, tf.zeros([], values.dtype), ctx.n),
                       row_dims)


def grad_dims(ctx):
    """StridedSliceGrad's output dims (of the whole padded output) and each row's own
    (int32 ``[n]`` per axis where the sliced value differs in shape per iteration: a
    stacked ``shape`` input)."""
    shape, out_static = ctx.inputs[0], ctx.output_shapes[0]
    if shape.is_stacked:
        sizes = tf.cast(ctx.stacked(0), tf.int32)  # [n, rank]
        static = out_static.as_list()
        if ctx.compiled and None in static:
            raise ConversionError(
                f"pfor: {ctx.op_type} '{ctx.op.name}' (a slice's gradient) makes a value "
                "whose shape differs between iterations, of sizes known only at run time "
                "(as in a gradient loop), which XLA cannot pad to a size known at compile "
                "time; run it without jit_compile.")
        return ([d if d is not None else tf.reduce_max(tf.concat([sizes[:, k], [0]], 0))
                 for k, d in enumerate(static)],
                [sizes[:, k] for k in range(out_static.rank)])
    dims = static_list(shape.tensor) or [
        d if d is not None else tf.cast(shape.tensor[k], tf.int32)
        for k, d in enumerate(out_static.as_list())]
    return dims, dims


def grad_output(ctx, out, row_dims):
    """StridedSliceGrad's output ``out`` (padded): ragged along the axes whose size
    differs per iteration (a stacked ``shape``), else stacked."""
    varying = [row_dims[k] if ctx.inputs[0].is_stacked and d is None else None
               for k, d in enumerate(ctx.output_shapes[0].as_list())]
    if all(v is None for v in varying):
        return Stacked(tensor=out)
    return Ragged.from_stacked(out, varying)


def convert_strided_slice_grad_ragged(ctx):
    """StridedSliceGrad of a ragged ``dy`` (the gradient of a slice whose size differs
    between iterations): the padded ``dy`` placed at each iteration's begin."""
    _, _, _, strides, dy = ctx.inputs
    steps = tf.get_static_value(strides.tensor)
    if steps is None or any(int(s) != 1 for s in steps):
        return ctx.decline("strides must be static and all 1")
    if ctx.attr("ellipsis_mask") or ctx.attr("new_axis_mask"):
        return ctx.decline("an ellipsis or new axis in the slice")
    out_static = ctx.output_shapes[0]
    if out_static.rank is None:
        return ctx.decline("the output rank is unknown")
    dims, row_dims = grad_dims(ctx)
    begin_mask, end_mask = ctx.attr("begin_mask"), ctx.attr("end_mask")
    shrink = ctx.attr("shrink_axis_mask")
    values, offsets = dy.padded, []
    for k in range(out_static.rank):
        bit = 1 << k
        if k < len(steps) and shrink & bit:
            values = tf.expand_dims(values, k + 1)
        if k >= len(steps) or (begin_mask & end_mask & bit and not shrink & bit):
            offsets.append(None)
        elif begin_mask & bit and not shrink & bit:
            offsets.append(tf.zeros([ctx.n], tf.int32))
        else:
            first = tf.broadcast_to(bound_column(ctx, 1, k), [ctx.n])
            first = tf.where(first < 0, first + row_dims[k], first)
            offsets.append(tf.clip_by_value(first, 0, row_dims[k]))
    return grad_output(ctx, place(values, offsets, dims, tf.zeros([], values.dtype), ctx.n),
                       row_dims)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("StridedSliceGrad", convert_strided_slice_grad, inputs="UUUUS")
    # (a stacked shape: the gradient of a slice of a value whose shape differs per
    # iteration, e.g. a ragged value a loop reads from outside, item by item)
    for pattern in ("USUU*", "UUSU*", "USSU*", "S**U*"):
        registry.add("StridedSliceGrad", convert_strided_slice_grad_at_offsets,
                     inputs=pattern)
    # (a stacked shape: a slice of a value whose shape differs per iteration)
    for pattern in ("USUUR", "UUSUR", "USSUR", "S**UR"):
        registry.add("StridedSliceGrad", convert_strided_slice_grad_ragged, inputs=pattern)
