"""Segment reductions and scatters in every layout: one op for all iterations, by
offsetting indices.

- Segment reductions: iteration j's segment s becomes segment ``j*S + s`` of one big
  reduction over the flattened ``[n*d0, ...]`` data, with S segments per iteration.
  Sorted ids stay sorted under that offset, so the sorted ops (also Mean, and Max/Min
  with their zero-for-empty rule) convert exactly. Sorted ops size their output as
  ``max(id)+1``, which could differ between iterations when ids are stacked, so only
  invariant ids are taken there; the unsorted ops get S from ``num_segments`` and take
  stacked ids too. Negative ids are dropped, as the kernel drops them (kept out of other
  iterations' segments); an id >= S, which the kernel rejects, is checked for at run
  time, since the offset would turn it into a valid id of the next iteration's block.
- Scatters (ScatterNd, TensorScatter*): each index tuple gets the iteration number
  prepended, and the output / tensor gets the iteration axis; stacked indices cost
  nothing extra, invariant ones are tiled (they are small).

Sorted segment reductions with per-iteration ids: each iteration has ``max(ids) + 1``
segments, so the result is ragged along its first dimension. One sorted segment op over
all iterations' elements: iteration j's segment s becomes segment ``j * W + s`` (``W``
the largest number of segments), which keeps the ids sorted, so empty segments come out
as the kernel makes them (0, and 1 for a product); the result is padded to ``n * W``
segments and split per iteration. Ragged data and ids (``segment_sum(x[:k], ids[:k])``)
give up their padding first. A negative id fails here as in the kernel, whose own check
finds unsorted ids (they stay unsorted).

``UnsortedSegmentSum`` (and Max, Min, Prod) of ragged data by ragged ids (the gradient of
a gather by per-iteration indices, ``tf.boolean_mask``'s for one): each iteration's ids
are moved to its own block of ``num_segments`` segments; the padding goes to one extra
segment that is dropped. Ids outside ``[0, num_segments)`` fail as the loop's kernel
does. With per-iteration ``num_segments`` the result is ragged along its first dimension
(blocks as wide as the largest). Ragged data by ids of one shape in every iteration: the
loop's kernel needs the data's leading dimensions to be the ids' shape, so they are one
shape in every iteration (checked when it runs) and the stacked converter takes them.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Ragged, Stacked, shapes


def _iterations(ctx, rank: int, dtype) -> tf.Tensor:
    """``range(n)`` shaped ``[n, 1, ..., 1]`` (rank ``rank``) of ``dtype``."""
    n = ctx.n_dim
    iters = tf.range(tf.cast(n, dtype), dtype=dtype)
    return tf.reshape(iters, shapes.shape_tensor([n] + [1] * (rank - 1)))


def _num_sorted_segments(ids: tf.Tensor):
    """max(ids) + 1 (0 for no ids), statically when the ids are constant."""
    static = tf.get_static_value(ids)
    if static is not None:
        return int(static.max()) + 1 if static.size else 0
    return tf.maximum(tf.reduce_max(ids) + 1, 0)


def convert_sorted_segment(ctx):
    data, ids = ctx.inputs
    if data.shape.rank is None or ids.shape.rank != 1:
        return ctx.decline("needs known ranks")
    segments = _num_sorted_segments(ids.tensor)
    count = tf.cast(segments, ids.dtype) if isinstance(segments, tf.Tensor) else segments
    offset = ids.tensor[None, :] + _iterations(ctx, 2, ids.dtype) * count  # [n, d0]
    d = ctx.dims(data)
    out = ctx.emit(shapes.merge_leading(data.tensor, n=ctx.n),
                   shapes.reshape(offset, [shapes.product(d[:2])]))[0]
    return Stacked(tensor=shapes.reshape(out, [d[0], segments] + d[2:]))


def convert_unsorted_segment(ctx):
    data, ids, num = ctx.inputs
    if data.shape.rank is None or ids.shape.rank is None:
        return ctx.decline("needs known ranks")
    static = tf.get_static_value(num.tensor)
    segments = int(static) if static is not None else num.tensor
    count = tf.cast(num.tensor, ids.dtype)
    rank = ids.shape.rank + 1
    keep = tf.logical_and(ids.tensor >= 0, ids.tensor < count)
    offset = tf.where(keep, ids.tensor + _iterations(ctx, rank, ids.dtype) * count,
                      tf.constant(-1, ids.dtype))
    offset = _check_ids_below(ctx, ids, count, offset)
    n = ctx.n_static if ctx.n_static is not None else ctx.n
    total = tf.cast(n, num.dtype) * num.tensor
    stacked = ctx.stacked(0)
    out = ctx.emit(stacked, offset, total)[0]
    return Stacked(tensor=shapes.reshape(out, [n, segments] + ctx.dims(stacked)[rank:]))


def _check_ids_below(ctx, ids, count, tensor):
    """``tensor`` after checking that every id the loop would see is below ``count``
    (the kernel's own check, lost by the offset). Invariant ids are seen only when
    there is an iteration."""
    static_ids, static_count = tf.get_static_value(ids.tensor), tf.get_static_value(count)
    if static_ids is not None and static_count is not None and (
            static_ids.size == 0 or static_ids.max() < static_count):
        return tensor
    largest = tf.reduce_max(ids.tensor)  # the lowest value of the dtype when empty
    below = largest < count
    if not ids.is_stacked:
        below = tf.logical_or(below, tf.equal(ctx.n, 0))
    return ctx.check(below, "segment_ids holds a value out of range [0, num_segments) "
                     "(largest id, num_segments):", [largest, count], tensor=tensor)


def _indices_with_iteration(ctx, k: int) -> tf.Tensor:
    """Input k (index tuples ``[..., r]``) stacked, each tuple prefixed by its iteration."""
    indices = ctx.stacked(k)
    d = ctx.dims(indices)
    column = tf.broadcast_to(_iterations(ctx, len(d), indices.dtype), d[:-1] + [1])
    return tf.concat([column, indices], axis=-1)


def convert_scatter_nd(ctx):
    indices, updates, shape = ctx.inputs
    if shape.is_stacked:
        return ctx.decline("the output shape must be invariant")
    if indices.shape.rank is None:
        return ctx.decline("needs a known index rank")
    static = tf.get_static_value(shape.tensor)
    if static is not None and ctx.n_static is not None:
        full = tf.constant([ctx.n_static] + list(static), shape.dtype)
    else:
        full = tf.concat([tf.reshape(tf.cast(ctx.n, shape.dtype), [1]), shape.tensor], 0)
    out = ctx.emit(_indices_with_iteration(ctx, 0), ctx.stacked(1), full)[0]
    return Stacked(tensor=out)


def convert_tensor_scatter(ctx):
    """TensorScatter* / ScatterNdNonAliasingAdd: (tensor, indices, updates)."""
    if ctx.inputs[1].shape.rank is None:
        return ctx.decline("needs a known index rank")
    out = ctx.emit(ctx.stacked(0), _indices_with_iteration(ctx, 1), ctx.stacked(2))[0]
    return Stacked(tensor=out)


def _elements(ctx, data, ids):
    """Every iteration's elements (rows of data) one after the other, their ids, each
    one's iteration, and a validity condition; ids of an iteration with no element
    count as none."""
    if isinstance(ids, Ragged):
        if data.ragged_axes != (0,):
            return None
        mask = ids.mask()  # [n, D]
        same = tf.reduce_all(tf.equal(ids.lengths[0], data.lengths[0]))
        width = tf.minimum(tf.shape(ids.padded)[1], tf.shape(data.padded)[1])
        mask, padded_ids = mask[:, :width], ids.padded[:, :width]
        rows = shapes.masked_elements(data.padded[:, :width], mask)
        flat_ids = shapes.masked_elements(padded_ids, mask)
        owner = tf.cast(tf.where(mask)[:, 0], flat_ids.dtype)
        per_iteration = tf.where(mask, padded_ids, tf.constant(-1, padded_ids.dtype))
        return rows, flat_ids, owner, per_iteration, same
    tensor = ctx.stack(data)
    rows = shapes.merge_leading(tensor, n=ctx.n)
    d = ctx.dims(ids.tensor)
    owner = shapes.owners(tf.fill([ctx.n], d[1]), dtype=ids.dtype)
    return rows, tf.reshape(ids.tensor, [-1]), owner, ids.tensor, True


def convert_segment_ragged(ctx):
    """SegmentSum/Mean/Max/Min/Prod with stacked ids (data stacked or invariant), or
    ragged ids and data."""
    if ctx.compiled:
        return ctx.decline("the number of segments has no static bound under XLA")
    data, ids = ctx.inputs
    if data.shape.rank is None or ids.shape.rank != 1:
        return ctx.decline("needs a known data rank and vector ids")
    found = _elements(ctx, data, ids)
    if found is None:
        return ctx.decline("data ragged in another dimension than the first")
    rows, flat_ids, owner, per_iteration, same = found
    dtype = flat_ids.dtype
    lengths = tf.maximum(tf.reduce_max(per_iteration, axis=1) + 1, 0)  # [n]
    width = tf.maximum(tf.reduce_max(lengths), 0)
    out = ctx.emit(rows, flat_ids + owner * width)[0]
    # The op stops after the last iteration's last segment: pad to n * W segments.
    total = tf.cast(ctx.n, dtype) * width
    missing = tf.cast(total, tf.int32) - tf.shape(out)[0]
    out = tf.pad(out, tf.concat([[[0, missing]], tf.zeros([out.shape.rank - 1, 2],
                                                           tf.int32)], 0))
    inner = tf.shape(out)[1:]
    out = tf.reshape(out, tf.concat([[ctx.n, tf.cast(width, tf.int32)], inner], 0))
    valid = tf.logical_and(same, tf.reduce_all(flat_ids >= 0))
    out = ctx.check(valid, "segment ids must be non-negative and as many as data's "
                    "first dimension (as the kernel)", tensor=out)
    return Ragged.from_stacked(out, [tf.cast(lengths, tf.int32)] + [None] * (data.shape.rank - 1))


def convert_unsorted_segment_ragged(ctx):
    """Ids of any rank (a nested pfor's body sums by ids ``[n_inner, W]``): data and
    ids lined up on their first ``ids.rank`` dimensions, which must agree."""
    data, ids, count = ctx.inputs
    if not isinstance(ids, Ragged):
        raise Decline("ids are not ragged")
    rank = ids.rank
    trailing_lengths = ()
    if isinstance(data, Ragged):
        # Rows whose own extents vary (a gradient's rows of a ragged value): the
        # padding is zero, so summing padded rows leaves it zero; the sums keep them.
        trailing_lengths = data.lengths[rank:]
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
    lengths = ((counts if per_iteration else None,)
               + (tuple(trailing_lengths) or (None,) * (len(values.shape) - 1 - rank)))
    if all(length is None for length in lengths):
        return Stacked(tensor=out)
    if ctx.op_type == "UnsortedSegmentSum":
        # Segments past an iteration's count get no element: their sums are zero, as
        # the padding must be (other reductions start empty segments elsewhere).
        return Ragged(padded=out, lengths=tuple(
            None if length is None else tf.cast(length, tf.int32) for length in lengths))
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
        values, segment = shapes.pad_axis(values, 1 + d, wide), shapes.pad_axis(segment, 1 + d, wide)
    return values, segment


def convert_unsorted_segment_of_uniform_data(ctx):
    """Ragged data, ids of one shape: the data are of one shape too (checked)."""
    data, ids, count = ctx.inputs
    data = data.uniform(f"pfor: {ctx.op_type} (op {ctx.op.name}): data whose shape differs "
                        "between iterations meet segment ids of one shape (the loop's "
                        "kernel needs data.shape[:ids.rank] == ids.shape)")
    return convert_unsorted_segment(ctx.with_inputs([data, ids, count]))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(["SegmentSum", "SegmentMean", "SegmentMax", "SegmentMin", "SegmentProd"],
                 convert_sorted_segment, inputs="SU")
    registry.add(["UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin",
                  "UnsortedSegmentProd"], convert_unsorted_segment, inputs="**U")
    registry.add("ScatterNd", convert_scatter_nd, inputs="**U")
    registry.add(["TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub",
                  "TensorScatterMax", "TensorScatterMin", "ScatterNdNonAliasingAdd"],
                 convert_tensor_scatter, inputs="***")
    # Sorted segments by per-iteration ids (above: invariant ids, a fixed segment count).
    for pattern in ("*S", "RR"):
        registry.add(["SegmentSum", "SegmentMean", "SegmentMax", "SegmentMin", "SegmentProd"],
                     convert_segment_ragged, inputs=pattern)
    for op_type in ("UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin",
                    "UnsortedSegmentProd"):
        registry.add(op_type, convert_unsorted_segment_ragged, inputs="RR*")
        registry.add(op_type, convert_unsorted_segment_ragged, inputs="SR*")
        registry.add(op_type, convert_unsorted_segment_of_uniform_data, inputs="R*U")
