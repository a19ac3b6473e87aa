"""Loss ops: softmax cross-entropy folds the iteration axis into the batch axis;
L2Loss is a sum over every axis but the iteration axis.

SoftmaxCrossEntropyWithLogits(features [b, c], labels [b, c]) and
SparseSoftmaxCrossEntropyWithLogits(features [b, c], labels [b]) take one fixed-rank
batch, and rows of the batch are independent. So stacked operands [n, b, ...] become
one batch [n*b, ...], the op runs once, and its outputs (loss [n*b], backprop
[n*b, c]) are split back into [n, b, ...]. An invariant operand has to be tiled over
the iterations to line up row for row (the kernels broadcast only within their rank-2
shapes). Dense labels may broadcast against features within an iteration ([1, c]
against [b, c]); both are then broadcast to the common shape before folding.

L2Loss (half the sum of squares of all elements, as weight decay writes it) reduces
each iteration's value to a scalar: the stacked tensor is squared, halved and summed
over all its axes but the first. A ragged value's padding is zero, so its padded
tensor sums the same way.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Ragged, Stacked, fold_into_batch, shapes


def _common_shape(tensors):
    """Broadcast stacked operands to one shape where their per-iteration shapes may
    differ (the dense op broadcasts [1, c] against [b, c] inside one iteration)."""
    a, b = tensors
    if a.shape.is_fully_defined() and a.shape == b.shape:
        return tensors
    target = tf.broadcast_dynamic_shape(tf.shape(a), tf.shape(b))
    return [tf.broadcast_to(a, target), tf.broadcast_to(b, target)]


def convert_softmax_xent(ctx):
    """Dense labels: fold both [n, b, c] operands to [n*b, c]."""
    if any(v.shape.rank != 2 for v in ctx.inputs):
        return ctx.decline("per-iteration features and labels must have rank 2")
    tensors = _common_shape([ctx.stacked(0), ctx.stacked(1)])
    return _folded(ctx, tensors)


def convert_sparse_softmax_xent(ctx):
    """Class-index labels [n, b] fold to [n*b] alongside features [n*b, c]."""
    features, labels = ctx.inputs
    if features.shape.rank != 2 or labels.shape.rank != 1:
        return ctx.decline("per-iteration features must have rank 2 and labels rank 1")
    return _folded(ctx, [ctx.stacked(0), ctx.stacked(1)])


def _folded(ctx, tensors):
    """Run the op on the iteration axis merged into the batch axis; split outputs."""
    d = ctx.dims(tensors[0])  # [n, b, c]
    merged = [fold_into_batch(t, ctx.n) for t in tensors]
    loss, backprop = ctx.emit(*merged)
    return [Stacked(tensor=shapes.reshape(loss, d[:2])),
            Stacked(tensor=shapes.reshape(backprop, d))]


def convert_l2_loss(ctx):
    """L2Loss of a stacked or ragged input: one scalar per iteration."""
    x = ctx.inputs[0]
    t = x.padded if isinstance(x, Ragged) else x.tensor
    halved = tf.square(t) * tf.constant(0.5, t.dtype)  # halved first, as the kernel does
    rank = shapes.rank_of(x)
    if isinstance(rank, int):
        if rank == 0:  # no axis to sum (a Sum over no axes is not emitted: see reductions)
            return Stacked(tensor=halved)
        return Stacked(tensor=tf.reduce_sum(halved, list(range(1, rank + 1))))
    # Rank known at run time only: one row of every iteration's elements (also for a
    # scalar), so no Sum over a possibly empty list of axes.
    dims = tf.shape(t)
    rows = tf.reshape(halved, tf.stack([dims[0], tf.reduce_prod(dims[1:])]))
    return Stacked(tensor=tf.reduce_sum(rows, 1))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("SoftmaxCrossEntropyWithLogits", convert_softmax_xent, inputs="**")
    registry.add("SparseSoftmaxCrossEntropyWithLogits", convert_sparse_softmax_xent,
                 inputs="**")
    registry.add("L2Loss", convert_l2_loss, inputs="S")
    registry.add("L2Loss", convert_l2_loss, inputs="R")
