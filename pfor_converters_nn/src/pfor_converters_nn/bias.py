"""BiasAdd: the bias is added along the channel axis of each iteration's value.

A stacked value with an invariant bias is one BiasAdd (channels-last), or a
broadcasting add after moving the bias to the channel axis (channels-first). A stacked
bias lines up with the value's channel axis by size-1 axes and adds with broadcasting.

Where ranks or sizes are known only at run time, the kernel's own checks (rank at least
2, one bias per channel) are made before the rewrite, which would not fail.

BiasAddGrad sums the gradient over every axis but the channel axis; for a stacked
gradient that is one reduce_sum over those axes, shifted past the stacked axis.

A ragged value (pattern letter R) with an invariant bias adds it to the padded tensor
along a channel axis of fixed size, and zeroes the padding again.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Stacked, padded_operands, shapes
from pfor_converters_nn.unfolded import before_unfold


def _channels_first(ctx) -> bool:
    return ctx.attr("data_format") in (b"NCHW", "NCHW")


def convert_bias_add(ctx):
    """Stacked value, invariant bias: one BiasAdd (channels-last; before an unfolding
    reshape, see unfolded.py), or an add of the bias moved to the channel axis; a
    stacked bias is lined up with the channel axis and added with broadcasting."""
    value, bias = ctx.inputs
    rank = shapes.rank_of(value)  # an int, or a scalar tensor for an unknown rank
    channels_first = ctx.attr("data_format") in (b"NCHW", "NCHW")
    v = _checked(ctx, value, bias, rank, channels_first)
    if value.is_stacked and not bias.is_stacked and not channels_first:
        return Stacked(tensor=before_unfold(v, lambda t: ctx.emit(t, bias.tensor)[0]))
    # Per-iteration bias shape [C] placed on the channel axis: [C, 1, ..., 1] for
    # channels-first (axis 1 of each iteration), plain [C] for channels-last.
    trailing = rank - 2 if channels_first else 0
    b = bias.tensor
    if bias.is_stacked:
        b = shapes.insert_axes(_append_ones(b, trailing), rank, ctx.n)
    elif not isinstance(trailing, int) or trailing:
        b = _append_ones(b, trailing)
    return Stacked(tensor=tf.math.add(ctx.stack(type(value)(tensor=v)), b))


def _append_ones(tensor, count):
    """``tensor`` with ``count`` (int or scalar tensor) size-1 axes at the end."""
    if isinstance(count, int) and not count:
        return tensor
    if isinstance(count, int) and tensor.shape.rank is not None:
        return shapes.reshape(tensor, shapes.dims(tensor) + [1] * count)
    ones = tf.ones(tf.reshape(tf.maximum(count, 0), [1]), tf.int32)
    return tf.reshape(tensor, tf.concat([tf.shape(tensor, out_type=tf.int32), ones], 0))


def _checked(ctx, value, bias, rank, channels_first):
    """The value tensor, after the checks the BiasAdd kernel makes that the rewrite
    would lose where shapes are known only at run time: per-iteration rank at least 2
    (the stacked value has one more), and as many biases as channels (a broadcasting
    add would stretch a single bias)."""
    tensor = value.tensor
    channel = 1 if channels_first else -1
    have = value.shape[channel] if value.shape.rank is not None else None
    want = bias.shape[-1] if bias.shape.rank else None
    if isinstance(rank, int) and have is not None and have == want:
        return tensor
    conditions = []
    if not isinstance(rank, int):
        conditions.append(rank >= 2)
    if have is None or want is None or have != want:
        # Padded so that a rank below 2 reads a size of -1 (failing the check) instead
        # of failing the read.
        per_iteration = tf.shape(tensor)[int(value.is_stacked):]
        pad = tf.constant([-1, -1])
        channels = (tf.concat([per_iteration, pad], 0)[1] if channels_first
                    else tf.concat([pad, per_iteration], 0)[-1])
        biases = tf.shape(bias.tensor)[-1]
        conditions.append(tf.equal(channels, biases))
    if not conditions:
        return tensor
    ok = conditions[0] if len(conditions) == 1 else tf.logical_and(*conditions)
    return ctx.check(ok, "the value must have rank 2 or more per iteration and as many "
                     "channels as biases", tensor=tensor)


def convert_bias_add_stacked_bias(ctx):
    """A stacked bias lines up with the value's channel axis by size-1 axes and adds
    with broadcasting (an invariant value is tiled: the result has that size anyway);
    the same checked path as ``convert_bias_add``."""
    return convert_bias_add(ctx)


def convert_bias_add_grad(ctx):
    (grad,) = ctx.inputs
    rank = grad.shape.rank
    if rank is None:
        return ctx.decline("the gradient's rank is unknown")
    channel = 1 if ctx.attr("data_format") in (b"NCHW", "NCHW") else rank - 1
    axes = [k + 1 for k in range(rank) if k != channel]
    return Stacked(tensor=tf.math.reduce_sum(grad.tensor, axis=axes))


def convert_bias_add_ragged(ctx):
    """A ragged value, invariant bias: added to the padded tensor on a channel axis of
    fixed size."""
    x, bias = ctx.inputs
    fmt = ctx.attr("data_format")
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    channel = x.rank - 1 if fmt.endswith("C") or x.rank < 3 else 1
    if x.lengths[channel] is not None:
        return ctx.decline("the channel dimension varies per iteration")
    shape = [1] * (x.rank + 1)
    shape[channel + 1] = -1
    return padded_operands.result(x.padded + tf.reshape(bias.tensor, shape), x.lengths)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    for op, fn, inputs in [
        ("BiasAdd", convert_bias_add, "SU"),
        ("BiasAdd", convert_bias_add_stacked_bias, "*S"),
        ("BiasAddGrad", convert_bias_add_grad, "S"),
        ("BiasAdd", convert_bias_add_ragged, "RU"),
    ]:
        registry.add(op, fn, inputs=inputs)
