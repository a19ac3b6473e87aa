"""Gathers in every layout: GatherV2, Gather (its first version) and GatherNd.

The loop index gathering rows of an invariant tensor is a plain slice (the most common op
of a loop body); other stacked indices gather with the iteration axis in front; stacked
params gather with one more batch dimension. The first version of Gather
(``tf.raw_ops.Gather``, rows of params) is GatherV2 on axis 0. GatherNd with stacked
params prepends each row's iteration number to its index tuples. (GatherV2 by ragged
indices, what ``tf.boolean_mask`` becomes, lives in ``masks.py``.)
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Stacked, shapes
from pfor_converters_math.shape_ops import axis_checked, shift_axis
from pfor_converters_math.slicing.common import move_first


def _static_int(value, ctx, what):
    if value.is_stacked:
        return None
    static = tf.get_static_value(value.tensor)
    return None if static is None else int(static)


def _move_first_dynamic(out, axis, params):
    """Move the gather axis ``axis`` of ``out`` (a gather of ``params``, whose rank may
    be known only at run time) to the front."""
    if axis >= 0 and out.shape.rank is not None:
        return move_first(out, axis)
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


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("GatherV2", convert_gather_invariant_params, inputs="USU")
    registry.add("GatherV2", convert_gather_stacked_params, inputs="SUU")
    registry.add("GatherV2", convert_gather_stacked_stacked, inputs="SSU")
    registry.add("Gather", convert_gather_v1_invariant_params, inputs="US")
    registry.add("Gather", convert_gather_v1_stacked_params, inputs="S*")
    registry.add("GatherNd", convert_gather_nd_invariant_params, inputs="US")
    registry.add("GatherNd", convert_gather_nd_stacked_params, inputs="S*")
