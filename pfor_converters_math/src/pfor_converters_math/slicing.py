"""Slicing and gathering converters.

Gather: the loop index gathering rows of an invariant tensor is a plain slice (the most
common op of a loop body); other stacked indices gather with the iteration axis in
front; stacked params gather with one more batch dimension.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core import Stacked, shapes


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


def _rows_of_loop_index(ctx, params):
    """``params[start:start + n]``: what gathering row ``i`` in iteration ``i`` means."""
    n_static = ctx.n_static
    start = tf.get_static_value(ctx.loop_start)
    if start == 0 and n_static is not None and params.shape[:1] == [n_static]:
        return params
    if start == 0 and n_static is not None:
        return params[:n_static]
    return params[ctx.loop_start:ctx.loop_start + ctx.n]


def convert_gather(ctx):
    params, indices, axis_value = ctx.inputs
    axis = _static_int(axis_value, ctx, "axis")
    if axis is None or params.shape.rank is None or indices.shape.rank is None:
        return ctx.decline("axis must be invariant and static; ranks must be known")
    axis = shapes.normalize_axis(axis, params.shape.rank)
    batch_dims = ctx.attr("batch_dims")
    if batch_dims < 0:
        batch_dims += indices.shape.rank
    if not params.is_stacked and batch_dims == 0:
        if axis == 0 and ctx.is_loop_index(indices):
            return Stacked(tensor=_rows_of_loop_index(ctx, params.tensor))
        out = tf.gather(params.tensor, indices.tensor, axis=axis)
        return Stacked(tensor=_move_first(out, axis))
    if params.is_stacked and not indices.is_stacked and batch_dims == 0:
        return Stacked(tensor=tf.gather(params.tensor, indices.tensor, axis=axis + 1))
    return Stacked(tensor=tf.gather(ctx.stacked(0), ctx.stacked(1), axis=axis + 1,
                                    batch_dims=batch_dims + 1))


def register(registry):
    registry.add("GatherV2", convert_gather, inputs="**U")
