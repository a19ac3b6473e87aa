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
from pfor_core.extend import Decline, Ragged, Stacked


def convert_unsorted_segment_ragged(ctx):
    data, ids, count = ctx.inputs
    if not isinstance(ids, Ragged) or ids.rank != 1:
        raise Decline("ids are not a ragged vector")
    if isinstance(data, Ragged):
        if data.ragged_axes != (0,):
            raise Decline("data ragged beyond its first dimension")
        values = data.padded
    else:
        try:
            values = data.tensor
        except Exception as err:  # pylint: disable=broad-except
            raise Decline(str(err)) from err
    per_iteration = count.is_stacked
    counts = tf.cast(ctx.stack(count), tf.int32) if per_iteration else None
    width = (tf.maximum(tf.reduce_max(counts), 0) if per_iteration
             else tf.cast(count.tensor, tf.int32))
    if ctx.compiled and per_iteration:
        raise Decline("per-iteration num_segments has no static bound under XLA")
    n = tf.shape(ids.padded, out_type=tf.int32)[0]
    inside = ids.mask()
    segment = tf.cast(ids.padded, tf.int32)
    limit = counts[:, None] if per_iteration else width
    valid = tf.reduce_all(tf.where(inside, (segment >= 0) & (segment < limit), True))
    segment = ctx.check(valid, "segment ids must be in [0, num_segments)", tensor=segment)
    blocks = tf.range(n)[:, None] * width + segment
    blocks = tf.where(inside, blocks, n * width)  # the padding's extra segment
    trailing = tf.shape(values, out_type=tf.int32)[2:]
    flat = tf.reshape(values, tf.concat([[-1], trailing], 0))
    (out,) = ctx.emit(flat, tf.cast(tf.reshape(blocks, [-1]), ids.dtype),
                      tf.cast(n * width + 1, ctx.op.inputs[2].dtype))
    out = tf.reshape(out[:n * width], tf.concat([[n, width], trailing], 0))
    if not per_iteration:
        return Stacked(tensor=out)
    lengths = (counts,) + (None,) * (len(values.shape) - 2)
    return Ragged.from_stacked(out, lengths)


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
