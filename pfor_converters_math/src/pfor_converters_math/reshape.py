"""Reshape-like ops in every layout: Reshape, Transpose / ConjugateTranspose, ExpandDims,
Squeeze.

The iteration axis is a new leading dimension, so these ops keep working on the stacked
tensor once their per-iteration arguments are adjusted: prepend ``n`` to a target shape,
a leading 0 to a perm, and shift non-negative axes by one (negative axes count from the
end and stay as they are). A per-iteration target shape that is stacked is declined
unless the body's static output shape proves it is the same in every iteration.

Ragged values (pattern letter R): ExpandDims, Squeeze and Transpose move the padded
tensor's axes and the lengths alike. Reshape is converted where it cannot mix a
dimension that varies with others: the target (invariant, static) keeps that dimension
as its one ``-1``, and the fixed dimensions before and after it hold as many elements as
the input's before and after it (splitting ``[L_i, 128]`` into ``[L_i, 4, 32]``, adding
or removing size-1 axes). A flattening across the varying dimension is declined: the
fallback loop takes it.

Reshape to a per-iteration shape: every iteration's elements, in row-major order, laid
out in its own target shape (the gradient of ``tf.boolean_mask`` reshapes to the shape
of its input, which differs between iterations; a sum's gradient reshapes its invariant
incoming gradient to a shape computed from a ragged input). The elements are taken out
of the padding one iteration after another (``to_flat``), the ``-1`` of each target is
resolved against that iteration's element count (which must match, as the loop's
Reshape checks), and the rows are padded again. A dimension the body knows statically
stays uniform; a result with no varying dimension is stacked. Under XLA the padded sizes
have no static bound: declined.

The Reshape of a ``reductions.SummedRows`` (a gradient's sum over per-iteration axes) to
the operand's per-iteration shape drops the leading size-1 axes.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_core.extend import (Decline, Invariant, Ragged, Stacked, ragged_from_flat,
                              padded_operands, shapes)
from pfor_converters_math.ragged_common import static_axes
from pfor_converters_math.reductions import SummedRows, sized_rows
from pfor_converters_math.shape_ops import (axis_checked, leading, proven_shape,
                                            shift_axis, shifted_axis_input, static_value,
                                            with_leading)


# -- reshape ----------------------------------------------------------------------------
def _resolve_minus_one(x, sizes):
    """The per-iteration target shape with -1 resolved from x's per-iteration size,
    following the Reshape kernel's rule (zero-sized dims are left out of the count when
    the target has a zero)."""
    static = tf.get_static_value(sizes)
    if static is not None and -1 not in static.tolist():
        return sizes
    dims = tf.shape(x, out_type=sizes.dtype)[1:]
    has_zero = tf.reduce_any(tf.equal(sizes, 0))
    counted = tf.where(tf.logical_or(dims > 0, tf.logical_not(has_zero)), dims, 1)
    known = tf.reduce_prod(tf.where(sizes > 0, sizes, 1))
    return tf.where(tf.equal(sizes, -1), tf.reduce_prod(counted) // known, sizes)


def convert_reshape(ctx):
    """A stacked value: the per-iteration target shape with ``n`` in front (a stacked
    target only when the body's static output shape proves it the same everywhere)."""
    x, sizes = ctx.inputs
    target = proven_shape(ctx)
    if target is None and sizes.is_stacked:
        raise Decline("per-iteration target shape is stacked and not static")
    if target is None:
        target = _resolve_minus_one(x.tensor, sizes.tensor)
    return Stacked(tensor=tf.reshape(x.tensor, with_leading(leading(ctx, x.tensor), target)))


def convert_reshape_invariant_value(ctx):
    """An invariant value with a stacked target shape that the body's static output
    shape proves the same in every iteration: one invariant reshape."""
    target = proven_shape(ctx)
    if target is None:
        raise Decline("per-iteration target shape is stacked and not static")
    return Invariant(tensor=tf.reshape(ctx.inputs[0].tensor, target))


# -- permutations and axes ------------------------------------------------------------
def convert_transpose(ctx):
    """Transpose / ConjugateTranspose: the perm keeps axis 0 first."""
    x, perm = ctx.inputs
    return ctx.emit_stacked(x.tensor, prepend_shifted(perm, 0))


def prepend_shifted(value, first):
    static = static_value(value)
    if static is not None:
        shifted = shift_axis(np.asarray(static))
        return tf.constant(np.concatenate([[first], shifted]), dtype=value.dtype)
    head = tf.constant([first], dtype=value.dtype)
    return tf.concat([head, shift_axis(value.tensor)], 0)


def convert_expand_dims(ctx):
    x, axis = ctx.inputs
    rank = shapes.rank_of(x)
    axis_t = shifted_axis_input(axis, ctx, rank + 1)
    return Stacked(tensor=ctx.emit(x.tensor, axis_t)[0])


def convert_squeeze(ctx):
    (x,) = ctx.inputs
    dims = list(ctx.attr("squeeze_dims"))
    if not dims:
        # Squeeze every size-1 axis of one iteration, never the stacked one (n may be 1).
        shape = x.shape
        if shape.rank is None or any(d is None for d in shape.as_list()):
            return ctx.decline("squeeze of all size-1 dims needs a static per-iteration shape")
        dims = [k for k, d in enumerate(shape.as_list()) if d == 1]
        if not dims:
            return Stacked(tensor=x.tensor)
    squeezed = [shift_axis(d) for d in dims]
    tensor = axis_checked(ctx, dims, shapes.rank_of(x), x.tensor)
    return Stacked(tensor=ctx.emit(tensor, attrs={"squeeze_dims": squeezed})[0])


def convert_ragged_expand_dims(ctx):
    x, axis = ctx.inputs
    d = int(static_axes(ctx, axis, x.rank + 1)[0])
    lengths = list(x.lengths)
    lengths.insert(d, None)
    return Ragged(padded=tf.expand_dims(x.padded, d + 1), lengths=tuple(lengths))


def convert_ragged_squeeze(ctx):
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


def convert_ragged_reshape(ctx):
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
    width = padded_operands.padded_dims(ctx, x)[1 + d]
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


def convert_ragged_transpose(ctx):
    x, perm = ctx.inputs
    order = static_axes(ctx, perm, x.rank, "permutation")
    if sorted(order.tolist()) != list(range(x.rank)):
        return ctx.decline("not a permutation")
    padded = tf.transpose(x.padded, [0] + [int(p) + 1 for p in order])
    if ctx.op_type == "ConjugateTranspose":
        padded = tf.math.conj(padded)
    return Ragged(padded=padded, lengths=tuple(x.lengths[int(p)] for p in order))


def _flat(value, n):
    """Elements of every iteration in order, and each iteration's element count."""
    if isinstance(value, Ragged):
        flat, shapes = value.to_flat()
        return flat, tf.reduce_prod(shapes, axis=1)
    if not value.is_stacked:  # every iteration reshapes the same elements
        elements = tf.reshape(value.tensor, [-1])
        return tf.tile(elements, tf.reshape(n, [1])), tf.fill([n], tf.size(elements))
    tensor = value.tensor
    n = tf.shape(tensor, out_type=tf.int32)[0]
    count = tf.reduce_prod(tf.shape(tensor, out_type=tf.int32)[1:])
    return tf.reshape(tensor, [-1]), tf.fill([n], count)


def convert_reshape_per_iteration(ctx):
    """Reshape of a value (ragged, stacked or invariant) to a per-iteration (stacked)
    shape."""
    if ctx.compiled:
        raise Decline("padded sizes have no static bound under XLA")
    x, shape = ctx.inputs
    targets = tf.cast(ctx.stack(shape), tf.int32)
    rank = targets.shape[1] if targets.shape.rank == 2 else None
    if rank is None:
        raise Decline("the target rank is not static")
    flat, counts = _flat(x, ctx.n)
    # A -1 takes what the other dimensions leave of the iteration's elements.
    unknown = tf.equal(targets, -1)
    known = tf.reduce_prod(tf.where(unknown, 1, targets), axis=1)
    inferred = tf.math.floordiv(counts, tf.maximum(known, 1))
    targets = tf.where(unknown, inferred[:, None], targets)
    fits = tf.reduce_all(tf.equal(tf.reduce_prod(targets, axis=1), counts)) & tf.reduce_all(
        tf.reduce_sum(tf.cast(unknown, tf.int32), axis=1) <= 1)
    targets = ctx.check(fits, "the input's element count does not match the target shape "
                        "in some iteration (as Reshape requires)", tensor=targets)
    static = ctx.output_shapes[0]
    axes = [d for d in range(rank) if static.rank is None or static[d] is None]
    if not axes:  # the body knows the whole shape
        shape = tf.concat([[ctx.n], tf.constant(static.as_list(), tf.int32)], 0)
        return Stacked(tensor=tf.reshape(flat, shape))
    padded = ragged_from_flat(flat, targets, axes, static if static.rank is not None
                              else None).to_tensor()
    lengths = [targets[:, d] if d in axes else None for d in range(rank)]
    return Ragged(padded=padded, lengths=tuple(lengths))


def convert_reshape_summed_rows(ctx):
    """The Reshape of a ``SummedRows`` to the operand's per-iteration shape: drop the
    leading axes (size 1 in every iteration), check the rest is that shape."""
    rows, shape = ctx.inputs
    if not isinstance(rows, SummedRows):
        raise Decline("not a sum over per-iteration axes")
    targets = tf.cast(ctx.stack(shape), tf.int32)
    rank, target_rank = rows.extents.shape[1], targets.shape[1]
    if target_rank is None or rank is None or target_rank > rank:
        raise Decline("target rank not static or above the sum's")
    lead = rank - target_rank
    fits = tf.reduce_all(tf.equal(rows.extents[:, lead:], targets)) & tf.reduce_all(
        tf.equal(rows.extents[:, :lead], 1))
    padded = rows.tensor[(slice(None),) + (0,) * lead]
    padded = ctx.check(fits, "the summed gradient does not have the operand's shape",
                       tensor=padded)
    return sized_rows(ctx, padded, targets)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("Reshape", convert_reshape, inputs="S*")
    registry.add("Reshape", convert_reshape_invariant_value, inputs="US")
    registry.add(["Transpose", "ConjugateTranspose"], convert_transpose, inputs="SU")
    registry.add("ExpandDims", convert_expand_dims, inputs="SU")
    registry.add("Squeeze", convert_squeeze, inputs="S")
    registry.add("ExpandDims", convert_ragged_expand_dims, inputs="RU")
    registry.add("Squeeze", convert_ragged_squeeze, inputs="R")
    registry.add("Reshape", convert_ragged_reshape, inputs="RU")
    registry.add(["Transpose", "ConjugateTranspose"], convert_ragged_transpose, inputs="RU")
    registry.add("Reshape", convert_reshape_per_iteration, inputs="RS")
    # After the converters for a target proven the same in every iteration.
    registry.add("Reshape", convert_reshape_per_iteration, inputs="SS", priority=-1)
    registry.add("Reshape", convert_reshape_per_iteration, inputs="US", priority=-1)
    registry.add("Reshape", convert_reshape_summed_rows, inputs="S*", priority=10, narrow=True)
