"""Sparse segment reductions (``tf.sparse.segment_sum`` / ``_mean`` / ``_sqrt_n``:
SparseSegment{Sum,Mean,SqrtN}, with and without NumSegments) and their gradients, as one
op for all iterations.

``SparseSegmentX(data, indices, ids)[s]`` reduces the rows ``data[indices[k]]`` whose
``ids[k] == s``. All iterations run as one op of the WithNumSegments kind, over their
elements one after the other:

- rows: a stacked data's rows are flattened to ``[n*d0, ...]`` and iteration j's indices
  offset by ``j*d0``; an invariant data is used as it is (its indices need no offset);
- segments: iteration j's segment s becomes ``j*S + s``, S the number of segments of an
  iteration: ``num_segments``, or ``max(ids) + 1`` for invariant ids. Stacked ids without
  ``num_segments`` give each iteration ``max(ids_j) + 1`` segments: S is then the
  largest, and the result is ragged (its padding holds empty segments, which are 0).

Offset ids stay sorted (the kernel checks that) and the kernel's other checks that an
offset would hide (an index outside an iteration's data, a negative id, an id at or
above ``num_segments``: each would land in another iteration's block) run here.

The gradient ops ``(grad, indices, ids, output_dim0)`` add ``grad[ids[k]]`` (divided by
the segment's count, or its square root, for Mean / SqrtN) into row ``indices[k]`` of an
``[output_dim0, ...]`` result: iteration j's indices are offset by ``j*output_dim0`` and,
with a stacked grad of S rows, its ids by ``j*S``. The sum's gradient takes an invariant
grad as it is; Mean / SqrtN count each segment's elements, so their ids must stay apart
per iteration and an invariant grad is tiled.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_core.extend import Ragged, Stacked, shapes

_WITH_NUM_SEGMENTS = {op: op + "WithNumSegments"
                      for op in ("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN")}


def _iteration_column(ctx, dtype) -> tf.Tensor:
    """``range(n)`` as an ``[n, 1]`` column of ``dtype``."""
    return tf.reshape(tf.range(tf.cast(ctx.n, dtype), dtype=dtype),
                      shapes.shape_tensor([ctx.n_dim, 1]))


def _static_int(tensor):
    value = tf.get_static_value(tensor)
    return None if value is None else int(value)


def _in_range(ctx, value, high, message: str, tensor: tf.Tensor) -> tf.Tensor:
    """``tensor`` after checking that every entry of ``value`` (a layout value) the loop
    would see lies in ``[0, high)`` (``[0, inf)`` for ``high=None``): the kernel's own
    check, which the offsets would hide. Invariant entries are seen only when n > 0."""
    static = tf.get_static_value(value.tensor)
    static_high = None if high is None else tf.get_static_value(high)
    if static is not None and (static.size == 0 or (np.min(static) >= 0 and (
            high is None or (static_high is not None and np.max(static) < static_high)))):
        return tensor
    entries = value.tensor
    ok = tf.reduce_all(entries >= 0)
    if high is not None:
        ok = tf.logical_and(ok, tf.reduce_all(entries < tf.cast(high, entries.dtype)))
    if not value.is_stacked:
        ok = tf.logical_or(ok, tf.equal(ctx.n, 0))
    return ctx.check(ok, message, tensor=tensor)


def _rows_and_indices(ctx):
    """The rows the flat indices pick from, and the flat indices ``[n*k]``."""
    data, indices = ctx.inputs[:2]
    idx = ctx.stack(indices)
    if not data.is_stacked:
        return data.tensor, shapes.merge_leading(idx, n=ctx.n)
    d0 = ctx.dims(data)[1]
    idx = _in_range(ctx, indices, d0, "indices out of range [0, rows of data)", idx)
    idx = idx + _iteration_column(ctx, idx.dtype) * tf.cast(d0, idx.dtype)
    return shapes.merge_leading(data.tensor, n=ctx.n), shapes.merge_leading(idx, n=ctx.n)


def _reduce(ctx, segments, ids: tf.Tensor) -> tf.Tensor:
    """The WithNumSegments op over all iterations, ``segments`` per iteration and the
    stacked ids ``[n, k]``; returns ``[n, segments, ...]``."""
    rows, flat_indices = _rows_and_indices(ctx)
    flat_ids = shapes.merge_leading(
        ids + _iteration_column(ctx, ids.dtype) * tf.cast(segments, ids.dtype), n=ctx.n)
    total = ctx.n_dim * segments
    op_type = _WITH_NUM_SEGMENTS.get(ctx.op_type, ctx.op_type)
    attrs = {"Tnumsegments": tf.int32} if op_type != ctx.op_type else None
    inputs = [rows, flat_indices, flat_ids, tf.cast(total, tf.int32)]
    if op_type == ctx.op_type:  # keep the body's num_segments dtype
        inputs[3] = tf.cast(total, ctx.inputs[3].dtype)
    out = ctx.emit(*inputs, op_type=op_type, attrs=attrs)[0]
    return shapes.reshape(out, [ctx.n_dim, segments] + shapes.dims(out)[1:])


def convert_sparse_segment(ctx):
    """Invariant ids: ``max(ids) + 1`` segments in every iteration."""
    ids = ctx.inputs[2]
    if ids.shape.rank != 1:
        return ctx.decline("needs vector segment ids")
    static = tf.get_static_value(ids.tensor)
    if static is not None:
        segments = int(static.max()) + 1 if static.size else 0
    else:
        # The lowest value of the dtype for no ids: clipped before the cast.
        segments = tf.cast(tf.maximum(tf.reduce_max(ids.tensor) + 1, 0), tf.int32)
    stacked_ids = _in_range(ctx, ids, None, "negative segment id", ctx.stack(ids))
    return Stacked(tensor=_reduce(ctx, segments, stacked_ids))


def convert_sparse_segment_num_segments(ctx):
    """A fixed number of segments: ``num_segments``."""
    ids, num = ctx.inputs[2:]
    if ids.shape.rank != 1:
        return ctx.decline("needs vector segment ids")
    static = _static_int(num.tensor)
    segments = static if static is not None else tf.cast(num.tensor, tf.int32)
    stacked_ids = _in_range(ctx, ids, num.tensor,
                            "segment ids out of range [0, num_segments)", ctx.stack(ids))
    return Stacked(tensor=_reduce(ctx, segments, stacked_ids))


def convert_sparse_segment_ragged(ctx):
    """Stacked ids: iteration j has ``max(ids_j) + 1`` segments, a ragged result."""
    if ctx.compiled:
        return ctx.decline("the number of segments has no static bound under XLA")
    data, _, ids = ctx.inputs
    if data.shape.rank is None or ids.shape.rank != 1:
        return ctx.decline("needs a known data rank and vector ids")
    sid = _in_range(ctx, ids, None, "negative segment id", ids.tensor)
    lengths = tf.cast(tf.maximum(tf.reduce_max(sid, axis=1) + 1, 0), tf.int32)  # [n]
    width = tf.maximum(tf.reduce_max(lengths), 0)
    out = _reduce(ctx, width, sid)
    return Ragged.from_stacked(out, [lengths] + [None] * (data.shape.rank - 1))


def convert_sparse_segment_grad(ctx):
    grad, indices, ids, dim0 = ctx.inputs
    static = _static_int(dim0.tensor)
    rows = static if static is not None else tf.cast(dim0.tensor, tf.int32)
    idx = _in_range(ctx, indices, rows, "indices out of range [0, output_dim0)",
                    ctx.stack(indices))
    idx = idx + _iteration_column(ctx, idx.dtype) * tf.cast(rows, idx.dtype)
    sid = ctx.stack(ids)
    if grad.is_stacked or ctx.op_type != "SparseSegmentSumGrad":
        g = ctx.stack(grad)
        segments = ctx.dims(g)[1]
        sid = _in_range(ctx, ids, segments, "segment ids out of range [0, rows of grad)", sid)
        sid = sid + _iteration_column(ctx, sid.dtype) * tf.cast(segments, sid.dtype)
        g = shapes.merge_leading(g, n=ctx.n)
    else:
        g = grad.tensor  # the ids pick its rows as they are; the kernel checks them
    out = ctx.emit(g, shapes.merge_leading(idx, n=ctx.n), shapes.merge_leading(sid, n=ctx.n),
                   tf.cast(ctx.n_dim * rows, tf.int32))[0]
    return Stacked(tensor=shapes.reshape(out, [ctx.n_dim, rows] + shapes.dims(out)[1:]))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    plain = list(_WITH_NUM_SEGMENTS)
    registry.add(plain, convert_sparse_segment, inputs="**U")
    registry.add(plain, convert_sparse_segment_ragged, inputs="**S")
    registry.add(list(_WITH_NUM_SEGMENTS.values()), convert_sparse_segment_num_segments,
                 inputs="***U")
    registry.add(["SparseSegmentSumGrad", "SparseSegmentMeanGrad", "SparseSegmentSqrtNGrad"],
                 convert_sparse_segment_grad, inputs="***U")
