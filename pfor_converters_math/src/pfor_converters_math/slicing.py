"""Slicing and gathering converters.

Gather: the loop index gathering rows of an invariant tensor is a plain slice (the most
common op of a loop body); other stacked indices gather with the iteration axis in
front; stacked params gather with one more batch dimension. The first version of Gather
(``tf.raw_ops.Gather``, rows of params) is GatherV2 on axis 0. GatherNd with stacked
params prepends each row's iteration number to its index tuples.

Slices with invariant bounds prepend a full slice for the iteration axis (StridedSlice
shifts every mask by one bit; the new first spec is an ordinary full range, so an
ellipsis or new axis later in the spec expands exactly as before). Stacked bounds are
handled where they pick single elements: a stacked StridedSlice index on a shrunk axis
(``x[i]``, ``x[:, i]``) and a stacked Slice begin with static sizes become batched
gathers; other stacked bounds are declined here and taken by offsets.py (windows of one
size). Pads, reverses and rolls shift their per-iteration paddings or axes. A roll by
per-iteration shifts (or along per-iteration axes) is a batched gather per rolled axis:
iteration j reads ``(k - shift_j) mod d`` along an axis of size d, shifts along one axis
summed as the kernel sums them.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_core.extend import Decline, Invariant, Stacked, shapes
from pfor_converters_math.shape_ops import (axis_checked, prepend, proven_shape,
                                            shift_axis, shifted_axis_input, static_value)


def _static_int(value, ctx, what):
    if value.is_stacked:
        return None
    static = tf.get_static_value(value.tensor)
    return None if static is None else int(static)


def _move_first(tensor, axis):
    """Move ``axis`` of ``tensor`` to the front."""
    if axis == 0:
        return tensor
    rank = tensor.shape.rank
    perm = [axis] + [d for d in range(rank) if d != axis]
    return tf.transpose(tensor, perm)


def _move_first_dynamic(out, axis, params):
    """Move the gather axis ``axis`` of ``out`` (a gather of ``params``, whose rank may
    be known only at run time) to the front."""
    if axis >= 0 and out.shape.rank is not None:
        return _move_first(out, axis)
    a = tf.constant(axis) if axis >= 0 else axis + tf.rank(params)
    perm = tf.concat([tf.reshape(a, [1]), tf.range(a), tf.range(a + 1, tf.rank(out))], 0)
    return tf.transpose(out, perm)


def _rows_of_loop_index(ctx, params, index):
    """``params[start:start + n]``: what gathering row ``i`` in iteration ``i`` means.

    A slice does not fail where the loop's gather would (params with fewer rows than
    iterations): statically short params are gathered instead, which fails as the
    loop does, and a slice whose row count is known only at run time is checked.
    """
    n_static = ctx.n_static
    start = tf.get_static_value(ctx.loop_start)
    rows = params.shape[0] if params.shape.rank else None
    if start == 0 and n_static is not None and rows is not None:
        if rows == n_static:
            return params
        return params[:n_static] if rows > n_static else tf.gather(params, index)
    if start == 0 and n_static is not None:
        begin, end = 0, n_static
    else:
        begin, end = ctx.loop_start, ctx.loop_start + ctx.n
    have = tf.shape(params, out_type=tf.int32)[0]
    params = ctx.check(end <= have, "indices (the loop index) out of range: the loop "
                       "runs to iteration end - 1 but params has fewer rows (end, rows):",
                       [end, have], tensor=params)
    if n_static is not None and params.shape.rank:
        # A chunk of static size from a run-time start: a slice of static size, which
        # XLA compiles to a dynamic slice (begin:end would be padded to params' rows).
        rest = params.shape.rank - 1
        return tf.slice(params, tf.stack([tf.convert_to_tensor(begin, tf.int32)] + [0] * rest),
                        [n_static] + [-1] * rest)
    return params[begin:end]


def _gather_axis(ctx):
    """Gather's (axis, batch_dims): the axis invariant, static and normalized."""
    params, indices, axis_value = ctx.inputs
    axis = _static_int(axis_value, ctx, "axis")
    if axis is None:
        raise Decline("axis must be invariant and static")
    if params.shape.rank is not None:
        axis = shapes.normalize_axis(axis, params.shape.rank)
    batch_dims = ctx.attr("batch_dims")
    if batch_dims < 0:
        if indices.shape.rank is None:
            raise Decline("negative batch_dims with indices of unknown rank")
        batch_dims += indices.shape.rank
    return axis, batch_dims


def _gather_batched(ctx, axis, batch_dims):
    """Both operands stacked: the iteration axis is one more batch dimension."""
    # Negative axes count from the end, so only non-negative ones move; one out of
    # range for an iteration's params must not reach the iteration axis.
    params_t = axis_checked(ctx, axis, shapes.rank_of(ctx.inputs[0]), ctx.stacked(0))
    return Stacked(tensor=tf.gather(params_t, ctx.stacked(1), axis=shift_axis(axis),
                                    batch_dims=batch_dims + 1))


def convert_gather_invariant_params(ctx):
    """Stacked indices into invariant params: the loop index picking rows is a slice;
    other indices gather once, with the iteration axis moved to the front."""
    params, indices, _ = ctx.inputs
    axis, batch_dims = _gather_axis(ctx)
    if batch_dims:
        return _gather_batched(ctx, axis, batch_dims)
    if axis == 0 and ctx.is_loop_index(indices):
        return Stacked(tensor=_rows_of_loop_index(ctx, params.tensor, indices.tensor))
    out = tf.gather(params.tensor, indices.tensor, axis=axis)
    # The iteration axis of the indices sits at the (normalized) gather axis.
    return Stacked(tensor=_move_first_dynamic(out, axis, params.tensor))


def convert_gather_stacked_params(ctx):
    """Stacked params, invariant indices: one gather on the axis shifted past the
    iteration axis (negative axes count from the end, so only non-negative ones move)."""
    params, indices, _ = ctx.inputs
    axis, batch_dims = _gather_axis(ctx)
    if batch_dims:
        return _gather_batched(ctx, axis, batch_dims)
    params_t = axis_checked(ctx, axis, shapes.rank_of(params), params.tensor)
    return Stacked(tensor=tf.gather(params_t, indices.tensor, axis=shift_axis(axis)))


def convert_gather_stacked_stacked(ctx):
    """Both stacked: a batched gather."""
    return _gather_batched(ctx, *_gather_axis(ctx))


def convert_gather_v1_invariant_params(ctx):
    """Gather (v1) of rows of invariant params by stacked indices: the loop index is a
    slice; other indices gather once (their iteration axis comes first already)."""
    params, indices = ctx.inputs
    if ctx.is_loop_index(indices):
        return Stacked(tensor=_rows_of_loop_index(ctx, params.tensor, indices.tensor))
    return Stacked(tensor=tf.gather(params.tensor, indices.tensor))


def convert_gather_v1_stacked_params(ctx):
    """Gather (v1), stacked params: rows are axis 1 of the stacked params (axis 0 of an
    iteration's), with stacked indices a batched gather."""
    params, indices = ctx.inputs
    batch_dims = 1 if indices.is_stacked else 0
    return Stacked(tensor=tf.gather(params.tensor, indices.tensor, axis=1,
                                    batch_dims=batch_dims))


def convert_gather_nd_invariant_params(ctx):
    """Stacked index tuples into invariant params: one GatherNd as it is."""
    params, indices = ctx.inputs
    return ctx.emit_stacked(params.tensor, indices.tensor)


def convert_gather_nd_stacked_params(ctx):
    """Stacked params: index tuples ``[n, ..., k]`` become ``[n, ..., 1 + k]`` with the
    iteration number first (invariant ones tiled: they are small)."""
    params, indices = ctx.inputs
    if indices.shape.rank is None:
        raise Decline("indices rank unknown")
    tuples = ctx.stacked(1)
    dims = ctx.dims(tuples)
    rows = tf.range(dims[0], dtype=indices.dtype)
    rows = shapes.reshape(rows, dims[:1] + [1] * indices.shape.rank)
    rows = tf.broadcast_to(rows, shapes.shape_tensor(dims[:-1] + [1]))
    return ctx.emit_stacked(params.tensor, tf.concat([rows, tuples], -1))


# -- Slice ------------------------------------------------------------------------------
def convert_slice(ctx):
    """Invariant begin and size: a full slice of the iteration axis in front."""
    x, begin, size = ctx.inputs
    return ctx.emit_stacked(x.tensor, prepend(begin, 0), prepend(size, -1))


def convert_slice_stacked_begin(ctx):
    """A stacked begin with sizes the body knows statically: batched gathers."""
    sizes = proven_shape(ctx)  # static, so no size is -1
    if sizes is None:
        raise Decline("a stacked start needs static sizes")
    return _slice_by_gather(ctx, sizes)


def _slice_by_gather(ctx, sizes):
    """Axes whose start the body knows statically are sliced once; each other axis
    gathers ``start + range(size)`` per iteration."""
    x, begin, _ = ctx.inputs
    if x.shape.rank is None:
        return ctx.decline("a stacked start on a tensor of unknown rank")
    starts = _entries(ctx, 1, len(sizes))
    full = x.shape.as_list()
    out, stacked = x.tensor, x.is_stacked
    if any(s is not None and (s, size) != (0, full[d])
           for d, (s, size) in enumerate(zip(starts, sizes))):
        first = [0 if s is None else s for s in starts]
        count = [-1 if s is None else size for s, size in zip(starts, sizes)]
        out = tf.slice(out, [0] * stacked + first, [-1] * stacked + count)
    for d, size in enumerate(sizes):
        if starts[d] is not None or size == full[d]:
            continue  # sliced already, or the whole axis (whose start can only be 0)
        index = begin.tensor[:, d:d + 1] + tf.range(size, dtype=begin.dtype)
        if stacked:
            out = tf.gather(out, index, axis=d + 1, batch_dims=1)
        else:
            out = _move_first(tf.gather(out, index, axis=d), d)
            stacked = True
    return Stacked(tensor=out) if stacked else Invariant(tensor=out)


# -- StridedSlice -----------------------------------------------------------------------
_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def _strided(ctx, x_tensor, stacked, begin, end, strides, masks):
    """Emit a StridedSlice with invariant bounds (tensors) on a stacked or invariant
    tensor: a stacked one gets a full slice in front and every mask shifted by a bit."""
    if not stacked:
        return ctx.emit(x_tensor, begin, end, strides, attrs=masks)[0]
    shifted = {k: v << 1 for k, v in masks.items()}
    shifted["begin_mask"] |= 1
    shifted["end_mask"] |= 1
    return ctx.emit(x_tensor, *(_prepend_tensor(t, v) for t, v in
                                ((begin, 0), (end, 0), (strides, 1))), attrs=shifted)[0]


def _prepend_tensor(tensor, first):
    static = tf.get_static_value(tensor)
    if static is not None:
        return tf.constant([first] + static.tolist(), dtype=tensor.dtype)
    return tf.concat([tf.constant([first], dtype=tensor.dtype), tensor], 0)


def convert_strided_slice(ctx):
    """Invariant bounds: a full slice of the iteration axis in front, masks shifted."""
    x, begin, end, strides = ctx.inputs
    masks = {k: ctx.attr(k) for k in _MASKS}
    return Stacked(tensor=_strided(ctx, x.tensor, True, begin.tensor, end.tensor,
                                   strides.tensor, masks))


def convert_strided_slice_stacked_bounds(ctx):
    """A stacked bound: single indices on shrunk axes become batched gathers."""
    plan = _plan_stacked_bounds(ctx, {k: ctx.attr(k) for k in _MASKS})
    if isinstance(plan, str):
        raise Decline(plan)
    return _strided_slice_by_gather(ctx, plan)


def _entries(ctx, k, length):
    """Each entry of bound input ``k`` as an int where the body knows it statically
    (a stacked bound is often a pack of constants and one loop-dependent index)."""
    static = static_value(ctx.inputs[k])
    if static is None and ctx.inputs[k].is_stacked:
        static = tf.get_static_value(ctx.op.inputs[k], partial=True)
    if static is None:
        return [None] * length
    return [None if v is None else int(v) for v in static]


def convert_strided_slice_grad(ctx):
    """The gradient of a slice with invariant bounds: the per-iteration shape gets the
    iteration axis in front and the slice a full slice over it, as in StridedSlice."""
    shape, begin, end, strides, _ = ctx.inputs
    masks = {k: ctx.attr(k) for k in _MASKS}
    shifted = {k: v << 1 for k, v in masks.items()}
    shifted["begin_mask"] |= 1
    shifted["end_mask"] |= 1
    n = tf.cast(ctx.n_dim, shape.dtype)
    whole = tf.concat([tf.reshape(n, [1]), shape.tensor], 0)
    bounds = (_prepend_tensor(t, v) for t, v in
              ((begin.tensor, 0), (end.tensor, 0), (strides.tensor, 1)))
    return ctx.emit_stacked(whole, *bounds, ctx.inputs[4].tensor, attrs=shifted)


def _plan_stacked_bounds(ctx, masks):
    """Kind of each spec entry, or a reason to decline. A stacked bound entry may only
    be a single index on a shrunk axis ("gather"); other entries must be static,
    invariant or masked."""
    _, begin, end, strides = ctx.inputs
    length = begin.shape[0] if begin.shape.rank == 1 else None
    steps = static_value(strides)
    if length is None or steps is None:
        return "stacked bounds need static strides and spec length"
    starts, stops = _entries(ctx, 1, length), _entries(ctx, 2, length)
    known_start = [not begin.is_stacked or v is not None for v in starts]
    known_stop = [not end.is_stacked or v is not None for v in stops]
    kinds = []
    for j in range(length):
        bit = 1 << j
        if masks["ellipsis_mask"] & bit:
            kinds.append("ellipsis")
        elif masks["new_axis_mask"] & bit:
            kinds.append("new")
        elif masks["shrink_axis_mask"] & bit:
            if steps[j] <= 0:
                return "shrunk axis with a non-positive stride"
            kinds.append("shrink" if known_start[j] else "gather")
        elif ((known_start[j] or masks["begin_mask"] & bit)
              and (known_stop[j] or masks["end_mask"] & bit)):
            kinds.append("range")
        else:
            return f"stacked slice bound on range axis {j}"
    return dict(kinds=kinds, starts=starts, stops=stops, steps=steps.tolist(), masks=masks)


def _output_axes(kinds, rank):
    """Per-iteration output axis of every spec entry of the invariant slice (None for
    a shrunk entry)."""
    consuming = sum(k in ("shrink", "gather", "range") for k in kinds)
    axes, pos = [], 0
    for kind in kinds:
        axes.append(None if kind == "shrink" else pos)
        pos += {"ellipsis": rank - consuming, "shrink": 0}.get(kind, 1)
    return axes


def _strided_slice_by_gather(ctx, plan):
    """One invariant-bounds slice that keeps each gathered axis whole, then a batched
    gather of each iteration's index on it (last axis first, so the axis numbers of
    earlier ones stay valid)."""
    x, begin, end, _ = ctx.inputs
    kinds, masks, steps = plan["kinds"], dict(plan["masks"]), plan["steps"]
    if x.shape.rank is None and ("ellipsis" in kinds or not x.is_stacked):
        return ctx.decline("stacked indices into a tensor of unknown rank")
    gather = [j for j, k in enumerate(kinds) if k == "gather"]
    for j in gather:
        masks["begin_mask"] |= 1 << j
        masks["end_mask"] |= 1 << j
        masks["shrink_axis_mask"] &= ~(1 << j)
        steps[j] = 1
    out = x.tensor
    if not all(_whole(j, kind, masks, steps) for j, kind in enumerate(kinds)):
        starts = _bound_tensor(begin, plan["starts"])
        stops = _bound_tensor(end, plan["stops"])
        steps = tf.constant(steps, dtype=ctx.inputs[3].dtype)
        out = _strided(ctx, out, x.is_stacked, starts, stops, steps, masks)
    stacked = x.is_stacked
    axes = _output_axes(kinds, x.shape.rank or 0)
    for j in reversed(gather):
        axis = axes[j] + int(stacked)
        index = begin.tensor[:, j]
        size = out.shape[axis]
        if size is None:
            size = tf.shape(out, out_type=index.dtype)[axis]
        index = tf.where(index < 0, index + size, index)
        if stacked:
            out = tf.gather(out, index, axis=axis, batch_dims=1)
        else:
            out = _move_first(tf.gather(out, index, axis=axis), axis)
            stacked = True
    return Stacked(tensor=out) if stacked else Invariant(tensor=out)


def _whole(j, kind, masks, steps):
    """Whether spec entry ``j`` keeps its axis as it is (e.g. ``x[i]``: no slice needed
    before the gather)."""
    bit = 1 << j
    return (kind in ("gather", "range") and steps[j] == 1
            and masks["begin_mask"] & masks["end_mask"] & bit)


def _bound_tensor(value, entries):
    """An invariant bound as it is; a stacked one as its static entries (0 where the
    entry is masked or gathered)."""
    if not value.is_stacked:
        return value.tensor
    return tf.constant([0 if v is None else v for v in entries], dtype=value.dtype)


# -- pads, reverses, rolls --------------------------------------------------------------
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


def convert_reverse(ctx):
    x, axis = ctx.inputs
    return ctx.emit_stacked(x.tensor, shifted_axis_input(axis, ctx, shapes.rank_of(x)))


def convert_roll(ctx):
    x, shift, axis = ctx.inputs
    axis_t = shifted_axis_input(axis, ctx, shapes.rank_of(x))
    return ctx.emit_stacked(x.tensor, shift.tensor, axis_t)


def convert_roll_per_iteration(ctx):
    """Roll with a stacked shift or axis: one batched gather per axis that may roll."""
    x, shift, axis = ctx.inputs
    rank = x.shape.rank
    if rank is None or shift.shape.rank is None or axis.shape.rank is None:
        return ctx.decline("the ranks of the input, shift and axis must be known")
    if rank == 0:
        return ctx.decline("a scalar input (the kernel rejects it)")
    out = ctx.stack(x)  # the result is that size anyway

    def per_iteration(value):  # [n, k] (or [1, k] for an invariant one)
        t = tf.cast(value.tensor, tf.int64)
        if value.shape.rank == 0:
            return t[:, None] if value.is_stacked else t[None, None]
        return t if value.is_stacked else t[None, :]

    shifts, axes = per_iteration(shift), per_iteration(axis)
    axes = tf.where(axes < 0, axes + rank, axes)
    static_axes = None if axis.is_stacked else tf.get_static_value(axis.tensor)
    if static_axes is not None and not all(-rank <= a < rank for a in np.ravel(static_axes)):
        static_axes = None  # out of range: fail at run time, as the kernel does
    if static_axes is None:
        out = ctx.check(tf.reduce_all((axes >= 0) & (axes < rank)),
                        f"axis out of range for a tensor of rank {rank}", tensor=out)
        candidates = range(rank)
    else:
        candidates = sorted({int(a) % rank for a in np.ravel(static_axes)})
    d = ctx.dims(out)
    for a in candidates:
        total = tf.reduce_sum(tf.where(tf.equal(axes, a), shifts, 0), axis=1)  # [n]
        size = tf.cast(d[a + 1], tf.int64)
        index = tf.math.floormod(tf.range(size)[None, :] - total[:, None],
                                 tf.maximum(size, 1))
        out = tf.gather(out, index, axis=a + 1, batch_dims=1)
    return Stacked(tensor=out)


def register(registry):
    """Add this family's converters to the pack's registrar: one per input pattern."""
    registry.add("GatherV2", convert_gather_invariant_params, inputs="USU")
    registry.add("GatherV2", convert_gather_stacked_params, inputs="SUU")
    registry.add("GatherV2", convert_gather_stacked_stacked, inputs="SSU")
    registry.add("Gather", convert_gather_v1_invariant_params, inputs="US")
    registry.add("Gather", convert_gather_v1_stacked_params, inputs="S*")
    registry.add("GatherNd", convert_gather_nd_invariant_params, inputs="US")
    registry.add("GatherNd", convert_gather_nd_stacked_params, inputs="S*")
    registry.add("Slice", convert_slice, inputs="SUU")
    registry.add("Slice", convert_slice_stacked_begin, inputs="*SU")
    registry.add("StridedSlice", convert_strided_slice, inputs="SUUU")
    # A stacked begin, or a stacked end with an invariant begin.
    registry.add("StridedSlice", convert_strided_slice_stacked_bounds, inputs="*S*U")
    registry.add("StridedSlice", convert_strided_slice_stacked_bounds, inputs="*USU")
    registry.add("StridedSliceGrad", convert_strided_slice_grad, inputs="UUUUS")
    registry.add(["Pad", "MirrorPad"], convert_pad, inputs="SU")
    registry.add("PadV2", convert_pad, inputs="SUU")
    registry.add("ReverseV2", convert_reverse, inputs="SU")
    registry.add("Roll", convert_roll, inputs="SUU")
    registry.add("Roll", convert_roll_per_iteration, inputs="*S*")
    registry.add("Roll", convert_roll_per_iteration, inputs="*US")
