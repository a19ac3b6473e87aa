"""Windows at per-iteration offsets: StridedSlice with stacked bounds of one size
(``x[i:i + k]``), and its transpose, StridedSliceGrad, with Pad of stacked paddings
(what the gradients of ``x[i]``, ``x[i:i + k]`` and ``tf.slice(x, [i], [k])`` become
inside a per-example gradient).

Each iteration reads (or writes) a box of the same size at its own offsets. Axis by
axis, a batched gather picks every position of the box (reading), or every output
position picks the value it lies over or a fill element appended to that axis when it
lies outside the box (writing): one gather per axis, no loop, no scatter. Boxes whose
sizes differ between iterations make values of different shapes: a run-time error
naming the op (the ragged layout will take them).
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import ConversionError, Ragged, Stacked, shapes


def place(values, offsets, out_dims, fill, n):
    """``values`` ``[n, *size]`` placed at ``offsets`` ``[n, rank]`` (int32) in a tensor
    ``[n, *out_dims]`` filled with ``fill`` elsewhere. An offset of None marks an axis
    the box covers whole (nothing to place there)."""
    out = values
    for k, dim in enumerate(out_dims):
        if offsets[k] is None:
            continue
        axis = k + 1
        size = shapes.dims(out, n)[axis]
        # One fill element after the box on this axis: positions outside read it.
        pad = [[0, 0]] * (out.shape.rank)
        pad[axis] = [0, 1]
        out = tf.pad(out, pad, constant_values=fill)
        source = tf.range(dim)[None, :] - offsets[k][:, None]  # [n, dim]
        inside = (source >= 0) & (source < size)
        source = tf.where(inside, source, size)
        out = tf.gather(out, source, axis=axis, batch_dims=1)
    return out


def _uniform(sizes, ctx, what):
    """The one size all iterations agree on (checked when it runs)."""
    size = tf.maximum(tf.reduce_max(sizes), 0)
    check = tf.debugging.assert_equal(
        sizes, tf.broadcast_to(size, tf.shape(sizes)),
        message=f"pfor: {ctx.op_type} '{ctx.op.name}' {what} of different sizes in "
                "different iterations, so they return different shapes; use bounds that "
                "give every iteration the same size.")
    with tf.control_dependencies([check]):
        return tf.identity(size)


def convert_strided_slice_window(ctx):
    """StridedSlice with stacked bounds, unit strides, every iteration's box of the same
    size: a batched gather per sliced axis (shrunk axes pick one index)."""
    x, begin, end, strides = ctx.inputs
    steps = _static_list(strides.tensor)
    if steps is None or any(s != 1 for s in steps):
        return ctx.decline("strides must be static and all 1")
    if ctx.attr("ellipsis_mask") or ctx.attr("new_axis_mask") or x.shape.rank is None:
        return ctx.decline("an ellipsis or new axis in the slice, or an unknown rank")
    begin_mask, end_mask = ctx.attr("begin_mask"), ctx.attr("end_mask")
    shrink = ctx.attr("shrink_axis_mask")
    dims = shapes.dims(x.tensor, ctx.n if x.is_stacked else None)[int(x.is_stacked):]
    starts, stops = ctx.stack(begin), ctx.stack(end)
    out, stacked = x.tensor, x.is_stacked
    for k in reversed(range(len(steps))):  # last axis first: earlier axes keep their place
        bit = 1 << k
        if begin_mask & end_mask & bit and not shrink & bit:
            continue
        first = tf.zeros([ctx.n], tf.int32) if begin_mask & bit and not shrink & bit else (
            tf.cast(starts[:, k], tf.int32))
        first = tf.where(first < 0, first + dims[k], first)
        if shrink & bit:
            index = first  # out of range raises in the gather, as the slice would
        else:
            last = tf.fill([ctx.n], tf.cast(dims[k], tf.int32)) if end_mask & bit else (
                tf.cast(stops[:, k], tf.int32))
            last = tf.clip_by_value(tf.where(last < 0, last + dims[k], last), 0, dims[k])
            first = tf.clip_by_value(first, 0, dims[k])
            size = _uniform(tf.maximum(last - first, 0), ctx, "slices windows")
            index = first[:, None] + tf.range(size)[None, :]
        if stacked:
            out = tf.gather(out, index, axis=k + 1, batch_dims=1)
        else:
            out = tf.gather(out, index, axis=k)
            if k:
                rank = out.shape.rank
                out = tf.transpose(out, [k] + [d for d in range(rank) if d != k])
            stacked = True
    return Stacked(tensor=out)


def _static_list(tensor):
    value = tf.get_static_value(tensor)
    return None if value is None else [int(v) for v in value]


def convert_strided_slice_grad(ctx):
    """StridedSliceGrad with a stacked begin or end: ``dy`` placed at each iteration's
    begin. Only unit strides and no ellipsis or new axis (others fall back)."""
    _, begin, _, strides, dy = ctx.inputs
    steps = _static_list(strides.tensor)
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
    dims = _static_list(shape.tensor) or [
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
    totals = [_uniform(pads[:, k, 0] + pads[:, k, 1], ctx, "pads by totals")
              for k in range(x.shape.rank)]
    dims = [d if d is not None else size[k] + totals[k]
            for k, d in enumerate(out_static.as_list())]
    offsets = [befores[:, k] for k in range(x.shape.rank)]
    return Stacked(tensor=place(values, offsets, dims, tf.cast(fill, values.dtype), ctx.n))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    # (a stacked shape: the gradient of a slice of a value whose shape differs per
    # iteration, e.g. a ragged value a loop reads from outside, item by item)
    for pattern in ("USUU*", "UUSU*", "USSU*", "S**U*"):
        registry.add("StridedSliceGrad", convert_strided_slice_grad, inputs=pattern)
    # After the slicing module's converter, which gathers single items (x[i]) directly,
    # and ragged_slices.py's, which leaves it the windows of one size (x[i:i + k]): both
    # bounds stacked (one stacked bound makes sizes that differ, a ragged value).
    registry.add("StridedSlice", convert_strided_slice_window, inputs="*SSU", priority=-2)
    registry.add("Pad", convert_pad_stacked_paddings, inputs="*S")
    registry.add("PadV2", convert_pad_stacked_paddings, inputs="*S*")
