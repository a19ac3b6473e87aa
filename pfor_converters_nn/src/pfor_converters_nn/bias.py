"""BiasAdd: the bias is added along the channel axis of each iteration's value.

A stacked value with an invariant bias is one BiasAdd (channels-last), or a
broadcasting add after moving the bias to the channel axis (channels-first). A stacked
bias lines up with the value's channel axis by size-1 axes and adds with broadcasting.

BiasAddGrad sums the gradient over every axis but the channel axis; for a stacked
gradient that is one reduce_sum over those axes, shifted past the stacked axis.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Stacked, shapes
from pfor_converters_nn.unfolded import before_unfold


def convert_bias_add(ctx):
    value, bias = ctx.inputs
    rank = value.shape.rank
    if rank is None:
        return ctx.decline("the value's rank is unknown")
    channels_first = ctx.attr("data_format") in (b"NCHW", "NCHW")
    if value.is_stacked and not bias.is_stacked and not channels_first:
        return Stacked(tensor=before_unfold(
            value.tensor, lambda t: ctx.emit(t, bias.tensor)[0]))
    # Per-iteration bias shape [C] placed on the channel axis: [C, 1, ..., 1] for
    # channels-first (axis 1 of each iteration), plain [C] for channels-last.
    trailing = rank - 2 if channels_first else 0
    b = bias.tensor
    if bias.is_stacked:
        b = shapes.reshape(b, ctx.dims(b) + [1] * trailing)
        b = shapes.insert_axes(b, rank, ctx.n)
    elif trailing:
        b = shapes.reshape(b, shapes.dims(b) + [1] * trailing)
    return Stacked(tensor=tf.math.add(ctx.stack(value), b))


def convert_bias_add_grad(ctx):
    (grad,) = ctx.inputs
    rank = grad.shape.rank
    if rank is None:
        return ctx.decline("the gradient's rank is unknown")
    channel = 1 if ctx.attr("data_format") in (b"NCHW", "NCHW") else rank - 1
    axes = [k + 1 for k in range(rank) if k != channel]
    return Stacked(tensor=tf.math.reduce_sum(grad.tensor, axis=axes))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("BiasAdd", convert_bias_add, inputs="**")
    registry.add("BiasAddGrad", convert_bias_add_grad, inputs="S")
