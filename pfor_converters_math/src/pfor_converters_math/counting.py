"""Counting ops in every layout: Bincount, DenseBincount and HistogramFixedWidth.

``tf.math.bincount``: Bincount and DenseBincount (of a vector, or per row of a matrix
with ``axis=-1``), also when the number of bins is per-iteration (``bincount(x)`` with
no ``minlength``/``maxlength`` sizes it ``max(x) + 1`` in each iteration): then the
counts are ragged along their last dimension.

One unsorted segment sum over all iterations: value ``v`` of row ``r`` (an iteration,
or an iteration's row of a matrix) adds its weight to bin ``r * W + v``, ``W`` being the
largest size; values outside ``[0, size)`` of their own iteration are dropped, as the
kernel drops them (a negative value fails, as the kernel fails). A ragged input's
padding is dropped too.

HistogramFixedWidth (``tf.histogram_fixed_width``): counts of values in ``nbins``
equal bins spanning ``value_range``, values outside clamped into the end bins. Each
value's bin is computed as the kernel computes it (``max(v, lo) - lo`` and ``hi - lo``
in the values' dtype, the division in float64, clamped to ``nbins - 1``, then
truncated), so the counts agree to the last value on a bin edge; one unsorted segment
sum over all iterations then counts bin ``r * W + b`` for value of iteration ``r`` in
bin ``b`` (``W`` the largest number of bins). Per-iteration ranges are broadcast per
row. A per-iteration ``nbins`` gives counts of per-iteration length: a ragged result.
The kernel's checks (no NaN, ``lo < hi``, ``nbins > 0``) run per iteration.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Ragged, Stacked, shapes


def _padded(ctx, value):
    """A stacked, invariant or ragged input as a stacked ``[n, ...]`` tensor and the
    mask of its elements (None: all)."""
    if isinstance(value, Ragged):
        return value.padded, tf.broadcast_to(value.mask(), tf.shape(value.padded))
    return ctx.stack(value), None


def _no_weights(value) -> bool:
    """Whether the weights are the empty tensor that means 'count each value once'."""
    shape = value.shape  # one iteration's
    return shape.is_fully_defined() and shape.num_elements() == 0


def _bounds(tensor, depth=0):
    """Static (low, high) bounds of an integer scalar of the body, through the
    clamping ``tf.math.bincount`` does (``minimum(maxlength, maximum(minlength, ...))``);
    None where unbounded."""
    value = tf.get_static_value(tensor) if tensor.shape.rank == 0 else None
    if value is not None:
        return int(value), int(value)
    op = tensor.op
    if depth > 8 or op.type not in ("Maximum", "Minimum", "Cast", "Identity"):
        return None, None
    if op.type in ("Cast", "Identity"):
        return _bounds(op.inputs[0], depth + 1)
    (lo_a, hi_a), (lo_b, hi_b) = (_bounds(t, depth + 1) for t in op.inputs)
    if op.type == "Maximum":
        lows = [v for v in (lo_a, lo_b) if v is not None]
        high = None if hi_a is None or hi_b is None else max(hi_a, hi_b)
        return (max(lows) if lows else None), high
    highs = [v for v in (hi_a, hi_b) if v is not None]
    low = None if lo_a is None or lo_b is None else min(lo_a, lo_b)
    return low, (min(highs) if highs else None)


def _proven_size(ctx):
    """The number of bins when the body's clamping proves it the same in every
    iteration (``minlength == maxlength``), else None."""
    low, high = _bounds(ctx.op.inputs[1])
    return low if low is not None and low == high else None


def convert_bincount(ctx):
    """Bincount(arr, size, weights) / DenseBincount(input, size, weights)."""
    arr, size, weights = ctx.inputs
    proven = _proven_size(ctx) if size.is_stacked else None
    if proven is not None:  # a per-iteration size the body clamps to one value
        size = ctx.invariant_value(tf.constant(proven, ctx.op.inputs[1].dtype))
    rank = arr.shape.rank
    if rank not in (1, 2):
        return ctx.decline("an input of rank other than 1 or 2 (the kernel takes those)")
    dtype = ctx.output_dtypes[0]
    binary = ctx.has_attr("binary_output") and ctx.attr("binary_output")
    if not size.is_stacked:
        static = tf.get_static_value(size.tensor)
        if ctx.compiled and static is None:
            # The fallback, unrolled, compiles where XLA can fold the size after all.
            return ctx.decline("a number of bins known only at run time under XLA")
        width = tf.cast(size.tensor if static is None else int(static), tf.int32)
        sizes = tf.fill([ctx.n], width)
    elif ctx.compiled:
        return ctx.decline("a per-iteration number of bins has no static bound under XLA")
    else:
        sizes = tf.cast(size.tensor, tf.int32)
        width = tf.maximum(tf.reduce_max(sizes), 0)
    values, mask = _padded(ctx, arr)
    values = tf.cast(values, tf.int32)
    if _no_weights(weights) or binary:
        amounts = tf.ones_like(values, dtype)
    elif weights.shape.is_compatible_with(arr.shape):
        amounts = tf.cast(_padded(ctx, weights)[0], dtype)
    else:
        return ctx.decline("weights of another shape than the input")
    # The bins of each row: an iteration (rank 1) or an iteration's row (rank 2).
    per_row = tf.reshape(sizes, [-1] + [1] * rank)
    keep = (values >= 0) & (values < per_row)
    keep = keep if mask is None else mask & keep
    leading = tf.shape(values)[:-1]
    rows = tf.reshape(tf.range(tf.reduce_prod(leading)), tf.concat([leading, [1]], 0))
    bins = tf.where(keep, rows * width + values, -1)
    count = tf.reduce_prod(leading) * width
    counts = tf.math.unsorted_segment_sum(amounts, bins, count)
    if binary:
        counts = tf.cast(counts > 0, dtype)
    shape = tf.concat([tf.shape(values)[:-1], [width]], 0)
    counts = tf.reshape(counts, shape)
    negative = values < 0 if mask is None else mask & (values < 0)
    valid = tf.reduce_all(sizes >= 0) & tf.logical_not(tf.reduce_any(negative))
    counts = ctx.check(valid, "requires a non-negative input and size (as the kernel)",
                       tensor=counts)
    if not size.is_stacked:
        return Stacked(tensor=counts)
    return Ragged.from_stacked(counts, [None] * (rank - 1) + [sizes])


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
    for pattern in ("S**", "US*", "UUS", "R*U", "R*R"):
        registry.add(["Bincount", "DenseBincount"], convert_bincount, inputs=pattern)
    registry.add("HistogramFixedWidth", convert_histogram, inputs="S*U")
    registry.add("HistogramFixedWidth", convert_histogram, inputs="USU")
    registry.add("HistogramFixedWidth", convert_histogram, inputs="**S")
