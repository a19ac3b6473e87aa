"""HistogramFixedWidth (``tf.histogram_fixed_width``): counts of values in ``nbins``
equal bins spanning ``value_range``, values outside clamped into the end bins.

Each value's bin is computed as the kernel computes it (``max(v, lo) - lo`` and
``hi - lo`` in the values' dtype, the division in float64, clamped to ``nbins - 1``,
then truncated), so the counts agree to the last value on a bin edge; one unsorted
segment sum over all iterations then counts bin ``r * W + b`` for value of iteration
``r`` in bin ``b`` (``W`` the largest number of bins). Per-iteration ranges are
broadcast per row. A per-iteration ``nbins`` gives counts of per-iteration length: a
ragged result. The kernel's checks (no NaN, ``lo < hi``, ``nbins > 0``) run per
iteration.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Ragged, Stacked, shapes


def convert_histogram(ctx):
    """HistogramFixedWidth(values, value_range, nbins), any input per-iteration."""
    values, value_range, nbins = ctx.inputs
    if values.shape.rank is None:
        return ctx.decline("the values' rank is unknown")
    if nbins.is_stacked and ctx.compiled:
        return ctx.decline("a per-iteration number of bins has no static bound under XLA")
    dtype = ctx.output_dtypes[0]
    v = ctx.stack(values)
    d = ctx.dims(v)
    v = shapes.reshape(v, [d[0], shapes.product(d[1:])])  # [n, m]
    bounds = value_range.tensor if value_range.is_stacked else value_range.tensor[None, :]
    lo, hi = bounds[:, :1], bounds[:, 1:2]  # [n or 1, 1]
    bins = tf.cast(nbins.tensor, tf.int32)
    width = tf.reduce_max(bins) if nbins.is_stacked else bins
    width = tf.maximum(width, 0)
    per_row = bins[:, None] if nbins.is_stacked else bins
    step = tf.cast(hi - lo, tf.float64) / tf.cast(per_row, tf.float64)
    position = tf.cast(tf.maximum(v, lo) - lo, tf.float64) / step
    index = tf.cast(tf.minimum(position, tf.cast(per_row - 1, tf.float64)), tf.int32)
    rows = tf.range(tf.shape(v)[0])[:, None]
    counts = tf.math.unsorted_segment_sum(tf.ones_like(index, dtype), rows * width + index,
                                          tf.shape(v)[0] * width)
    counts = tf.reshape(counts, tf.stack([tf.shape(v)[0], width]))
    valid = tf.reduce_all(lo < hi) & tf.reduce_all(bins > 0)
    if v.dtype.is_floating:
        valid &= tf.logical_not(tf.reduce_any(tf.math.is_nan(v)))
    counts = ctx.check(valid, "requires value_range[0] < value_range[1], nbins > 0 and "
                       "no NaN values (as the kernel)", tensor=counts)
    if not nbins.is_stacked:
        return Stacked(tensor=counts)
    return Ragged.from_stacked(counts, [bins])


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("HistogramFixedWidth", convert_histogram, inputs="S*U")
    registry.add("HistogramFixedWidth", convert_histogram, inputs="USU")
    registry.add("HistogramFixedWidth", convert_histogram, inputs="**S")
