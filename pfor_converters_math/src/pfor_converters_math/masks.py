"""Boolean masks: one-argument ``tf.where`` (the coordinates of the true elements:
``[count_j, rank]``, ragged in its first dimension) and GatherV2 by ragged indices:
together what ``tf.boolean_mask`` becomes.

Where runs once on the whole stacked mask: its coordinates come sorted by iteration,
so an element's slot in its iteration's row is its position minus the number of true
elements of the iterations before; a scatter writes the rows into ``[n, W, rank]``
(``W`` the largest count). A ragged mask's padding is False, so it adds nothing.
Gathering by ragged indices gathers by the padded indices (zero in the padding, a
valid index whenever any index is) and masks the result.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Ragged, Stacked


def convert_where_ragged(ctx):
    """Where with one stacked or ragged argument."""
    if ctx.compiled:
        return ctx.decline("the number of true elements has no static bound under XLA")
    (mask,) = ctx.inputs
    tensor = mask.padded if isinstance(mask, Ragged) else mask.tensor
    if tensor.shape.rank is None:
        return ctx.decline("a mask of unknown rank")
    rank = tensor.shape.rank - 1
    truth = tensor if tensor.dtype == tf.bool else tf.not_equal(tensor, tf.zeros([], tensor.dtype))
    if ctx.nested:
        return _by_sorting(ctx, truth, rank)
    coords = tf.where(truth)  # [total, 1 + rank], sorted by iteration
    counts = tf.reduce_sum(tf.cast(tf.reshape(truth, [ctx.n, -1]), tf.int32), axis=1)
    before = tf.cumsum(counts, exclusive=True)
    rows = tf.cast(coords[:, 0], tf.int32)
    slots = tf.range(tf.shape(coords)[0], dtype=tf.int32) - tf.gather(before, rows)
    width = tf.maximum(tf.reduce_max(counts), 0)
    padded = tf.scatter_nd(tf.stack([rows, slots], axis=1), coords[:, 1:],
                           tf.stack([ctx.n, width, rank]))
    return Ragged(padded=padded, lengths=(counts, None))


def _by_sorting(ctx, truth, rank):
    """Where inside an outer pfor, which vectorizes the ops emitted here again: no op
    whose output shape depends on the data but a slice to the largest count (which
    the outer pfor makes ragged). Per iteration a stable sort of the flat mask puts
    the positions of its true elements first, in order; they are unravelled into
    coordinates and the padding set to zero."""
    flat = tf.cast(tf.reshape(truth, tf.stack([ctx.n, -1])), tf.int32)  # [n, P]
    counts = tf.reduce_sum(flat, axis=1)
    width = tf.reduce_max(tf.concat([counts, [0]], 0))
    # (top_k is stable: of equal values the lower index comes first)
    first = tf.math.top_k(flat, k=tf.shape(flat)[1], sorted=True)
    position = tf.cast(first.indices[:, :width], tf.int64)  # [n, W]
    inside = tf.cast(first.values[:, :width], tf.int64)  # 1 for a true element, else 0
    dims = tf.shape(truth, out_type=tf.int64)[1:]
    coords = []
    for d in reversed(range(rank)):
        coords.append(tf.expand_dims(tf.math.floormod(position, dims[d]) * inside, -1))
        position = tf.math.floordiv(position, dims[d])
    if not coords:
        return ctx.decline("a scalar mask")
    padded = coords[0] if rank == 1 else tf.concat(coords[::-1], axis=-1)
    return Ragged(padded=padded, lengths=(counts, None))


def convert_gather_ragged_indices(ctx):
    """GatherV2 by ragged indices of stacked, invariant or ragged params (``batch_dims``
    0)."""
    params, indices, axis = ctx.inputs
    axis_value = tf.get_static_value(axis.tensor)
    rank = params.shape.rank
    if axis_value is None or rank is None:
        return ctx.decline("a run-time axis or params of unknown rank")
    axis_value = int(axis_value) % rank if rank else 0
    batch = ctx.attr("batch_dims")
    batch = batch + indices.rank if batch < 0 else batch
    index = indices.padded  # [n, D..., ]
    if batch:  # (what boolean_mask emits inside an outer pfor: see convert_where_ragged)
        if (isinstance(params, Ragged) or any(length is not None
                                              for length in indices.lengths[:batch])
                or not 0 < batch <= axis_value):
            return ctx.decline("batch_dims with ragged params or batch dimensions")
        out = tf.gather(ctx.stacked(0), index, axis=axis_value + 1, batch_dims=batch + 1)
        lengths = ([None] * axis_value + list(indices.lengths[batch:])
                   + [None] * (rank - axis_value - 1))
        return Ragged.from_stacked(out, lengths)
    if isinstance(params, Ragged):
        return _gather_ragged_params(ctx, params, index, indices.mask(), indices.lengths,
                                     axis_value)
    if params.is_stacked:
        out = tf.gather(params.tensor, index, axis=axis_value + 1, batch_dims=1)
        before = axis_value  # per-iteration axes before the gathered ones
    else:
        out = tf.gather(params.tensor, index, axis=axis_value)
        before = axis_value
        if before:  # [p0.., n, D.., ...] -> [n, p0.., D.., ...]
            perm = list(range(out.shape.rank))
            perm = [before] + perm[:before] + perm[before + 1:]
            out = tf.transpose(out, perm)
    lengths = [None] * before + list(indices.lengths) + [None] * (rank - axis_value - 1)
    return Ragged.from_stacked(out, lengths)


def convert_gather_ragged_params(ctx):
    """GatherV2 of ragged params by stacked indices (e.g. a loop's rows of a ragged
    value it reads from outside, inside an outer pfor), or by the same indices in every
    iteration (taken as stacked: each is checked against its own iteration's size, and
    batch dimensions pair with each iteration's params): the batch dimensions must be
    one size in every iteration; indices into a dimension that varies are checked
    against each iteration's size (the padding would read zeros where the loop fails)."""
    params, _, axis = ctx.inputs
    axis_value = tf.get_static_value(axis.tensor)
    index = ctx.stacked(1)
    if axis_value is None or index.shape.rank is None:
        return ctx.decline("a run-time axis, or indices of unknown rank")
    axis_value = int(axis_value) % params.rank
    batch = ctx.attr("batch_dims")
    batch = batch + index.shape.rank - 1 if batch < 0 else batch
    if any(length is not None for length in params.lengths[:batch]):
        return ctx.decline("batch dimensions that differ between iterations")
    size = params.lengths[axis_value]
    if size is not None:
        bound = tf.reshape(tf.cast(size, index.dtype), [-1] + [1] * (index.shape.rank - 1))
        index = ctx.check(tf.reduce_all((index >= 0) & (index < bound)),
                          "GatherV2: indices out of range of each iteration's params",
                          tensor=index)
    out = tf.gather(params.padded, index, axis=axis_value + 1, batch_dims=batch + 1)
    lengths = (list(params.lengths[:axis_value]) + [None] * (index.shape.rank - 1 - batch)
               + list(params.lengths[axis_value + 1:]))
    if all(length is None for length in lengths):
        return Stacked(tensor=out)
    return Ragged.from_stacked(out, lengths)


def _gather_ragged_params(ctx, params, index, valid, index_lengths, axis):
    """Each iteration's params rows by its own indices (``tf.repeat`` of a ragged
    value, a RaggedTensor's row ids): the indices are checked against each iteration's
    size (the padding would read zeros where the loop fails), the padding of the
    indices (``valid`` False) reads an appended zero row."""
    if axis != 0:
        return ctx.decline("ragged params gathered along an axis other than 0")
    bound = tf.reshape(tf.cast(params.extents()[0], index.dtype),
                       [-1] + [1] * (index.shape.rank - 1))
    inside = tf.logical_or(tf.logical_not(valid), (index >= 0) & (index < bound))
    index = ctx.check(tf.reduce_all(inside), "GatherV2: indices out of range of each "
                      "iteration's params", tensor=index)
    zero_row = tf.cast(tf.shape(params.padded)[1], index.dtype)
    padded = tf.pad(params.padded, [[0, 0], [0, 1]] + [[0, 0]] * (params.rank - 1))
    out = tf.gather(padded, tf.where(valid, index, zero_row), axis=1, batch_dims=1)
    # Zero where the indices are padding, and the rows' own padding zero: no mask.
    lengths = list(index_lengths) + list(params.lengths[1:])
    if all(length is None for length in lengths):
        return Stacked(tensor=out)
    return Ragged(padded=out, lengths=tuple(lengths))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("Where", convert_where_ragged, inputs="S")
    registry.add("Where", convert_where_ragged, inputs="R")
    registry.add("GatherV2", convert_gather_ragged_indices, inputs="*RU")
    registry.add("GatherV2", convert_gather_ragged_indices, inputs="RRU")
    registry.add("GatherV2", convert_gather_ragged_params, inputs="RSU")
    registry.add("GatherV2", convert_gather_ragged_params, inputs="RUU")
