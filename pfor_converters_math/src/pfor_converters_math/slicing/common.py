"""Helpers the slicing modules share: axis moves and bound entries of stacked slices,
windows at per-iteration offsets (``place``), and the per-iteration plans of slices
whose size differs between iterations (ragged results).

Windows: each iteration reads (or writes) a box of the same size at its own offsets.
Axis by axis, a batched gather picks every position of the box (reading), or every
output position picks the value it lies over or a fill element appended to that axis
when it lies outside the box (writing): one gather per axis, no loop, no scatter.

Ragged slices: each sliced axis is planned per iteration (first element, size, or a
single index for a shrunk axis) with the bounds resolved as the kernel does them (a
negative bound counts from the iteration's end, strided-slice bounds are clipped, a
plain slice's are checked); then one batched gather per axis reads ``first + range(W)``
with the indices clipped into the padded axis, ``W`` being the largest size (under XLA
the input's static size), and a select zeroes what lies past each iteration's size.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import ConversionError, Invariant, Ragged, Stacked, shapes
from pfor_converters_math.shape_ops import static_value


def move_first(tensor, axis):
    """Move ``axis`` of ``tensor`` to the front."""
    if axis == 0:
        return tensor
    rank = tensor.shape.rank
    perm = [axis] + [d for d in range(rank) if d != axis]
    return tf.transpose(tensor, perm)


# -- bounds of stacked slices --------------------------------------------------------
MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def prepend_tensor(tensor, first):
    static = tf.get_static_value(tensor)
    if static is not None:
        return tf.constant([first] + static.tolist(), dtype=tensor.dtype)
    return tf.concat([tf.constant([first], dtype=tensor.dtype), tensor], 0)


def bound_entries(ctx, k, length):
    """Each entry of bound input ``k`` as an int where the body knows it statically
    (a stacked bound is often a pack of constants and one loop-dependent index)."""
    static = static_value(ctx.inputs[k])
    if static is None and ctx.inputs[k].is_stacked:
        static = tf.get_static_value(ctx.op.inputs[k], partial=True)
    if static is None:
        return [None] * length
    return [None if v is None else int(v) for v in static]


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


def uniform_sizes(sizes, ctx, what):
    """The one size all iterations agree on (checked when it runs)."""
    size = tf.maximum(tf.reduce_max(sizes), 0)
    check = tf.debugging.assert_equal(
        sizes, tf.broadcast_to(size, tf.shape(sizes)),
        message=f"pfor: {ctx.op_type} '{ctx.op.name}' {what} of different sizes in "
                "different iterations, so they return different shapes; use bounds that "
                "give every iteration the same size.")
    with tf.control_dependencies([check]):
        return tf.identity(size)


def static_list(tensor):
    value = tf.get_static_value(tensor)
    return None if value is None else [int(v) for v in value]


# -- the input --------------------------------------------------------------------------
class Source:
    """A sliced value: its tensor (padded when ragged), whether it is stacked, each
    per-iteration axis's padded size and each iteration's extent ([n] where it varies)."""

    def __init__(self, ctx, value):
        if isinstance(value, Ragged):
            self.tensor, self.stacked = value.padded, True
            self.lengths = list(value.lengths)
        else:
            self.tensor, self.stacked = value.tensor, value.is_stacked
            self.lengths = [None] * (value.shape.rank or 0)
        self.padded = shapes.dims(self.tensor, ctx.n if self.stacked else None)[
            int(self.stacked):]
        self.extents = [tf.cast(d, tf.int32) if length is None else length
                        for d, length in zip(self.padded, self.lengths)]


def bound_column(ctx, k, entry):
    """Spec entry ``entry`` of bound input ``k``: a Python int where the body knows it,
    an int32 scalar when invariant, an int32 ``[n]`` when it differs per iteration."""
    value = ctx.inputs[k]
    if value.is_stacked:
        static = tf.get_static_value(ctx.op.inputs[k], partial=True)
        if static is not None and static[entry] is not None:
            return int(static[entry])
        return tf.cast(value.tensor[:, entry], tf.int32)
    static = tf.get_static_value(value.tensor)
    if static is not None:
        return int(static[entry])
    return tf.cast(value.tensor[entry], tf.int32)


def _varies(t) -> bool:
    return isinstance(t, tf.Tensor) and t.shape.rank == 1


def clip_bound(value, low, high):
    """``value`` within ``[low, high]``, broadcasting scalars against ``[n]`` vectors."""
    return tf.minimum(tf.maximum(value, low), high)


def resolve_bound(bound, extent):
    """A bound counted from the end when negative."""
    if isinstance(bound, int) and bound >= 0:
        return bound
    return tf.where(bound < 0, bound + extent, bound)


# -- the gather -------------------------------------------------------------------------
def _front(tensor, axis):
    """``tensor`` with ``axis`` moved to the front (a gather put the iterations there)."""
    if axis == 0:
        return tensor
    rank = tensor.shape.rank
    return tf.transpose(tensor, [axis] + [d for d in range(rank) if d != axis])


def _gather(out, stacked, axis, index, varies):
    """Gather ``index`` along per-iteration ``axis``: per iteration when ``varies``
    (``index`` [n, ...]); the result is stacked when either is."""
    if stacked and varies:
        return tf.gather(out, index, axis=axis + 1, batch_dims=1), True
    if stacked:
        return tf.gather(out, index, axis=axis + 1), True
    out = tf.gather(out, index, axis=axis)
    return (_front(out, axis), True) if varies else (out, False)


def _width(ctx, size, padded, known):
    """The padded size of a sliced axis: what the body knows, else the largest size
    (under XLA the input's static size, which bounds every iteration's)."""
    if known is not None:
        return known
    if not _varies(size):
        return size
    if ctx.compiled:
        if isinstance(padded, int):
            return padded
        raise ConversionError(
            f"pfor: {ctx.op_type} '{ctx.op.name}' slices a different size in different "
            "iterations from an axis of no static size, which XLA cannot pad to a size "
            "known at compile time; give the sliced input a static shape.")
    return tf.maximum(tf.reduce_max(size), 0)


def apply_plan(ctx, source, plan, valid):
    """The sliced value from a plan: stacked, or ragged along the axes whose sizes may
    differ between iterations."""
    known = [None if d is None else d for d in ctx.output_shapes[0].as_list()] \
        if ctx.output_shapes[0].rank is not None else None
    # The output axis of every kept input axis.
    kept = [k for k, step in enumerate(plan) if step[0] != "index"]
    out_known = dict(zip(kept, known)) if known is not None else {}
    out, stacked = source.tensor, source.stacked
    lengths = {}
    for k in reversed(range(len(plan))):
        step, padded = plan[k], source.padded[k]
        if step[0] == "whole":
            lengths[k] = source.lengths[k]
            continue
        if step[0] == "index":
            index, extent = step[1], source.extents[k]
            varies = _varies(index) or _varies(extent)
            inside = tf.reduce_all((index >= 0) & (index < extent))
            valid = tf.logical_and(valid, inside)
            # Clipped: an index out of range fails the check below, as the loop fails.
            index = clip_bound(index, 0, tf.maximum(tf.cast(padded, tf.int32) - 1, 0))
            if varies:
                index = tf.broadcast_to(index, [ctx.n])
            out, stacked = _gather(out, stacked, k, index, varies)
            continue
        _, first, size = step
        varies = _varies(first) or _varies(size)
        width = _width(ctx, size, padded, out_known.get(k))
        top = tf.maximum(tf.cast(padded, tf.int32) - 1, 0)
        if varies:
            first = tf.broadcast_to(first, [ctx.n])
            index = tf.clip_by_value(first[:, None] + tf.range(width)[None, :], 0, top)
        else:
            index = tf.clip_by_value(first + tf.range(width), 0, top)
        out, stacked = _gather(out, stacked, k, index, varies)
        ragged = varies and out_known.get(k) is None
        lengths[k] = tf.broadcast_to(size, [ctx.n]) if ragged else None
    out_lengths = [lengths[k] for k in kept]
    if valid is not True:
        out = ctx.check(valid, "begin, size or index out of range for an iteration's "
                        "input", tensor=out)
    if not stacked:
        return Invariant(tensor=out)
    if all(length is None for length in out_lengths):
        return Stacked(tensor=out)
    return Ragged.from_stacked(out, out_lengths)
