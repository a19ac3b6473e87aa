"""RaggedTensorToVariant and RaggedTensorFromVariant: how ``tf.map_fn`` (and
``tf.TensorArray``) carry a ``tf.RaggedTensor`` per element inside a loop body.

Encoding (``batched_input=False``: one ragged value per iteration becomes one scalar
variant): the iterations' ragged values are put one after the other as the rows of one
ragged tensor of one more ragged dimension, and the op encodes it with
``batched_input=True``: row i, iteration i's value, becomes variant i, exactly what the
loop's op makes.

Decoding a stacked ``[n, ...]`` of variants: the op decodes all of them at once with
one more ragged dimension in front (the iterations), and each output of iteration i
is cut out of it: its row splits rebuilt from the row lengths of its own rows, its
values the run of values its rows cover. Under XLA the sizes have no static bound: the
converters decline.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_converters_math.ragged_common import is_ragged
from pfor_converters_math.ragged_tensor_ops import pieces
from pfor_core.extend import Decline, Stacked


def _rows(ctx, value):
    """A per-iteration tensor as its padded form ``[n, W, ...]`` and each iteration's
    number of rows (int32 ``[n]``)."""
    if is_ragged(value):
        if any(length is not None for length in value.lengths[1:]):
            raise Decline("only the first dimension may vary")
        return value.padded, value.lengths[0]
    tensor = ctx.stack(value)
    return tensor, tf.fill([ctx.n], tf.shape(tensor, out_type=tf.int32)[1])


def _flat(padded, counts):
    """Every iteration's first ``counts[i]`` rows, iteration after iteration."""
    return tf.boolean_mask(padded, tf.sequence_mask(counts, tf.shape(padded)[1]))


def convert_to_variant(ctx):
    """RaggedTensorToVariant of one ragged value per iteration (``batched_input``
    False), or of each row of it (True: what the gradient of a decoding makes; every
    iteration must have as many rows, then the rows of all iterations, one after the
    other, are encoded together)."""
    batched = ctx.attr("batched_input")
    if ctx.compiled:
        return ctx.decline("ragged encodings have no static size under XLA")
    *splits, values = ctx.inputs
    if batched and (not splits or is_ragged(splits[0])):
        return ctx.decline("batched_input: iterations with different numbers of rows")
    padded, counts = _rows(ctx, values)
    row_lengths = []  # of the batched value: the iterations, then each level's rows
    for split in splits:
        bounds, sizes = _rows(ctx, split)
        rows = tf.maximum(sizes - 1, 0)
        row_lengths.append(_flat(bounds[:, 1:] - bounds[:, :-1], rows))
        if len(row_lengths) == 1 and not batched:
            row_lengths.insert(0, rows)
    if not splits:
        row_lengths.append(counts)
    kind = ctx.attr("Tsplits")
    nested = [tf.concat([tf.zeros([1], kind), tf.cumsum(tf.cast(r, kind))], 0)
              for r in row_lengths]
    encoded = tf.raw_ops.RaggedTensorToVariant(
        rt_nested_splits=nested, rt_dense_values=_flat(padded, counts), batched_input=True)
    if batched:  # [n * rows] -> [n, rows]
        encoded = tf.reshape(encoded, tf.stack([ctx.n, tf.shape(splits[0].tensor)[1] - 1]))
    return Stacked(tensor=encoded)


def _uniform(ctx, k):
    """Output ``k``'s first per-iteration size where the body knows it statically."""
    shape = ctx.output_shapes[k]
    if shape.rank and shape.is_fully_defined():
        return shape[0]
    return None


def convert_from_variant(ctx):
    """RaggedTensorFromVariant of stacked encodings: decoded together, iteration by
    iteration cut out."""
    if ctx.compiled:
        return ctx.decline("ragged decodings have no static size under XLA")
    rank = ctx.attr("output_ragged_rank")
    decoded = tf.raw_ops.RaggedTensorFromVariant(
        encoded_ragged=ctx.inputs[0].tensor, input_ragged_rank=ctx.attr("input_ragged_rank"),
        output_ragged_rank=rank + 1, Tvalues=ctx.attr("Tvalues"),
        Tsplits=ctx.attr("Tsplits"))
    values_shape = ctx.output_shapes[rank]
    if values_shape.rank is None:
        return ctx.decline("the decoded values' rank is not static")
    values = decoded.output_dense_values
    values.set_shape(tf.TensorShape([None]).concatenate(values_shape[1:]))
    splits = decoded.output_nested_splits
    for split in splits:
        split.set_shape([None])
    begin, count = splits[0][:-1], splits[0][1:] - splits[0][:-1]  # rows per iteration
    outs = []
    for k in range(rank):
        level = splits[k + 1]
        first = tf.gather(level, begin)
        outs.append(pieces(level, begin, count + 1, offset=first, uniform=_uniform(ctx, k)))
        begin, count = first, tf.gather(level, begin + count) - first
    outs.append(pieces(values, begin, count,
                        uniform=_uniform(ctx, rank)))
    return outs


def convert_to_variant_gradient(ctx):
    """RaggedTensorToVariantGradient of one encoded gradient per iteration, for
    encodings of dense values (ragged rank 0, the row-splits input a scalar): all
    decoded together, each iteration's values cut out of them."""
    if ctx.compiled:
        return ctx.decline("ragged decodings have no static size under XLA")
    if ctx.inputs[1].is_stacked or ctx.op.inputs[1].shape.rank != 0:
        return ctx.decline("the encodings of a ragged tensor (row splits given)")
    values_shape = ctx.output_shapes[0]
    if values_shape.rank is None or not values_shape[1:].is_fully_defined():
        return ctx.decline("the dense values' inner dimensions are not static")
    decoded = tf.raw_ops.RaggedTensorFromVariant(
        encoded_ragged=ctx.stacked(0), input_ragged_rank=0, output_ragged_rank=1,
        Tvalues=ctx.attr("Tvalues"), Tsplits=ctx.attr("Tsplits"))
    values = decoded.output_dense_values
    values.set_shape(tf.TensorShape([None]).concatenate(values_shape[1:]))
    splits = decoded.output_nested_splits[0]
    begin, count = splits[:-1], splits[1:] - splits[:-1]
    return pieces(values, begin, count, uniform=_uniform(ctx, 0))


def convert_zeros_like_encodings(ctx):
    """ZerosLike of stacked ragged encodings (``[n]`` variants, what the gradient of a
    ``tf.map_fn`` with a ragged output makes): the kernel takes one variant at a time,
    so it runs per iteration."""
    encoded = ctx.inputs[0].tensor
    if encoded.dtype != tf.variant or encoded.shape.rank != 1:
        return ctx.decline("not a vector of ragged encodings")
    zeros = tf.map_fn(tf.zeros_like, encoded, fn_output_signature=tf.TensorSpec([], tf.variant))
    return Stacked(tensor=zeros)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("ZerosLike", convert_zeros_like_encodings, inputs="S", priority=10, narrow=True)
    registry.add("RaggedTensorToVariantGradient", convert_to_variant_gradient, inputs="S**")
    registry.add("RaggedTensorToVariant", convert_to_variant, inputs="?...")
    registry.add("RaggedTensorFromVariant", convert_from_variant, inputs="S")
