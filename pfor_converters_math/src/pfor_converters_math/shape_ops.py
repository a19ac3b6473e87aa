"""Shape queries in every layout: Shape, ShapeN, Size, Rank; and the axis and shape
helpers the pack's array modules share.

The iteration axis is a new leading dimension: per-iteration arguments are adjusted
(prepend ``n`` to a target shape, a leading 0 to a perm, 1 to multiples, and shift
non-negative axes by one; negative axes count from the end and stay as they are).
Shape queries of a stacked value are invariant, since every iteration's value has the
same shape. Of a ragged value, Shape and Size read each iteration's extents (a stacked
result); Rank is the same in every iteration.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_core.extend import Invariant, Stacked, shapes


# -- helpers the pack's other array modules share ------------------------------------
def static_value(value):
    """The numpy value of an invariant input when known statically, else None."""
    if value.is_stacked:
        return None
    return tf.get_static_value(value.tensor)


def shift_axis(axis):
    """A per-iteration axis (int, numpy array or tensor) as an axis of the stacked
    tensor: non-negative axes move right by one, negative ones stay."""
    if isinstance(axis, tf.Tensor):
        return tf.where(axis >= 0, axis + 1, axis)
    if isinstance(axis, np.ndarray):
        return np.where(axis >= 0, axis + 1, axis).astype(axis.dtype)
    return axis + 1 if axis >= 0 else axis


def shifted_axis_input(value, ctx=None, rank=None):
    """An invariant axis input shifted for the stacked tensor (static when possible).

    With ``ctx`` and ``rank`` (the per-iteration rank the axis indexes, an int or a
    scalar tensor), an axis the body could not check when it was built (a run-time
    axis, or a tensor of unknown rank) is checked at run time: a negative axis out of
    range would otherwise name an axis of the stacked tensor, even the iteration axis.
    """
    static = static_value(value)
    if ctx is not None and not (static is not None and isinstance(rank, int)):
        tensor = axis_checked(ctx, value.tensor, rank, value.tensor)
        return shift_axis(tensor)
    if static is not None:
        return tf.constant(shift_axis(np.asarray(static)), dtype=value.dtype)
    return shift_axis(value.tensor)


def axis_checked(ctx, axis, rank, tensor):
    """``tensor`` after a run-time check that ``axis`` (int or tensor, possibly a
    vector) lies in ``[-rank, rank)``; unchanged when both are static (the body's own
    shape inference checked them)."""
    static = all(isinstance(a, (int, np.integer)) for a in np.ravel(axis)) \
        if not isinstance(axis, tf.Tensor) else False
    if static and isinstance(rank, int):
        return tensor
    axis = tf.convert_to_tensor(axis)
    r = tf.cast(rank, axis.dtype)
    inside = tf.reduce_all(tf.logical_and(axis >= -r, axis < r))
    return ctx.check(inside, "axis out of range for the input's rank (axis, rank):",
                     [axis, r], tensor=tensor)


def prepend(value, first):
    """``[first] + value`` for an invariant 1-D input (or ``[first] + rows`` for 2-D),
    static when possible, in the input's dtype."""
    static = static_value(value)
    head = np.asarray([first], dtype=value.dtype.as_numpy_dtype)
    if static is not None:
        return tf.constant(np.concatenate([head, np.asarray(static)], 0), dtype=value.dtype)
    return tf.concat([tf.constant(head, dtype=value.dtype), value.tensor], 0)


def leading(ctx, tensor):
    """The stacked dimension of ``tensor``: an int where static, else ``ctx.n`` (not
    ``tf.shape`` of a deep tensor, whose inference walks the whole graph above it)."""
    static = tensor.shape[0] if tensor.shape.rank is not None else None
    return static if static is not None else ctx.n


def with_leading(n, target):
    """The shape ``[n] + target``; ``target`` a list of ints or a 1-D tensor."""
    if isinstance(target, (list, tuple)):
        return shapes.shape_tensor([n] + list(target))
    head = tf.reshape(tf.cast(n, target.dtype), [1])
    return tf.concat([head, target], 0)


def proven_shape(ctx, k=0):
    """Output ``k``'s per-iteration shape as a list when the body knows it statically."""
    shape = ctx.output_shapes[k]
    return shape.as_list() if shape.is_fully_defined() else None


# -- shape queries: invariant results ---------------------------------------------------
def convert_shape(ctx):
    """Shape / ShapeN: every iteration's value has the same shape."""
    out_type = ctx.attr("out_type")
    return [Invariant(tensor=_shape_of(v, out_type)) for v in ctx.inputs]


def _shape_of(value, out_type):
    if value.shape.is_fully_defined():
        return tf.constant(value.shape.as_list(), dtype=out_type)
    shape = tf.shape(value.tensor, out_type=out_type)
    return shape[1:] if value.is_stacked else shape


def convert_size(ctx):
    (x,) = ctx.inputs
    out_type = ctx.attr("out_type")
    if x.shape.is_fully_defined():
        return Invariant(tensor=tf.constant(x.shape.num_elements(), dtype=out_type))
    return Invariant(tensor=tf.reduce_prod(_shape_of(x, out_type)))


def convert_rank(ctx):
    (x,) = ctx.inputs
    if x.shape.rank is not None:
        return Invariant(tensor=tf.constant(x.shape.rank, dtype=tf.int32))
    return Invariant(tensor=tf.rank(x.tensor) - 1)


def convert_ragged_shape(ctx):
    """Each iteration's shape, stacked."""
    return Stacked(tensor=tf.cast(ctx.inputs[0].shapes(), ctx.attr("out_type")))


def convert_ragged_size(ctx):
    """Each iteration's number of elements, stacked."""
    x = ctx.inputs[0]
    size = tf.ones_like(x.extents()[0])
    for extent in x.extents():
        size = size * extent
    return Stacked(tensor=tf.cast(size, ctx.attr("out_type")))


def convert_ragged_rank(ctx):
    """The same rank in every iteration."""
    return Invariant(tensor=tf.constant(ctx.inputs[0].rank, tf.int32))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(["Shape", "ShapeN"], convert_shape)
    registry.add("Size", convert_size, inputs="S")
    registry.add("Rank", convert_rank, inputs="S")
    registry.add("Shape", convert_ragged_shape, inputs="R")
    registry.add("Size", convert_ragged_size, inputs="R")
    registry.add("Rank", convert_ragged_rank, inputs="R")
