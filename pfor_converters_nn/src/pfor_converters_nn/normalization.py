"""Fused batch normalization and local response normalization.

FusedBatchNorm* normalizes each channel with statistics over all other axes (batch
statistics in training mode, the given population statistics in inference mode).
Iteration j's channel c is therefore just one more channel: moving the stacked axis
next to the channel axis and merging the two ([n, b, h, w, c] -> [b, h, w, n*c])
gives one fused op whose per-channel results are exactly the per-iteration ones, in
both modes, for the forward op and for its gradient (whose scale and offset gradients
are per-iteration sums too). Per-channel vectors become [n*c] (an invariant one is
tiled: it is only a vector). Reserve spaces stay the real op's, so the gradient op
reads them as the kernel of this device wrote them.

Inference mode with loop-invariant scale, offset, mean and variance is cheaper: fold
the iteration axis into the batch, with no transposes.

LRN works on each pixel's channel vector alone: fold the iteration axis into the batch.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Invariant, Stacked, shapes
from pfor_converters_nn import folding, pooling


def channel_axis(ctx, rank: int) -> int:
    """Per-iteration channel axis of a rank-``rank`` value."""
    return 1 if ctx.attr("data_format").decode().startswith("NC") else rank - 1


def merge_into_channels(ctx, value, channel: int) -> tf.Tensor:
    """Stacked [n, ...] -> the per-iteration layout with channels n*c (n major)."""
    x = ctx.stack(value)
    rank = x.shape.rank - 1
    # Stacked axis 0 goes right before the channel axis (stacked axis channel + 1).
    perm = list(range(1, channel + 1)) + [0] + list(range(channel + 1, rank + 1))
    x = tf.transpose(x, perm)
    d = shapes.dims(x)
    return shapes.reshape(x, d[:channel] + [d[channel] * d[channel + 1]] + d[channel + 2:])


def split_from_channels(ctx, tensor: tf.Tensor, channel: int, channels) -> tf.Tensor:
    """Undo ``merge_into_channels``: back to stacked [n, ...]."""
    d = shapes.dims(tensor)
    n = ctx.n_dim
    x = shapes.reshape(tensor, d[:channel] + [n, channels] + d[channel + 1:])
    rank = len(d)
    perm = [channel] + list(range(channel)) + list(range(channel + 1, rank + 1))
    return tf.transpose(x, perm)


def per_channel(ctx, value) -> tf.Tensor:
    """A per-channel vector as [n*c]: stacked [n, c] flattened (an invariant one tiled:
    it is only a vector)."""
    stacked = ctx.stack(value)
    return shapes.reshape(stacked, [shapes.product(ctx.dims(stacked))])


def split_vector(ctx, tensor: tf.Tensor, channels) -> Stacked:
    n = ctx.n_dim
    return Stacked(tensor=shapes.reshape(tensor, [n, channels]))


def channels_of(ctx, value, channel: int):
    """Per-iteration channel count of a value."""
    if value.is_stacked:
        return ctx.dims(value)[channel + 1]
    return shapes.dims(value.tensor)[channel]


def convert_fused_batch_norm(ctx):
    x, scale, offset, mean, variance = ctx.inputs
    rank = x.shape.rank
    if rank is None:
        return ctx.decline("the input's rank is unknown")
    training = ctx.attr("is_training")
    channel = channel_axis(ctx, rank)
    channels = channels_of(ctx, x, channel)
    stats = [mean, variance]
    factor = ctx.attr("exponential_avg_factor") if ctx.has_attr("exponential_avg_factor") else 1.0
    if training and factor == 1.0 and not (mean.is_stacked or variance.is_stacked):
        # Training without a running average ignores these (often empty) inputs.
        stats = [v.tensor for v in stats]
    else:
        stats = [per_channel(ctx, v) for v in stats]
    out = ctx.emit(merge_into_channels(ctx, x, channel), per_channel(ctx, scale),
                   per_channel(ctx, offset), *stats)
    results = [Stacked(tensor=split_from_channels(ctx, out[0], channel, channels))]
    results += [split_vector(ctx, t, channels) for t in out[1:5]]
    # reserve_space_3 (V3) is the kernel's scratch for its gradient, not per channel:
    # it is passed on as it is, to the gradient of this same merged-channel op.
    results += [Invariant(tensor=t) for t in out[5:]]
    return results


def convert_fused_batch_norm_invariant_stats(ctx):
    """Stacked input, invariant scale, offset and statistics: in inference mode one op
    on the batch-folded input (no transposes); in training mode the general way."""
    if ctx.attr("is_training") or ctx.inputs[0].shape.rank is None:
        return convert_fused_batch_norm(ctx)
    return fold_inference(ctx)


def fold_inference(ctx):
    """Inference with invariant statistics: one op on the batch-folded input."""
    out = ctx.emit(folding.fold(ctx, 0), *[v.tensor for v in ctx.inputs[1:]])
    y = folding.unfold(ctx, out[0], 0)
    # In inference mode the other outputs copy the invariant mean and variance.
    return [Stacked(tensor=y)] + [Invariant(tensor=t) for t in out[1:]]


def convert_fused_batch_norm_grad(ctx):
    y_grad, x, scale, reserve_1, reserve_2 = ctx.inputs[:5]
    extra = ctx.inputs[5:]
    if any(v.is_stacked for v in extra):
        return ctx.decline("reserve_space_3 is the kernel's scratch, not per iteration")
    rank = y_grad.shape.rank if y_grad.shape.rank is not None else x.shape.rank
    if rank is None:
        return ctx.decline("the input's rank is unknown")
    channel = channel_axis(ctx, rank)
    channels = channels_of(ctx, y_grad if y_grad.is_stacked else x, channel)
    out = ctx.emit(merge_into_channels(ctx, y_grad, channel),
                   merge_into_channels(ctx, x, channel),
                   *[per_channel(ctx, v) for v in (scale, reserve_1, reserve_2)],
                   *[v.tensor for v in extra])
    results = [Stacked(tensor=split_from_channels(ctx, out[0], channel, channels))]
    results += [split_vector(ctx, t, channels) for t in out[1:3]]
    # reserve_space_4 and _5 are unused placeholders.
    results += [Invariant(tensor=t) for t in out[3:]]
    return results


def register(registry):
    """Add this family's converters to the pack's registrar."""
    forward = ["FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"]
    registry.add(forward, convert_fused_batch_norm, inputs="*****")
    registry.add(forward, convert_fused_batch_norm_invariant_stats, inputs="SUUUU")
    registry.add(["FusedBatchNormGrad", "FusedBatchNormGradV2"],
                 convert_fused_batch_norm_grad, inputs="*****")
    registry.add("FusedBatchNormGradV3", convert_fused_batch_norm_grad, inputs="******")
    registry.add("LRN", pooling.fold_batch(1), inputs="S")
    registry.add("LRNGrad", pooling.fold_batch(3), inputs="***")
