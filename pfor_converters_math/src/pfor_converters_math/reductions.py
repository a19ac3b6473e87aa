"""Reductions and scans in every layout: Sum/Mean/Prod/Max/Min/All/Any/EuclideanNorm,
ArgMax/ArgMin, Cumsum/Cumprod/CumulativeLogsumexp.

A stacked input has the iteration axis in front, so the same op runs on it with every
axis moved one to the right (negative axes normalized first, since -1 of the stacked
tensor is still the last axis but a normalized axis must skip the stacked one). Axes
must be loop-invariant: static axes are shifted in Python; run-time ones, and any axes
of an input whose rank is known only at run time, are range-checked and shifted by a few
ops. A stacked axis would reduce different axes per iteration and is declined (the
fallback loop takes it).

Ragged values (pattern letter R), along any axes: the padding is set to the reduction's
neutral element first (0 for Sum, 1 for Prod, -inf or the dtype's least value for Max,
True for All, ...), so the same op on the padded tensor reduces exactly each iteration's
elements; an iteration with nothing to reduce gets what TensorFlow gives for an empty
reduction (-inf for Max of floats, the dtype's least value for Max of ints, NaN for Mean
of floats, 0 for Mean of ints). Mean divides the sum by each iteration's count. The
result is stacked when no dimension that varies is left, else ragged (its padding zeroed
again).

ArgMax/ArgMin fill with the value that can never win (ties go to the first index,
which is never padding); along a dimension that is empty in some iteration the loop's
kernel fails, and so does this (a run-time check). Scans (Cumsum, Cumprod,
CumulativeLogsumexp), also exclusive or reversed, fill with their neutral element:
padding at the end adds nothing either way.

The Sum over the per-iteration axes ``BroadcastGradientArgs`` gives (in the gradient of a
broadcasting op between values whose shapes differ between iterations) has a rank that
differs between iterations, which no layout holds; but all a gradient does with it is
reshape it to the operand's shape. So the sum is kept as a ``SummedRows`` view (sizes 1
kept where summed, as with ``keepdims``), and its Reshape (``reshape.py``) drops the
leading size-1 axes: exactly the operand's aligned shape.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_core.extend import (Decline, NotStacked, Ragged, Stacked, View, padded_operands,
                              shapes)

from pfor_converters_math.ragged_common import static_axes

REDUCTIONS = ("Sum", "Mean", "Prod", "Max", "Min", "All", "Any", "EuclideanNorm")
ARG_REDUCTIONS = ("ArgMax", "ArgMin")
SCANS = ("Cumsum", "Cumprod", "CumulativeLogsumexp")
_IDENTITY_OVER_NO_AXES = ("Sum", "Mean", "Prod", "Max", "Min", "All", "Any")


def _shifted_axes(ctx, x, axes):
    """``axes`` (invariant) as axes of the stacked tensor, or a reason to decline.

    Static axes of an input of known rank are checked and shifted here. Otherwise
    (axes known at run time, or an input of unknown rank) they are checked at run time
    against the per-iteration rank, since an out-of-range axis that the loop's kernel
    rejects could name a valid axis of the stacked tensor (even the iteration axis),
    then shifted: a negative axis is normalized first, since a normalized axis must
    skip the stacked one."""
    rank = shapes.rank_of(x)
    static = tf.get_static_value(axes.tensor)
    if static is not None and isinstance(rank, int):
        static = np.asarray(static)
        if static.size and not (np.all(static >= -rank) and np.all(static < rank)):
            return None, f"axis {static.tolist()} out of range for rank {rank}"
        return tf.constant(static % max(rank, 1) + 1, dtype=axes.dtype), ""
    a = axes.tensor
    r = tf.cast(rank, a.dtype)
    inside = tf.reduce_all(tf.logical_and(a >= -r, a < r))
    a = ctx.check(inside, "axis out of range for the input's rank (axis, rank):",
                  [a, r], tensor=a)
    return tf.where(a < 0, a + r, a) + 1, ""


def convert_along_axes(ctx):
    """Ops of form (input, axes) -> output: the same op on the stacked input with
    shifted axes; other attrs (keep_dims, output_type, exclusive, reverse) are kept."""
    x, axes = ctx.inputs
    if axes.is_stacked:
        return ctx.decline("the axis differs per iteration")
    static = tf.get_static_value(axes.tensor)
    if ctx.op_type in _IDENTITY_OVER_NO_AXES and static is not None and np.size(static) == 0:
        # Reducing over no axes is the identity. Not emitted as a reduction: TF 2.21's
        # grappler folds Sum(x, []) of a non-scalar x inside a while loop body into an
        # empty tensor (silently: `a + tf.reduce_sum(a, axis=tf.range(0))` of a float32
        # [3] loop variable gives [] in tf.function; right with constant folding off).
        return ctx.stacked_value(tf.identity(x.tensor))
    shifted, reason = _shifted_axes(ctx, x, axes)
    if shifted is None:
        return ctx.decline(reason)
    return ctx.emit_stacked(x.tensor, shifted)


_FILL = {"Sum": "zero", "Mean": "zero", "EuclideanNorm": "zero", "Any": "zero",
         "Prod": "one", "All": "one", "Max": "lowest", "Min": "highest",
         "ArgMax": "lowest", "ArgMin": "highest",
         "Cumsum": "zero", "Cumprod": "one", "CumulativeLogsumexp": "lowest"}


def _neutral(kind: str, dtype):
    if kind == "zero":
        return tf.zeros([], dtype)
    if kind == "one":
        return tf.ones([], dtype)
    if dtype.is_floating:
        return tf.constant(-np.inf if kind == "lowest" else np.inf, dtype)
    return tf.constant(dtype.min if kind == "lowest" else dtype.max, dtype)


def _filled(ctx, x):
    """The padded tensor with the op's neutral element in the padding."""
    kind = _FILL[ctx.op_type]
    if kind == "zero":
        return x.padded  # the padding is zero already
    return x.masked(fill=_neutral(kind, x.dtype))


def _finish(out, lengths):
    if all(length is None for length in lengths):
        return Stacked(tensor=out)
    return padded_operands.result(out, lengths)


def _count(x, reduced):
    """Each iteration's number of elements reduced: an int32 ``[n]`` tensor."""
    extents = x.extents()
    count = tf.ones_like(extents[0])
    for d in reduced:
        count = count * extents[d]
    return count


def convert_reduction(ctx):
    """Sum/Mean/Prod/Max/Min/All/Any/EuclideanNorm of a ragged input."""
    x, axes = ctx.inputs
    reduced = sorted(set(static_axes(ctx, axes, x.rank).tolist()))
    keep = ctx.attr("keep_dims")
    op_type = "Sum" if ctx.op_type == "Mean" else None
    out = ctx.emit(_filled(ctx, x), tf.constant([d + 1 for d in reduced], tf.int32),
                   op_type=op_type)[0]
    if ctx.op_type == "Mean":
        count = _count(x, reduced)
        count = tf.reshape(count, [-1] + [1] * (out.shape.rank - 1))
        if x.dtype.is_integer:
            out = tf.truncatediv(out, tf.cast(tf.maximum(count, 1), x.dtype))
        else:
            out = out / tf.cast(count, x.dtype)
    lengths = [None if d in reduced else length for d, length in enumerate(x.lengths)
               if keep or d not in reduced]
    return _finish(out, lengths)


def convert_arg_reduction(ctx):
    """ArgMax/ArgMin of a ragged input along one invariant axis."""
    x, axis = ctx.inputs
    axes = static_axes(ctx, axis, x.rank)
    if axes.size != 1:
        return ctx.decline("one axis expected")
    d = int(axes.reshape(-1)[0])
    filled = _filled(ctx, x)
    length = x.lengths[d]
    if length is not None:
        # The loop's kernel fails on an empty reduction axis; so does this.
        filled = ctx.check(tf.reduce_all(length > 0),
                           "the reduction axis is empty in some iteration; per-iteration "
                           "sizes:", [length], tensor=filled)
    out = ctx.emit(filled, tf.constant(d + 1, axis.dtype))[0]
    lengths = [length for k, length in enumerate(x.lengths) if k != d]
    return _finish(out, lengths)


def convert_scan(ctx):
    """Cumsum/Cumprod/CumulativeLogsumexp of a ragged input along an invariant axis."""
    x, axis = ctx.inputs
    axes = static_axes(ctx, axis, x.rank)
    if axes.size != 1:
        return ctx.decline("one axis expected")
    out = ctx.emit(_filled(ctx, x), tf.constant(int(axes.reshape(-1)[0]) + 1, axis.dtype))[0]
    return padded_operands.result(out, x.lengths)


class SummedRows(View):
    """A sum over per-iteration axes, with size 1 kept where summed: ``tensor`` is
    padded ``[n, W...]``, ``extents`` ``[n, rank]`` each iteration's sizes. It has no
    stacked form (the sum's rank differs between iterations); its Reshape reads it."""

    __slots__ = ("extents",)

    def __init__(self, tensor, extents):  # pylint: disable=super-init-not-called
        object.__setattr__(self, "tensor", tensor)
        object.__setattr__(self, "extents", extents)

    def materialize(self):
        return Decline("a sum over axes that differ between iterations has no stacked "
                       "form (its rank differs); only a Reshape reads it")

    @property
    def shape(self) -> tf.TensorShape:
        return tf.TensorShape(None)


def convert_sum_over_ragged_axes(ctx):
    """Sum over per-iteration axes: with keep_dims a value of the data's rank (ragged
    where the body does not know a size), else kept as ``SummedRows``."""
    data, axes = ctx.inputs
    if isinstance(data, Ragged):
        padded, extents = data.padded, data.shapes()
    else:
        try:
            padded = data.tensor
        except NotStacked as err:
            raise Decline(str(err)) from err
        shape = tf.shape(padded, out_type=tf.int32)
        extents = tf.tile(shape[None, 1:], [shape[0], 1])
    rank = padded.shape.rank - 1 if padded.shape.rank is not None else None
    if rank is None:
        raise Decline("data rank is not static")
    picked = tf.one_hot(axes.padded, rank, on_value=True, off_value=False, dtype=tf.bool)
    picked = tf.logical_and(picked, axes.mask((0,))[..., None])
    summed = tf.reduce_any(picked, axis=1)  # [n, rank]
    for a in range(rank):
        total = tf.reduce_sum(padded, axis=1 + a, keepdims=True)
        first = tf.equal(tf.range(tf.shape(padded)[1 + a]), 0)
        first = tf.reshape(first, [1] * (1 + a) + [-1] + [1] * (rank - a - 1))
        slot = tf.where(first, total, tf.zeros_like(total))
        pick = tf.reshape(summed[:, a], [-1] + [1] * rank)
        padded = tf.where(pick, slot, padded)
    extents = tf.where(summed, 1, extents)
    if not ctx.attr("keep_dims"):
        return [SummedRows(padded, extents)]
    return [sized_rows(ctx, padded, extents)]


def sized_rows(ctx, padded, extents):
    """``padded`` with per-iteration sizes ``extents``: ragged where the body does not
    know a size, stacked when it knows them all."""
    static = ctx.output_shapes[0]
    rank = extents.shape[1]
    known = [static.rank is not None and static[d] is not None for d in range(rank)]
    # A size the body knows is every iteration's: the padding beyond it goes.
    padded = padded[(slice(None),) + tuple(slice(0, static[d]) if known[d] else slice(None)
                                           for d in range(rank))]
    lengths = [None if known[d] else extents[:, d] for d in range(rank)]
    if all(length is None for length in lengths):
        return Stacked(tensor=padded)
    return Ragged.from_stacked(padded, lengths)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    # A stacked axis would reduce different axes per iteration: no converter, the
    # fallback loop takes it.
    registry.add(REDUCTIONS + ARG_REDUCTIONS + SCANS, convert_along_axes, inputs="SU")
    registry.add(REDUCTIONS, convert_reduction, inputs="RU")
    registry.add(("ArgMax", "ArgMin"), convert_arg_reduction, inputs="RU")
    registry.add(("Cumsum", "Cumprod", "CumulativeLogsumexp"), convert_scan, inputs="RU")
    registry.add("Sum", convert_sum_over_ragged_axes, inputs="SR")
    registry.add("Sum", convert_sum_over_ragged_axes, inputs="RR")
