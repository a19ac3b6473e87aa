"""Reverses and rolls in every layout: ReverseV2 and Roll.

They shift their per-iteration axes by one. A roll by per-iteration shifts (or along
per-iteration axes) is a batched gather per rolled axis: iteration j reads
``(k - shift_j) mod d`` along an axis of size d, shifts along one axis summed as the
kernel sums them.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_core.extend import Stacked, shapes
from pfor_converters_math.shape_ops import shifted_axis_input


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
    """Add this family's converters to the pack's registrar."""
    registry.add("ReverseV2", convert_reverse, inputs="SU")
    registry.add("Roll", convert_roll, inputs="SUU")
    registry.add("Roll", convert_roll_per_iteration, inputs="*S*")
    registry.add("Roll", convert_roll_per_iteration, inputs="*US")
