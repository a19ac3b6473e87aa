"""The gradient of a broadcasting op between values whose shapes differ between
iterations: ``BroadcastGradientArgs`` of per-iteration shapes, the ``Sum`` over the
axes it gives, and the ``Reshape`` of that sum back to the operand's shape.

``BroadcastGradientArgs(s0, s1)`` gives, for each operand, the axes (of the shapes
aligned from the right, padded with 1s) where that operand has size 1, and nothing
when the two shapes are equal. Per iteration these lists differ in length: a ragged
value. The ``Sum`` over them has a rank that differs between iterations too, which no
layout holds; but all a gradient does with it is reshape it to the operand's shape.
So the sum is kept as a ``SummedRows`` view (sizes 1 kept where summed, as with
``keepdims``), and its ``Reshape`` drops the leading size-1 axes: exactly the operand's
aligned shape.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, NotStacked, Ragged, Stacked, View


def convert_broadcast_gradient_args(ctx):
    """Per-iteration shapes (ranks static): the axes to sum, as ragged values."""
    s0, s1 = (tf.cast(ctx.stack(v), tf.int32) for v in ctx.inputs)
    r0, r1 = s0.shape[1], s1.shape[1]
    if r0 is None or r1 is None:
        raise Decline("shape ranks are not static")
    rank = max(r0, r1)
    n = tf.shape(s0, out_type=tf.int32)[0]
    a0 = tf.concat([tf.ones([n, rank - r0], tf.int32), s0], 1)
    a1 = tf.concat([tf.ones([n, rank - r1], tf.int32), s1], 1)
    fits = tf.reduce_all(tf.equal(a0, a1) | tf.equal(a0, 1) | tf.equal(a1, 1))
    same = (tf.reduce_all(tf.equal(s0, s1), axis=1) if r0 == r1
            else tf.zeros([n], tf.bool))
    outs = []
    for aligned in (a0, a1):
        summed = tf.logical_and(tf.equal(aligned, 1), tf.logical_not(same)[:, None])
        outs.append(_positions(ctx, summed, rank))
    outs[0] = Ragged(padded=ctx.check(fits, "incompatible shapes for broadcasting",
                                      tensor=outs[0].padded), lengths=outs[0].lengths)
    return outs


def _positions(ctx, mask, rank):
    """The positions of True in each row of ``mask`` ``[n, rank]``, front-packed."""
    dtype = ctx.output_dtypes[0]
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    # A stable sort of "not selected" brings the selected positions to the front.
    order = tf.argsort(tf.cast(tf.logical_not(mask), tf.int32), axis=1, stable=True)
    return Ragged.from_stacked(tf.cast(order, dtype), [lengths])


class SummedRows(View):
    """A sum over per-iteration axes, with size 1 kept where summed: ``tensor`` is
    padded ``[n, W...]``, ``extents`` ``[n, rank]`` each iteration's sizes. It has no
    stacked form (the sum's rank differs between iterations); its Reshape reads it."""

    __slots__ = ("extents",)

    def __init__(self, tensor, extents):  # pylint: disable=super-init-not-called
        object.__setattr__(self, "tensor", tensor)
        object.__setattr__(self, "extents", extents)

    def materialize(self):
        return Decline("a sum over axes that differ between iterations has no stacked "
                       "form (its rank differs); only a Reshape reads it")

    @property
    def shape(self) -> tf.TensorShape:
        return tf.TensorShape(None)


def convert_sum_over_ragged_axes(ctx):
    """Sum over per-iteration axes: with keep_dims a value of the data's rank (ragged
    where the body does not know a size), else kept as ``SummedRows``."""
    data, axes = ctx.inputs
    if isinstance(data, Ragged):
        padded, extents = data.padded, data.shapes()
    else:
        try:
            padded = data.tensor
        except NotStacked as err:
            raise Decline(str(err)) from err
        shape = tf.shape(padded, out_type=tf.int32)
        extents = tf.tile(shape[None, 1:], [shape[0], 1])
    rank = padded.shape.rank - 1 if padded.shape.rank is not None else None
    if rank is None:
        raise Decline("data rank is not static")
    picked = tf.one_hot(axes.padded, rank, on_value=True, off_value=False, dtype=tf.bool)
    picked = tf.logical_and(picked, axes.mask((0,))[..., None])
    summed = tf.reduce_any(picked, axis=1)  # [n, rank]
    for a in range(rank):
        total = tf.reduce_sum(padded, axis=1 + a, keepdims=True)
        first = tf.equal(tf.range(tf.shape(padded)[1 + a]), 0)
        first = tf.reshape(first, [1] * (1 + a) + [-1] + [1] * (rank - a - 1))
        slot = tf.where(first, total, tf.zeros_like(total))
        pick = tf.reshape(summed[:, a], [-1] + [1] * rank)
        padded = tf.where(pick, slot, padded)
    extents = tf.where(summed, 1, extents)
    if not ctx.attr("keep_dims"):
        return [SummedRows(padded, extents)]
    return [_sized(ctx, padded, extents)]


def _sized(ctx, padded, extents):
    """``padded`` with per-iteration sizes ``extents``: ragged where the body does not
    know a size, stacked when it knows them all."""
    static = ctx.output_shapes[0]
    rank = extents.shape[1]
    known = [static.rank is not None and static[d] is not None for d in range(rank)]
    # A size the body knows is every iteration's: the padding beyond it goes.
    padded = padded[(slice(None),) + tuple(slice(0, static[d]) if known[d] else slice(None)
                                           for d in range(rank))]
    lengths = [None if known[d] else extents[:, d] for d in range(rank)]
    if all(length is None for length in lengths):
        return Stacked(tensor=padded)
    return Ragged.from_stacked(padded, lengths)


def convert_reshape_summed_rows(ctx):
    """The Reshape of a ``SummedRows`` to the operand's per-iteration shape: drop the
    leading axes (size 1 in every iteration), check the rest is that shape."""
    rows, shape = ctx.inputs
    if not isinstance(rows, SummedRows):
        raise Decline("not a sum over per-iteration axes")
    targets = tf.cast(ctx.stack(shape), tf.int32)
    rank, target_rank = rows.extents.shape[1], targets.shape[1]
    if target_rank is None or rank is None or target_rank > rank:
        raise Decline("target rank not static or above the sum's")
    lead = rank - target_rank
    fits = tf.reduce_all(tf.equal(rows.extents[:, lead:], targets)) & tf.reduce_all(
        tf.equal(rows.extents[:, :lead], 1))
    padded = rows.tensor[(slice(None),) + (0,) * lead]
    padded = ctx.check(fits, "the summed gradient does not have the operand's shape",
                       tensor=padded)
    return _sized(ctx, padded, targets)


def register(registry):
    registry.add("BroadcastGradientArgs", convert_broadcast_gradient_args, inputs="SS")
    registry.add("BroadcastGradientArgs", convert_broadcast_gradient_args, inputs="SU")
    registry.add("BroadcastGradientArgs", convert_broadcast_gradient_args, inputs="US")
    registry.add("Sum", convert_sum_over_ragged_axes, inputs="SR")
    registry.add("Sum", convert_sum_over_ragged_axes, inputs="RR")
    registry.add("Reshape", convert_reshape_summed_rows, inputs="S*", priority=10, narrow=True)
