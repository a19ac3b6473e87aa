"""BiasAdd: the bias is added along the channel axis of each iteration's value.

A stacked value with an invariant bias is one BiasAdd (channels-last), or a
broadcasting add after moving the bias to the channel axis (channels-first). A stacked
bias lines up with the value's channel axis by size-1 axes and adds with broadcasting.

BiasAddGrad sums the gradient over every axis but the channel axis; for a stacked
gradient that is one reduce_sum over those axes, shifted past the stacked axis.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Stacked, shapes
from pfor_converters_nn.unfolded import before_unfold


def _channels_first(ctx) -> bool:
    return ctx.attr("data_format") in (b"NCHW", "NCHW")


def _rank(ctx) -> int:
    rank = ctx.inputs[0].shape.rank
    if rank is None:
        raise Decline("the value's rank is unknown")
    return rank


def convert_bias_add(ctx):
    """Stacked value, invariant bias: one BiasAdd (channels-last; before an unfolding
    reshape, see unfolded.py), or an add of the bias moved to the channel axis."""
    value, bias = ctx.inputs
    rank = _rank(ctx)
    if not _channels_first(ctx):
        return Stacked(tensor=before_unfold(
            value.tensor, lambda t: ctx.emit(t, bias.tensor)[0]))
    # Per-iteration bias [C] on axis 1 of each iteration: [C, 1, ..., 1].
    b = shapes.reshape(bias.tensor, shapes.dims(bias.tensor) + [1] * (rank - 2))
    return Stacked(tensor=tf.math.add(value.tensor, b))


def convert_bias_add_stacked_bias(ctx):
    """A stacked bias lines up with the value's channel axis by size-1 axes and adds
    with broadcasting (an invariant value is tiled: the result has that size anyway)."""
    value, bias = ctx.inputs
    rank = _rank(ctx)
    trailing = rank - 2 if _channels_first(ctx) else 0
    b = shapes.reshape(bias.tensor, ctx.dims(bias) + [1] * trailing)
    b = shapes.insert_axes(b, rank, ctx.n)
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
    registry.add("BiasAdd", convert_bias_add, inputs="SU")
    registry.add("BiasAdd", convert_bias_add_stacked_bias, inputs="*S")
    registry.add("BiasAddGrad", convert_bias_add_grad, inputs="S")
