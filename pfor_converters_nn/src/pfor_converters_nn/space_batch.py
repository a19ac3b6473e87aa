"""SpaceToBatchND / BatchToSpaceND: what dilated convolutions (tf.nn.convolution with
dilation_rate, Keras Conv layers with dilation_rate > 1) expand to.

SpaceToBatchND moves each of the P = prod(block_shape) block offsets of an image into
the batch axis, offset-major: output batch index = offset * b + image. Folding the
iteration axis into the batch ([n, b, ...] -> [n*b, ...]) therefore gives one op whose
output is [P, n, b, ...] once reshaped; one transpose puts the iterations first again
([n, P*b, ...]). BatchToSpaceND is the reverse: [n, P*b, ...] -> [P, n, b, ...] ->
[P*n*b, ...], one op, and its output [n*b, ...] splits back. Each is the other's
gradient. Block shapes, paddings and crops must be loop-invariant (they set the output
shape).
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Stacked, fold_into_batch, shapes, unfold_from_batch
from pfor_converters_nn import folding


def _blocks(ctx):
    """P = prod(block_shape): an int where static, else a scalar int32 tensor."""
    block = ctx.inputs[1].tensor
    static = tf.get_static_value(block)
    if static is not None:
        return int(static.prod())
    return tf.cast(tf.math.reduce_prod(block), tf.int32)


def _swap_leading(tensor: tf.Tensor, first, second, rest: list) -> tf.Tensor:
    """[first*second*... flattened as first, second, rest] -> [second, first, rest]."""
    split = shapes.reshape(tensor, [first, second] + rest)
    perm = [1, 0] + list(range(2, split.shape.rank))
    return tf.transpose(split, perm)


def _require_convertible(ctx) -> None:
    """Decline (raise) unless the parameters are invariant and the input's rank known."""
    if any(v.is_stacked for v in ctx.inputs[1:]):
        raise Decline("block shape, paddings and crops must be loop-invariant")
    if ctx.inputs[0].shape.rank is None:
        raise Decline("the input's rank is unknown")


def convert_space_to_batch(ctx):
    _require_convertible(ctx)
    blocks = _blocks(ctx)
    n = ctx.n_dim
    batch = folding.batch_of(ctx, 0)
    folded = fold_into_batch(ctx.inputs[0].tensor, ctx.n)
    out = ctx.emit(folded, *[v.tensor for v in ctx.inputs[1:]])[0]
    rest = shapes.dims(out)[1:]
    swapped = _swap_leading(out, blocks, n, [batch] + rest)  # [n, P, b, ...]
    return Stacked(tensor=shapes.reshape(swapped, [n, shapes.product([blocks, batch])] + rest))


def convert_batch_to_space(ctx):
    _require_convertible(ctx)
    blocks = _blocks(ctx)
    n = ctx.n_dim
    d = ctx.dims(ctx.inputs[0])  # [n, P*b, ...]
    batch = d[1] // blocks
    swapped = _swap_leading(ctx.inputs[0].tensor, n, blocks, [batch] + d[2:])  # [P, n, b, ...]
    merged = shapes.reshape(swapped, [shapes.product([blocks, n, batch])] + d[2:])
    out = ctx.emit(merged, *[v.tensor for v in ctx.inputs[1:]])[0]
    return Stacked(tensor=unfold_from_batch(out, ctx.n_dim, batch))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("SpaceToBatchND", convert_space_to_batch, inputs="SUU")
    registry.add("BatchToSpaceND", convert_batch_to_space, inputs="SUU")
