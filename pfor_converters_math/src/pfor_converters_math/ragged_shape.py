"""Shape ops of ragged values (pattern letter R): Shape, Size, Rank, ExpandDims,
Squeeze, Reshape, Transpose.

Shape and Size read each iteration's extents (a stacked result); Rank is the same in
every iteration. ExpandDims, Squeeze and Transpose move the padded tensor's axes and
the lengths alike. Reshape is converted where it cannot mix a dimension that varies
with others: the target (invariant, static) keeps that dimension as its one ``-1``,
and the fixed dimensions before and after it hold as many elements as the input's
before and after it (splitting ``[L_i, 128]`` into ``[L_i, 4, 32]``, adding or
removing size-1 axes). Anything else (a flattening across the varying dimension, a
target computed per iteration) is declined: the fallback loop takes it.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_converters_math.ragged_common import dims, static_axes
from pfor_core.extend import Invariant, Ragged, Stacked, shapes


def convert_shape(ctx):
    """Each iteration's shape, stacked."""
    return Stacked(tensor=tf.cast(ctx.inputs[0].shapes(), ctx.attr("out_type")))


def convert_size(ctx):
    """Each iteration's number of elements, stacked."""
    x = ctx.inputs[0]
    size = tf.ones_like(x.extents()[0])
    for extent in x.extents():
        size = size * extent
    return Stacked(tensor=tf.cast(size, ctx.attr("out_type")))


def convert_rank(ctx):
    """The same rank in every iteration."""
    return Invariant(tensor=tf.constant(ctx.inputs[0].rank, tf.int32))


def convert_expand_dims(ctx):
    x, axis = ctx.inputs
    d = int(static_axes(ctx, axis, x.rank + 1)[0])
    lengths = list(x.lengths)
    lengths.insert(d, None)
    return Ragged(padded=tf.expand_dims(x.padded, d + 1), lengths=tuple(lengths))


def convert_squeeze(ctx):
    x = ctx.inputs[0]
    axes = ctx.attr("squeeze_dims")
    if not axes:
        return ctx.decline("squeezing every size-1 dimension depends on the sizes")
    static = x.shape.as_list()
    axes = sorted({a % x.rank for a in axes})
    if any(x.lengths[a] is not None or static[a] != 1 for a in axes):
        return ctx.decline("a squeezed dimension varies per iteration")
    lengths = tuple(length for k, length in enumerate(x.lengths) if k not in axes)
    return Ragged(padded=tf.squeeze(x.padded, [a + 1 for a in axes]), lengths=lengths)


def convert_reshape(ctx):
    x, shape = ctx.inputs
    if shape.is_stacked:
        return ctx.decline("the target shape differs per iteration")
    target = tf.get_static_value(shape.tensor)
    if target is None:
        return _reshape_to_run_time_shape(ctx, x, shape.tensor)
    target = [int(t) for t in np.asarray(target).reshape(-1)]
    if target == [-1] and x.rank > 1:  # flattened: each iteration's elements in order
        flat, sizes = x.to_flat()
        return Ragged.from_row_lengths(flat, tf.reduce_prod(sizes, axis=1))
    if -1 not in target:  # every iteration's value gets that one shape
        return _reshape_to_run_time_shape(ctx, x, shape.tensor)
    if len(x.ragged_axes) != 1 or target.count(-1) != 1:
        return ctx.decline("one varying dimension, kept as the target's -1, expected")
    d, p = x.ragged_axes[0], target.index(-1)
    static = x.shape.as_list()
    before, after = static[:d], static[d + 1:]
    if None in before + after or int(np.prod(before)) != int(np.prod(target[:p])) or \
            int(np.prod(after)) != int(np.prod(target[p + 1:])):
        return ctx.decline("the reshape mixes the varying dimension with others")
    width = dims(ctx, x)[1 + d]
    padded = shapes.reshape(x.padded, [ctx.n_dim] + target[:p] + [width] + target[p + 1:])
    lengths = [None] * len(target)
    lengths[p] = x.lengths[d]
    return Ragged(padded=padded, lengths=tuple(lengths))


def _reshape_to_run_time_shape(ctx, x, target):
    """A reshape to an invariant shape (known only at run time: what a nested pfor's
    body emits for a reshape of its own stacked values; or of no -1): every
    iteration's elements in order, checked to be as many in every iteration (the same
    shape for all, as the loop needs where the shape has no -1)."""
    if ctx.compiled:
        return ctx.decline("the target shape is known only at run time")
    flat, sizes = x.to_flat()
    counts = tf.reduce_prod(sizes, axis=1)
    target = tf.cast(target, tf.int32)
    wanted = tf.reduce_prod(tf.where(target < 0, 1, target))
    fits = tf.reduce_all(tf.logical_and(
        tf.equal(counts, tf.concat([counts, [0]], 0)[0]),
        tf.logical_or(tf.reduce_any(target < 0), tf.equal(counts, wanted))))
    flat = ctx.check(fits, f"{ctx.op_type}: the iterations' values do not all hold as many "
                     "elements as the target shape (the loop would fail there)", tensor=flat)
    out = tf.reshape(flat, tf.concat([tf.reshape(tf.cast(ctx.n, tf.int32), [1]), target], 0))
    out.set_shape(ctx.stacked_shape(ctx.op.outputs[0].shape))
    return Stacked(tensor=out)


def convert_transpose(ctx):
    x, perm = ctx.inputs
    order = static_axes(ctx, perm, x.rank, "permutation")
    if sorted(order.tolist()) != list(range(x.rank)):
        return ctx.decline("not a permutation")
    padded = tf.transpose(x.padded, [0] + [int(p) + 1 for p in order])
    if ctx.op_type == "ConjugateTranspose":
        padded = tf.math.conj(padded)
    return Ragged(padded=padded, lengths=tuple(x.lengths[int(p)] for p in order))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("Shape", convert_shape, inputs="R")
    registry.add("Size", convert_size, inputs="R")
    registry.add("Rank", convert_rank, inputs="R")
    registry.add("ExpandDims", convert_expand_dims, inputs="RU")
    registry.add("Squeeze", convert_squeeze, inputs="R")
    registry.add("Reshape", convert_reshape, inputs="RU")
    registry.add(["Transpose", "ConjugateTranspose"], convert_transpose, inputs="RU")
