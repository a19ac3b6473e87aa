"""``UnsortedSegmentSum`` (and Max, Min, Prod) of ragged data by ragged ids: the
gradient of a gather by per-iteration indices (``tf.boolean_mask``'s, for one).

Each iteration's ids are moved to its own block of ``num_segments`` segments; the
padding goes to one extra segment that is dropped. Ids outside ``[0, num_segments)``
fail as the loop's kernel does. With per-iteration ``num_segments`` the result is
ragged along its first dimension (blocks as wide as the largest).

Ragged data by ids of one shape in every iteration: the loop's kernel needs the data's
leading dimensions to be the ids' shape, so they are one shape in every iteration
(checked when it runs) and the stacked converter takes them.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_converters_math import segments
from pfor_converters_math.ragged_common import pad_axis
from pfor_core.extend import Decline, Ragged, Stacked


def convert_unsorted_segment_ragged(ctx):
    """Ids of any rank (a nested pfor's body sums by ids ``[n_inner, W]``): data and
    ids lined up on their first ``ids.rank`` dimensions, which must agree."""
    data, ids, count = ctx.inputs
    if not isinstance(ids, Ragged):
        raise Decline("ids are not ragged")
    rank = ids.rank
    if isinstance(data, Ragged):
        if any(d >= rank for d in data.ragged_axes):
            raise Decline("data ragged beyond the ids' dimensions")
        values = data.padded
    else:
        try:
            values = data.tensor
        except Exception as err:  # pylint: disable=broad-except
            raise Decline(str(err)) from err
    if values.shape.rank is None or values.shape.rank < rank + 1:
        raise Decline("data of unknown rank, or of a rank below the ids'")
    per_iteration = count.is_stacked
    counts = tf.cast(ctx.stack(count), tf.int32) if per_iteration else None
    width = (tf.maximum(tf.reduce_max(counts), 0) if per_iteration
             else tf.cast(count.tensor, tf.int32))
    if ctx.compiled and per_iteration:
        raise Decline("per-iteration num_segments has no static bound under XLA")
    segment = tf.cast(ids.padded, tf.int32)
    if rank > 1:
        values, segment = _lined_up(ctx, data, values, ids, segment)
    n = tf.shape(segment, out_type=tf.int32)[0]
    inside = tf.broadcast_to(Ragged(padded=segment, lengths=ids.lengths).mask(),
                             tf.shape(segment))
    limit = tf.reshape(counts, [-1] + [1] * rank) if per_iteration else width
    valid = tf.reduce_all(tf.where(inside, (segment >= 0) & (segment < limit), True))
    segment = ctx.check(valid, "segment ids must be in [0, num_segments)", tensor=segment)
    blocks = tf.reshape(tf.range(n), [-1] + [1] * rank) * width + segment
    blocks = tf.where(inside, blocks, n * width)  # the padding's extra segment
    trailing = tf.shape(values, out_type=tf.int32)[1 + rank:]
    flat = tf.reshape(values, tf.concat([[-1], trailing], 0))
    (out,) = ctx.emit(flat, tf.cast(tf.reshape(blocks, [-1]), ids.dtype),
                      tf.cast(n * width + 1, ctx.op.inputs[2].dtype))
    out = tf.reshape(out[:n * width], tf.concat([[n, width], trailing], 0))
    if not per_iteration:
        return Stacked(tensor=out)
    lengths = (counts,) + (None,) * (len(values.shape) - 1 - rank)
    return Ragged.from_stacked(out, lengths)


def _lined_up(ctx, data, values, ids, segment):
    """Data and ids padded alike along the ids' dimensions, whose sizes must agree
    per iteration (the loop's kernel needs ``data.shape[:ids.rank] == ids.shape``)."""
    extents = (data.extents() if isinstance(data, Ragged) else
               [tf.fill(tf.shape(values)[:1], tf.shape(values, out_type=tf.int32)[1 + d])
                for d in range(values.shape.rank - 1)])
    agree = tf.reduce_all([tf.reduce_all(tf.equal(a, b))
                           for a, b in zip(extents, ids.extents())])
    values = ctx.check(agree, "data.shape[:ids.rank] must equal ids.shape", tensor=values)
    for d in range(ids.rank):
        wide = tf.maximum(tf.shape(values, out_type=tf.int32)[1 + d],
                          tf.shape(segment, out_type=tf.int32)[1 + d])
        values, segment = pad_axis(values, 1 + d, wide), pad_axis(segment, 1 + d, wide)
    return values, segment


def convert_unsorted_segment_of_uniform_data(ctx):
    """Ragged data, ids of one shape: the data are of one shape too (checked)."""
    data, ids, count = ctx.inputs
    data = data.uniform(f"pfor: {ctx.op_type} (op {ctx.op.name}): data whose shape differs "
                        "between iterations meet segment ids of one shape (the loop's "
                        "kernel needs data.shape[:ids.rank] == ids.shape)")
    return segments.convert_unsorted_segment(ctx.with_inputs([data, ids, count]))


def register(registry):
    for op_type in ("UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin",
                    "UnsortedSegmentProd"):
        registry.add(op_type, convert_unsorted_segment_ragged, inputs="RR*")
        registry.add(op_type, convert_unsorted_segment_ragged, inputs="SR*")
        registry.add(op_type, convert_unsorted_segment_of_uniform_data, inputs="R*U")
