"""Unique ops (``tf.unique``, ``tf.unique_with_counts``) of a per-iteration vector: the
unique values (and their counts) are ragged along their one dimension, the indices have
the input's layout.

One hash-based pass over every iteration's elements at once, O(total elements), for
every dtype Unique takes (strings too): a first Unique of all elements gives each a
global id ``g``; a second Unique of the keys ``iteration * G + g`` (``G`` global ids)
finds each iteration's distinct values. The elements are read iteration after
iteration, so the second Unique numbers iteration 0's values first, in order of first
occurrence, then iteration 1's: an element's index in its own iteration is its key's
number minus the number of distinct values of the iterations before. Each unique value
is read back from its first occurrence in its own iteration (so ``-0.0`` and ``0.0``,
equal under Unique, come out as that iteration's loop gives them).
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Ragged, Stacked, shapes


def _elements(ctx, x):
    """Every iteration's elements one after the other (1-D), each one's iteration, each
    iteration's count (``[n]``, or None when all have the padded width) and the padded
    width."""
    if isinstance(x, Ragged):
        flat, sizes = x.to_flat()
        counts = sizes[:, 0]
        return flat, shapes.owners(counts), counts, tf.shape(x.padded)[1]
    tensor = ctx.stack(x)
    width = tf.shape(tensor)[1]
    rows = shapes.owners(tf.fill([ctx.n], width))
    return tf.reshape(tensor, [-1]), rows, None, width


def _one_axis(ctx, x) -> bool:
    """Whether the op finds unique elements of a vector (the only case converted)."""
    if x.shape.rank != 1:
        return False
    if ctx.op_type in ("UniqueV2", "UniqueWithCountsV2"):
        axis = tf.get_static_value(ctx.inputs[1].tensor)
        return axis is not None and all(int(a) in (0, -1) for a in axis.reshape(-1))
    return True


def convert_unique_ragged(ctx):
    """Unique / UniqueV2 / UniqueWithCounts / UniqueWithCountsV2 of a stacked or ragged
    vector."""
    if ctx.compiled:
        return ctx.decline("the number of unique values has no static bound under XLA")
    x = ctx.inputs[0]
    if ctx.op_type.endswith("V2") and ctx.inputs[1].is_stacked:
        return ctx.decline("a per-iteration axis")
    if not _one_axis(ctx, x):
        return ctx.decline("unique sub-tensors (an input of rank other than 1)")
    index_dtype = ctx.output_dtypes[1]
    flat, rows, counts, width = _elements(ctx, x)
    _, global_ids = tf.unique(flat, out_idx=tf.int64)
    size = tf.cast(tf.shape(global_ids)[0], tf.int64)
    keys = tf.cast(rows, tf.int64) * size + global_ids  # size >= the number of ids
    unique_keys, numbers, occurrences = tf.unique_with_counts(keys, out_idx=tf.int32)
    distinct = tf.shape(unique_keys)[0]
    # Each distinct value's iteration and first position among the elements.
    first = tf.math.unsorted_segment_min(tf.range(tf.cast(size, tf.int32)), numbers, distinct)
    owner = tf.gather(rows, first)
    lengths = tf.math.bincount(owner, minlength=ctx.n, maxlength=ctx.n, dtype=tf.int32)
    before = tf.cumsum(lengths, exclusive=True)
    slots = tf.range(distinct) - tf.gather(before, owner)
    out_width = tf.maximum(tf.reduce_max(lengths), 0)
    where = tf.stack([owner, slots], axis=1)
    shape = tf.stack([ctx.n, out_width])
    values = _scatter(where, tf.gather(flat, first), shape)
    outputs = [Ragged(padded=values, lengths=(lengths,))]
    local = tf.cast(numbers - tf.gather(before, rows), index_dtype)
    if counts is None:
        outputs.append(Stacked(tensor=tf.reshape(local, [ctx.n, width])))
    else:
        index = tf.stack([rows, tf.range(tf.shape(rows)[0]) - tf.gather(
            tf.cumsum(counts, exclusive=True), rows)], axis=1)
        outputs.append(Ragged(padded=_scatter(index, local, tf.stack([ctx.n, width])),
                              lengths=x.lengths))
    if len(ctx.op.outputs) == 3:
        outputs.append(Ragged(padded=_scatter(
            where, tf.cast(occurrences, ctx.output_dtypes[2]), shape), lengths=(lengths,)))
    return outputs


def _scatter(where, values, shape):
    """``values`` written at ``where`` of a zero (``""``, False) tensor of ``shape``, for
    every dtype (scatter_nd takes no strings): a scatter of positions, then a gather."""
    positions = tf.scatter_nd(where, tf.range(1, tf.shape(values)[0] + 1), shape)
    return tf.gather(tf.concat([tf.zeros([1], values.dtype), values], 0), positions)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(["Unique", "UniqueWithCounts"], convert_unique_ragged, inputs="S")
    registry.add(["Unique", "UniqueWithCounts"], convert_unique_ragged, inputs="R")
    registry.add(["UniqueV2", "UniqueWithCountsV2"], convert_unique_ragged, inputs="SU")
    registry.add(["UniqueV2", "UniqueWithCountsV2"], convert_unique_ragged, inputs="RU")
