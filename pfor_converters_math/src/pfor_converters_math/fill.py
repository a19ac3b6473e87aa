"""Ops that make values of a given shape, in every layout: Fill, BroadcastTo, Tile and
OneHot.

The iteration axis is a new leading dimension: a target shape gets ``n`` in front,
multiples a leading 1, OneHot's axis is shifted by one. A per-iteration target shape
that is stacked is declined unless the body's static output shape proves it is the
same in every iteration.

Ragged values: Fill, BroadcastTo and Tile with stacked dims, shape or multiples make
ragged values. These turn up in gradients: the gradient of a reduction over a ragged
value tiles or broadcasts the upstream gradient to the value's (per-iteration) shape.
Each output is built at the largest size along every dimension and masked past each
iteration's size; a dimension the body knows statically stays uniform, and an output
with no varying dimension is stacked. The converters for shapes proven the same in
every iteration go first; under XLA the widths have no static bound, and these decline
to the fallback.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Invariant, Ragged, Stacked, shapes
from pfor_converters_math.shape_ops import (leading, prepend, proven_shape, shift_axis,
                                            static_value, with_leading)


# -- making values of a given shape -----------------------------------------------------
def _target(ctx, shape_value):
    """The per-iteration target shape: proven static, or the invariant input; None if
    it may differ between iterations."""
    proven = proven_shape(ctx)
    if proven is not None:
        return proven
    if shape_value.is_stacked:
        return None
    static = static_value(shape_value)
    return [int(d) for d in static] if static is not None else shape_value.tensor


def _rank_of(target):
    if isinstance(target, list):
        return len(target)
    return target.shape[0] if target.shape.rank == 1 else None


def _proven_target(ctx, shape_value):
    target = _target(ctx, shape_value)
    if target is None:
        raise Decline("per-iteration dims are stacked")
    return target


def convert_fill_invariant_value(ctx):
    """Stacked dims proven the same everywhere, invariant value: one invariant fill."""
    dims, value = ctx.inputs
    return Invariant(tensor=tf.fill(_proven_target(ctx, dims), value.tensor))


def convert_fill(ctx):
    """A stacked value: each iteration's scalar broadcast to the target shape."""
    dims, value = ctx.inputs
    target = _proven_target(ctx, dims)
    n = leading(ctx, value.tensor)
    rank = _rank_of(target)
    ones = [1] * rank if rank is not None else tf.ones_like(target)
    rows = tf.reshape(value.tensor, with_leading(n, ones))
    return Stacked(tensor=tf.broadcast_to(rows, with_leading(n, target)))


def convert_broadcast_to_invariant_value(ctx):
    """Stacked shape proven the same everywhere, invariant value: one broadcast."""
    x, shape = ctx.inputs
    return Invariant(tensor=tf.broadcast_to(x.tensor, _proven_target(ctx, shape)))


def convert_broadcast_to(ctx):
    """A stacked value, aligned with the target from the right (size-1 axes after the
    iteration axis), then broadcast to ``[n] + target``."""
    x, shape = ctx.inputs
    target = _proven_target(ctx, shape)
    # Align x with the target from the right: size-1 axes after the stacked one (added
    # at run time where a rank is not static).
    rank = _rank_of(target)
    rows = shapes.insert_axes(x.tensor, rank if rank is not None else tf.size(target), ctx.n)
    return Stacked(tensor=tf.broadcast_to(rows, with_leading(leading(ctx, x.tensor), target)))


def convert_tile(ctx):
    """Invariant multiples: a multiple of 1 for the iteration axis in front."""
    x, multiples = ctx.inputs
    return ctx.emit_stacked(x.tensor, prepend(multiples, 1))


def convert_tile_stacked_multiples(ctx):
    """Stacked multiples are the same in every iteration when both shapes are static
    (an empty input axis stays empty whatever its multiple)."""
    x, _ = ctx.inputs
    out, shape = proven_shape(ctx), x.shape
    if out is None or not shape.is_fully_defined():
        raise Decline("stacked multiples without static input and output shapes")
    static = [o // d if d else 1 for o, d in zip(out, shape.as_list())]
    if not x.is_stacked:
        return Invariant(tensor=tf.tile(x.tensor, static))
    return Stacked(tensor=tf.tile(x.tensor, [1] + static))


def _one_hot_axis(ctx):
    axis = ctx.attr("axis")
    return shift_axis(axis) if ctx.inputs[0].is_stacked else axis


def convert_one_hot(ctx):
    """Stacked indices, invariant on/off values: one OneHot with the axis shifted."""
    indices, depth, on, off = ctx.inputs
    return ctx.emit_stacked(indices.tensor, depth.tensor, on.tensor, off.tensor,
                            attrs={"axis": _one_hot_axis(ctx)})


def convert_one_hot_stacked_values(ctx):
    """A stacked on/off value selects per iteration from a boolean one-hot mask."""
    indices, depth, on, off = ctx.inputs
    if indices.shape.rank is None:
        raise Decline("indices rank unknown")
    true, false = tf.constant(True), tf.constant(False)
    mask = ctx.emit(indices.tensor, depth.tensor, true, false,
                    attrs={"axis": _one_hot_axis(ctx), "T": tf.bool}, dtypes=[tf.bool])[0]
    rank = indices.shape.rank + 1
    on_t = shapes.insert_axes(on.tensor, rank, ctx.n) if on.is_stacked else on.tensor
    off_t = shapes.insert_axes(off.tensor, rank, ctx.n) if off.is_stacked else off.tensor
    return Stacked(tensor=tf.where(mask, on_t, off_t))


def _sizes(ctx, value) -> tf.Tensor:
    """A stacked shape input as int32 ``[n, rank]`` (rank static)."""
    sizes = tf.cast(ctx.stack(value), tf.int32)
    if sizes.shape.rank != 2 or sizes.shape[1] is None:
        raise Decline("the output rank is not static")
    return sizes


def _known(ctx, k, scale=None) -> list:
    """The body's shape input ``k`` entry by entry where it knows it statically (a shape
    of a slice whose other dims are fixed), each times ``scale[d]`` (Tile's input dims,
    None where unknown); None where unknown."""
    shape = ctx.op.inputs[k]
    if shape.op.type == "Shape" and shape.op.inputs[0].shape.rank is not None:
        value = shape.op.inputs[0].shape.as_list()
    else:
        value = tf.get_static_value(shape, partial=True)
    if value is None:
        return []
    scale = scale or [1] * len(value)
    return [None if v is None or s is None else int(v) * s for v, s in zip(value, scale)]


def _made(ctx, padded, sizes, known=()) -> Ragged | Stacked:
    """``padded`` (every row at the widest size) as a ragged value of per-iteration
    ``sizes``: dimensions the body knows statically (its output shape, or ``known``:
    static entries of the shape it was given) stay uniform."""
    static = ctx.output_shapes[0]
    known = list(known) + [None] * (sizes.shape[1] - len(known))

    def uniform(d):
        return (static.rank is not None and static[d] is not None) or known[d] is not None

    lengths = [None if uniform(d) else sizes[:, d] for d in range(sizes.shape[1])]
    if all(length is None for length in lengths):
        return Stacked(tensor=padded)
    return Ragged.from_stacked(padded, lengths)


def _widths(ctx, sizes) -> tf.Tensor:
    if ctx.compiled:
        raise Decline("the widths have no static bound under XLA")
    sizes = ctx.check(tf.reduce_all(sizes >= 0), "dimensions must be non-negative",
                      tensor=sizes)
    return tf.maximum(tf.reduce_max(sizes, axis=0), 0)  # zeros when n == 0


def convert_fill_ragged(ctx):
    """Fill with per-iteration dims: the value (invariant or per iteration) everywhere."""
    dims, value = ctx.inputs
    sizes = _sizes(ctx, dims)
    widths = _widths(ctx, sizes)
    rank = sizes.shape[1]
    rows = tf.reshape(ctx.stack(value), tf.concat([[-1], tf.ones([rank], tf.int32)], 0))
    padded = tf.broadcast_to(rows, tf.concat([[ctx.n], widths], 0))
    return _made(ctx, padded, sizes, _known(ctx, 0))


def convert_broadcast_to_ragged(ctx):
    """BroadcastTo a per-iteration shape: aligned from the right, broadcast to the widest
    shape (an input dimension that is neither 1 nor that size fails, as in the loop)."""
    x, shape = ctx.inputs
    sizes = _sizes(ctx, shape)
    widths = _widths(ctx, sizes)
    rank = sizes.shape[1]
    if x.shape.rank is None or x.shape.rank > rank:
        raise Decline("input rank unknown or above the target's")
    if isinstance(x, Ragged):
        return _made(ctx, _broadcast_ragged(x, rank, widths), sizes, _known(ctx, 1))
    rows = (shapes.insert_axes(x.tensor, rank, ctx.n) if x.is_stacked
            else tf.reshape(x.tensor, tf.concat([tf.ones([1 + rank - x.shape.rank], tf.int32),
                                                 tf.shape(x.tensor, out_type=tf.int32)], 0)))
    padded = tf.broadcast_to(rows, tf.concat([[ctx.n], widths], 0))
    return _made(ctx, padded, sizes, _known(ctx, 1))


def _broadcast_ragged(x, rank, widths):
    """A ragged value broadcast to ``widths``: along each dimension, an iteration whose
    size is 1 repeats its element 0, the others read their own positions."""
    padded = shapes.insert_axes(x.padded, rank, tf.shape(x.padded)[0])
    extents = x.extents()
    lead = rank - x.rank
    for d in range(rank):
        width = widths[d]
        if d < lead:
            padded = tf.repeat(padded, width, axis=1 + d)
            continue
        size = extents[d - lead]
        last = tf.maximum(tf.shape(padded, out_type=tf.int32)[1 + d] - 1, 0)
        positions = tf.minimum(tf.range(width)[None, :], last)
        positions = tf.where(tf.equal(size, 1)[:, None], 0, positions)
        padded = tf.gather(padded, positions, axis=1 + d, batch_dims=1)
    return padded


def convert_tile_ragged(ctx):
    """Tile by per-iteration multiples: tiled by the largest multiples, each row cut to
    its own (a prefix of a longer tiling is the shorter tiling); a ragged input is
    tiled by a per-iteration gather."""
    x, multiples = ctx.inputs
    counts = _sizes(ctx, multiples)
    if ctx.compiled:
        raise Decline("the widths have no static bound under XLA")
    counts = ctx.check(tf.reduce_all(counts >= 0), "multiples must be non-negative",
                       tensor=counts)
    most = tf.maximum(tf.reduce_max(counts, axis=0), 0)
    if isinstance(x, Ragged):  # tf.repeat of a ragged value (a RaggedTensor's row ids)
        sizes = counts * tf.stack(x.extents(), axis=1)
        padded = x.padded
        for d, (extent, width) in enumerate(zip(x.extents(), tf.unstack(_widths(ctx, sizes)))):
            # Output position p of a row reads the row's element p mod its size.
            positions = tf.range(width)[None, :] % tf.maximum(extent, 1)[:, None]
            padded = tf.gather(padded, positions, axis=1 + d, batch_dims=1)
        return _made(ctx, padded, sizes, _known(ctx, 1, x.shape.as_list()))
    if x.is_stacked:
        padded = tf.tile(x.tensor, tf.concat([[1], most], 0))
        dims = tf.shape(x.tensor, out_type=tf.int32)[1:]
    else:
        dims = tf.shape(x.tensor, out_type=tf.int32)
        tiled = tf.tile(x.tensor, most)
        padded = tf.broadcast_to(tiled[None], tf.concat([[ctx.n], tf.shape(tiled)], 0))
    return _made(ctx, padded, counts * dims[None, :],
                 _known(ctx, 1, x.shape.as_list() if x.shape.rank is not None else None))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("Fill", convert_fill, inputs="*S")
    registry.add("Fill", convert_fill_invariant_value, inputs="SU")
    registry.add("BroadcastTo", convert_broadcast_to, inputs="S*")
    registry.add("BroadcastTo", convert_broadcast_to_invariant_value, inputs="US")
    registry.add("Tile", convert_tile, inputs="SU")
    registry.add("Tile", convert_tile_stacked_multiples, inputs="*S")
    registry.add("OneHot", convert_one_hot, inputs="SUUU")
    # A stacked on or off value.
    registry.add("OneHot", convert_one_hot_stacked_values, inputs="*US*")
    registry.add("OneHot", convert_one_hot_stacked_values, inputs="*UUS")
    # Ragged results: after the converters for shapes proven the same in every iteration.
    registry.add("Fill", convert_fill_ragged, inputs="S*", priority=-1)
    registry.add("BroadcastTo", convert_broadcast_to_ragged, inputs="*S", priority=-1)
    registry.add("BroadcastTo", convert_broadcast_to_ragged, inputs="RS")
    registry.add("Tile", convert_tile_ragged, inputs="*S", priority=-1)
    registry.add("Tile", convert_tile_ragged, inputs="R*")
