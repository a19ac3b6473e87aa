"""tf.RaggedTensor's own ops, which its code emits in a loop body: RaggedRange,
RaggedGather, RaggedTensorToTensor, RaggedTensorToVariant / FromVariant (how ``tf.map_fn``
and ``tf.TensorArray`` carry a ragged value per element), with per-iteration (stacked or
ragged) arguments.

Each runs once over every iteration's data at once: the iterations' rows are put one
after the other (one ragged tensor of one more ragged dimension, whose rows are the
iterations), the op runs on that, and each iteration's piece is cut back out of the
result. A piece is a run of consecutive rows (``pieces``): iteration i's rows
``begin[i] .. begin[i] + length[i]`` of a flat tensor, gathered into a padded one (the
padding gathered from an appended zero row, so it is zero and no gradient crosses it).
Under XLA the sizes have no static bound: the converters decline.

Encoding one ragged value per iteration (``batched_input=False``) puts the iterations'
values one after the other as the rows of one ragged tensor and encodes it with
``batched_input=True``: variant i is iteration i's value, as in the loop. Decoding a
stacked ``[n]`` of variants decodes all at once with the iterations in front and cuts
each iteration's output out of it (its splits rebuilt from its own rows' lengths).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_core.extend import Decline, Ragged, Stacked, padded_operands, shapes
from pfor_converters_math.ragged_common import is_ragged, same_lengths


def pieces(flat, begin, length, *, offset=None, uniform=None):
    """Iteration i's rows ``flat[begin[i]:begin[i] + length[i]]`` (minus ``offset[i]``):
    ``Stacked`` when ``uniform`` (a static int) is every iteration's length, else
    ``Ragged`` along the first per-iteration dimension."""
    begin, length = tf.cast(begin, tf.int32), tf.cast(length, tf.int32)
    width = uniform if uniform is not None else tf.maximum(tf.reduce_max(length), 0)
    steps = tf.range(width)[None, :]
    inside = steps < length[:, None]
    size = tf.shape(flat, out_type=tf.int32)[0]
    index = tf.where(inside, begin[:, None] + steps, size)
    zero = tf.zeros(tf.concat([[1], tf.shape(flat)[1:]], 0), flat.dtype)
    pieces = tf.gather(tf.concat([flat, zero], 0), index)
    if offset is not None:
        pieces = tf.where(inside, pieces - tf.cast(offset, flat.dtype)[:, None], 0)
    if uniform is not None:
        return Stacked(tensor=pieces)
    return Ragged(padded=pieces, lengths=(length,) + (None,) * (flat.shape.rank - 1))


def _vector(ctx, value):
    """A per-iteration vector's elements, iteration after iteration, its per-iteration
    sizes ``[n]`` and its static size (None when it varies)."""
    if is_ragged(value):
        flat, sizes = value.to_flat()
        return flat, sizes[:, 0], None
    tensor = ctx.stack(value)
    width = tf.shape(tensor, out_type=tf.int32)[1]
    return tf.reshape(tensor, [-1]), tf.fill([ctx.n], width), tensor.shape[1]


# -- RaggedRange ---------------------------------------------------------------------

def convert_ragged_range(ctx):
    """RaggedRange (``tf.ragged.range``) with per-iteration starts/limits/deltas."""
    if ctx.compiled:
        return ctx.decline("the number of values has no static bound under XLA")
    values = ctx.inputs
    ranks = [padded_operands.per_iteration_rank(v) for v in values]
    if any(r > 1 for r in ranks):
        return ctx.decline("an argument of rank > 1")
    rows, static_rows = None, 1
    for v, r in zip(values, ranks):
        if r == 1:
            _, sizes, static = _vector(ctx, v)
            rows = sizes if rows is None else same_lengths(
                ctx, rows, sizes, "RaggedRange: starts, limits and deltas")
            static_rows = static if static_rows == 1 or static is None else static_rows
            if is_ragged(v):
                static_rows = None
    if rows is None:
        rows = tf.ones([ctx.n], tf.int32)
    owner = shapes.owners(rows)
    args = [_vector(ctx, v)[0] if r == 1 else tf.gather(ctx.stack(v), owner)
            for v, r in zip(values, ranks)]
    splits, dense = tf.raw_ops.RaggedRange(starts=args[0], limits=args[1], deltas=args[2],
                                           Tsplits=ctx.attr("Tsplits"))
    first_row = tf.cumsum(rows, exclusive=True)
    first = tf.gather(splits, first_row)
    count = tf.gather(splits, first_row + rows) - first
    return [pieces(splits, first_row, rows + 1, offset=first,
                    uniform=None if static_rows is None else static_rows + 1),
            pieces(dense, first, count)]


# -- RaggedGather ----------------------------------------------------------------------

def convert_ragged_gather(ctx):
    """RaggedGather of an invariant ragged tensor by per-iteration indices (a scalar or
    a vector per iteration)."""
    if ctx.compiled:
        return ctx.decline("the number of values has no static bound under XLA")
    *splits, dense, indices = ctx.inputs
    rank = padded_operands.per_iteration_rank(indices)
    if rank > 1:
        return ctx.decline("indices of rank > 1")
    if rank == 0:
        flat, counts, static = ctx.stack(indices), None, None
    else:
        flat, counts, static = _vector(ctx, indices)
    out_splits, out_values = tf.raw_ops.RaggedGather(
        params_nested_splits=[s.tensor for s in splits], params_dense_values=dense.tensor,
        indices=flat, OUTPUT_RAGGED_RANK=len(splits))
    return _gathered(ctx, out_splits, out_values, counts, static)


def convert_ragged_gather_of_per_iteration_params(ctx):
    """RaggedGather of a ragged tensor built in the body (per-iteration row splits or
    values): the iterations' params are put one after the other as one ragged tensor,
    each iteration's indices offset to its own rows (checked in range: the loop's
    kernel rejects what would otherwise land in another iteration's rows)."""
    if ctx.compiled:
        return ctx.decline("the number of values has no static bound under XLA")
    *splits, dense, indices = ctx.inputs
    rank = padded_operands.per_iteration_rank(indices)
    if rank > 1:
        return ctx.decline("indices of rank > 1")
    if is_ragged(dense) and dense.ragged_axes != (0,):
        return ctx.decline("values whose inner dimensions vary per iteration")
    lengths, rows = [], []
    for partition in splits:
        level, count, _ = _row_lengths(ctx, partition)
        lengths.append(level)
        rows.append(count)
    values, counts, _ = _vector(ctx, dense) if dense.shape.rank == 1 else _values(ctx, dense)
    values = _first(ctx, values, counts, _sum_per_iteration(ctx, lengths[-1], rows[-1]))
    kind = ctx.attr("Tsplits")
    nested = [tf.concat([tf.zeros([1], kind), tf.cumsum(tf.cast(level, kind))], 0)
              for level in lengths]
    if rank == 0:
        flat, counts, static = ctx.stack(indices), None, None
        owner = tf.range(ctx.n)
    else:
        flat, counts, static = _vector(ctx, indices)
        owner = shapes.owners(counts)
    local = tf.cast(flat, tf.int32)
    inside = tf.reduce_all((local >= 0) & (local < tf.gather(rows[0], owner)))
    local = ctx.check(inside, "RaggedGather: indices out of range [0, nrows)", tensor=local)
    offset = tf.gather(tf.cumsum(rows[0], exclusive=True), owner)
    out_splits, out_values = tf.raw_ops.RaggedGather(
        params_nested_splits=nested, params_dense_values=values,
        indices=tf.cast(local + offset, flat.dtype), OUTPUT_RAGGED_RANK=len(splits))
    return _gathered(ctx, out_splits, out_values, counts, static)


def _gathered(ctx, out_splits, out_values, counts, static):
    """Each iteration's piece of a RaggedGather over all iterations' indices (``counts``
    per iteration, None for one scalar index each)."""
    outputs = []
    if counts is None:  # one row each: its sub-rows are the iteration's value
        begin = tf.range(ctx.n)
        length = tf.ones([ctx.n], tf.int32)
    else:
        begin, length = tf.cumsum(counts, exclusive=True), counts
    for level, s in enumerate(out_splits):
        first = tf.gather(s, begin)
        if level or counts is not None:
            uniform = static + 1 if level == 0 and static is not None else None
            outputs.append(pieces(s, begin, length + 1, offset=first, uniform=uniform))
        begin, length = first, tf.gather(s, begin + length) - first
    outputs.append(pieces(out_values, begin, length))
    return outputs


# -- RaggedTensorToTensor -----------------------------------------------------------

def _row_lengths(ctx, partition):
    """ROW_SPLITS of every iteration: each row's length, iteration after iteration, and
    each iteration's number of rows (and that number when static)."""
    if is_ragged(partition):
        padded, sizes, static = partition.padded, partition.lengths[0], None
    else:
        padded = ctx.stack(partition)
        sizes = tf.fill([ctx.n], tf.shape(padded, out_type=tf.int32)[1])
        static = None if padded.shape[1] is None else padded.shape[1] - 1
    rows = tf.maximum(sizes - 1, 0)
    diffs = Ragged.from_stacked(padded[:, 1:] - padded[:, :-1], [rows])
    return diffs.to_flat()[0], rows, static


def _rowid_lengths(ctx, rowids, rows):
    """VALUE_ROWIDS of every iteration (``rows[i]`` rows): each row's length, iteration
    after iteration, and each iteration's number of values."""
    flat, count, _ = _vector(ctx, rowids)
    owner = shapes.owners(count)
    first_row = tf.cumsum(rows, exclusive=True)
    total = tf.reduce_sum(rows)
    row = tf.cast(flat, tf.int32) + tf.gather(first_row, owner)
    inside = tf.reduce_all((flat >= 0) & (tf.cast(flat, tf.int32) < tf.gather(rows, owner)))
    row = ctx.check(inside, "RaggedTensorToTensor: value_rowids out of range [0, nrows)",
                    tensor=row)
    lengths = tf.math.bincount(row, minlength=total, maxlength=total, dtype=tf.int64)
    return lengths, count


def convert_ragged_to_tensor(ctx):
    """RaggedTensorToTensor (``rt.to_tensor()``) of per-iteration values and row
    partitions, with an invariant shape and an invariant or per-iteration default
    value."""
    if ctx.compiled:
        return ctx.decline("the output's size has no static bound under XLA")
    shape, values, default, *partitions = ctx.inputs
    kinds = [k.decode() if isinstance(k, bytes) else k for k in ctx.attr("row_partition_types")]
    if is_ragged(values) and values.ragged_axes != (0,):
        return ctx.decline("values whose inner dimensions vary per iteration")
    out_rank = ctx.op.outputs[0].shape.rank
    wanted = tf.get_static_value(shape.tensor)
    if wanted is None or out_rank is None:
        return ctx.decline("the shape is known only at run time")
    wanted = np.asarray(wanted).reshape(-1)
    if wanted.size == 1 and wanted[0] == -1 and out_rank != 1:
        wanted = np.full([out_rank], -1)
    lengths, rows, static_rows = _partition_levels(ctx, kinds, partitions)
    rt = _stacked_ragged(ctx, values, lengths, rows)
    out_shape = [None] + [None if d < 0 else int(d) for d in wanted]
    if default.is_stacked:  # each iteration's own default where it has no value
        dense = rt.to_tensor(shape=out_shape)
        present = tf.ones_like(rt, dtype=tf.bool).to_tensor(shape=out_shape)
        fill = default.tensor
        fill = tf.reshape(fill, tf.concat([tf.shape(fill)[:1], tf.ones(
            [dense.shape.rank - fill.shape.rank], tf.int32), tf.shape(fill)[1:]], 0))
        dense = tf.where(present, dense, fill)
    else:
        dense = rt.to_tensor(default_value=default.tensor, shape=out_shape)
    extents = _extents(ctx, wanted, out_rank, lengths, rows, static_rows)
    # A size the body knows is every iteration's (e.g. rows counted by a constant).
    static = ctx.output_shapes[0]
    if static.rank == out_rank:
        known = [static[d] is not None for d in range(out_rank)]
        extents = [None if k else e for k, e in zip(known, extents)]
        dense = dense[(slice(None),) + tuple(slice(0, static[d]) if known[d] else slice(None)
                                             for d in range(out_rank))]
    if all(e is None for e in extents):
        return Stacked(tensor=dense)
    return Ragged.from_stacked(dense, extents)


def _partition_levels(ctx, kinds, partitions):
    """Each level's row lengths (all iterations' rows one after the other), each
    iteration's number of rows at that level, and the number of rows if invariant."""
    lengths, rows = [], []
    if kinds[0] == "FIRST_DIM_SIZE":
        rows.append(tf.cast(ctx.stack(partitions[0]), tf.int32))
        static_rows = (None if partitions[0].is_stacked
                       else tf.get_static_value(partitions[0].tensor))
        for rowids in partitions[1:]:
            level, count = _rowid_lengths(ctx, rowids, rows[-1])
            lengths.append(level)
            rows.append(count)
    elif all(k == "ROW_SPLITS" for k in kinds):
        static_rows = None
        for k, partition in enumerate(partitions):
            level, count, static = _row_lengths(ctx, partition)
            static_rows = static if k == 0 else static_rows
            lengths.append(level)
            rows.append(count)
    else:
        raise Decline(f"row partition types {kinds}")
    return lengths, rows, static_rows


def _stacked_ragged(ctx, values, lengths, rows) -> tf.RaggedTensor:
    """The iterations' ragged tensors as one, the iteration axis outermost.

    In each iteration the kernel requires every level's row lengths to add up to the
    next level's number of rows; of the values it reads as many as the last level's
    lengths add up to and ignores any further ones: so do we, keeping each iteration's
    first ones. More than there are is an error (the loop would read past the end)."""
    flat, counts, _ = _vector(ctx, values) if values.shape.rank == 1 else _values(ctx, values)
    used = [_sum_per_iteration(ctx, level, rows[k]) for k, level in enumerate(lengths)]
    for k in range(1, len(lengths)):
        fits = tf.reduce_all(tf.equal(used[k - 1], rows[k]))
        lengths[k] = ctx.check(fits, "RaggedTensorToTensor: a row partition's size differs "
                               "from the number of rows the one above it makes",
                               tensor=lengths[k])
    rt = _first(ctx, flat, counts, used[-1])
    for level in reversed(lengths):
        rt = tf.RaggedTensor.from_row_lengths(rt, tf.cast(level, tf.int64), validate=False)
    return tf.RaggedTensor.from_row_lengths(rt, tf.cast(rows[0], tf.int64), validate=False)


def _extents(ctx, wanted, out_rank, lengths, rows, static_rows) -> list:
    """Each iteration's extent: the fixed size where ``shape`` gives one, else its rows
    (dimension 0) or its longest row (the others); inner dimensions are uniform."""
    extents = [None if wanted[0] >= 0 or static_rows is not None else rows[0]]
    for k, level in enumerate(lengths):
        if wanted[k + 1] >= 0:
            extents.append(None)
            continue
        owner = shapes.owners(rows[k])
        longest = tf.math.unsorted_segment_max(tf.cast(level, tf.int32), owner, ctx.n)
        extents.append(tf.maximum(longest, 0))
    return extents + [None] * (out_rank - len(extents))


def _values(ctx, values):
    """Values of rank > 1 per iteration (varying in the first dimension at most): the
    rows, iteration after iteration, and each iteration's number of rows."""
    if is_ragged(values):
        padded, count = values.padded, values.lengths[0]
        inner = tf.shape(padded)[2:]
        flat, _ = values.to_flat()
        return tf.reshape(flat, tf.concat([[-1], inner], 0)), count, None
    tensor = ctx.stack(values)
    dims = tf.shape(tensor, out_type=tf.int32)
    flat = tf.reshape(tensor, tf.concat([[-1], dims[2:]], 0))
    return flat, tf.fill([ctx.n], dims[1]), None


def _first(ctx, flat, counts, wanted):
    """The first ``wanted[i]`` of iteration i's ``counts[i]`` values in ``flat``
    (values iteration after iteration), checked to be there."""
    owner = shapes.owners(counts)
    local = tf.range(tf.shape(owner)[0]) - tf.gather(tf.cumsum(counts, exclusive=True), owner)
    keep = local < tf.gather(wanted, owner)
    flat = ctx.check(tf.reduce_all(wanted <= counts), "RaggedTensorToTensor: the row "
                     "partitions address more values than there are", tensor=flat)
    return shapes.masked_elements(flat, keep)


def _sum_per_iteration(ctx, level, rows):
    owner = shapes.owners(rows)
    return tf.cast(tf.math.unsorted_segment_sum(level, owner, ctx.n), tf.int32)


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
    return shapes.masked_elements(padded, tf.sequence_mask(counts, tf.shape(padded)[1]))


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
    for pattern in ("S**", "US*", "UUS", "R**", "*R*", "**R", "RR*", "R*R", "*RR",
                    "RRR"):
        registry.add("RaggedRange", convert_ragged_range, inputs=pattern)
    for pattern in ("UUS", "UUR", "UUUS", "UUUR"):
        registry.add("RaggedGather", convert_ragged_gather, inputs=pattern)
    # Params built in the body: some per-iteration splits or values (1 or 2 levels).
    for pattern in ("S??", "R??", "US?", "UR?", "S???", "R???", "US??", "UR??", "UUS?",
                    "UUR?"):
        registry.add("RaggedGather", convert_ragged_gather_of_per_iteration_params,
                     inputs=pattern)
    for pattern in ("U*U*", "URU*", "U*UR", "URUR", "URU*R", "URURR", "U*U**", "URUUR",
                    "U*S*", "URS*", "U*SR", "URSR"):
        registry.add("RaggedTensorToTensor", convert_ragged_to_tensor, inputs=pattern)
    registry.add("ZerosLike", convert_zeros_like_encodings, inputs="S", priority=10, narrow=True)
    registry.add("RaggedTensorToVariantGradient", convert_to_variant_gradient, inputs="S**")
    registry.add("RaggedTensorToVariant", convert_to_variant, inputs="?...")
    registry.add("RaggedTensorFromVariant", convert_from_variant, inputs="S")
