"""DynamicPartition (``tf.dynamic_partition``) with per-iteration partitions: each of
the ``num_partitions`` outputs holds a different number of elements per iteration, so
each is ragged along its first dimension.

One stable sort of every iteration's partition numbers puts its elements partition by
partition, each in its original order; partition k of iteration j is then the slice
``[start_jk, start_jk + count_jk)`` of that order (``start`` the counts of the lower
partitions), read by one batched gather per output, ``O(P log P)`` per iteration for
``P`` elements whatever ``num_partitions`` is. A ragged input's padding sorts after
every partition and is never read.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Ragged, shapes


def convert_dynamic_partition_ragged(ctx):
    """DynamicPartition with stacked partitions (data stacked or invariant), or ragged
    data and partitions (vectors of partitions)."""
    if ctx.compiled:
        return ctx.decline("the partitions' sizes have no static bound under XLA")
    data, partitions = ctx.inputs
    count = ctx.attr("num_partitions")
    rank = partitions.shape.rank
    if data.shape.rank is None or not rank:
        return ctx.decline("needs known ranks and partitions of rank >= 1")
    inner = rank - 1  # partition dims merged into one
    if isinstance(partitions, Ragged):
        if partitions.ragged_axes != (0,) or rank != 1 or not isinstance(data, Ragged) or \
                data.ragged_axes != (0,):
            return ctx.decline("ragged partitions must be a vector ragged like the data")
        width = tf.minimum(tf.shape(partitions.padded)[1], tf.shape(data.padded)[1])
        mask = partitions.mask()[:, :width]
        numbers = tf.where(mask, tf.cast(partitions.padded[:, :width], tf.int32), count)
        values = data.padded[:, :width]
        valid = tf.reduce_all(tf.equal(partitions.lengths[0], data.lengths[0]))
    else:
        mask = None
        numbers = shapes.reshape(tf.cast(partitions.tensor, tf.int32), [ctx.n_dim, -1])
        stacked = ctx.stack(data)
        d = ctx.dims(stacked)
        values = shapes.reshape(stacked, [d[0], shapes.product(d[1:2 + inner])] + d[2 + inner:])
        valid = True
    inside = (numbers >= 0) & (numbers < count)
    if mask is not None:
        inside = inside | tf.logical_not(mask)
    valid = tf.logical_and(valid, tf.reduce_all(inside))
    order = tf.argsort(numbers, axis=1, stable=True)
    # Each iteration's number of elements in each partition: [n, count].
    rows = tf.range(ctx.n)[:, None] * (count + 1)
    counts = tf.reshape(tf.math.unsorted_segment_sum(
        tf.ones_like(numbers), tf.where(inside, rows + numbers, -1), ctx.n * (count + 1)),
        [ctx.n, count + 1])[:, :count]
    starts = tf.cumsum(counts, axis=1, exclusive=True)
    top = tf.maximum(tf.shape(order)[1] - 1, 0)
    outputs = []
    for k in range(count):
        size = counts[:, k]
        width = tf.maximum(tf.reduce_max(size), 0)
        positions = tf.minimum(starts[:, k:k + 1] + tf.range(width)[None, :], top)
        picked = tf.gather(values, tf.gather(order, positions, batch_dims=1), batch_dims=1)
        picked = ctx.check(valid, f"partitions must be in [0, {count}) and as many as "
                           "data's elements (as the kernel)", tensor=picked)
        outputs.append(Ragged.from_stacked(picked, [size] + [None] * (picked.shape.rank - 2)))
    return outputs


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("DynamicPartition", convert_dynamic_partition_ragged, inputs="*S")
    registry.add("DynamicPartition", convert_dynamic_partition_ragged, inputs="RR")
