"""Slice (``tf.slice``) in every layout.

Invariant begin and size prepend a full slice for the iteration axis. A stacked begin
with static sizes becomes batched gathers. Sizes that differ between iterations
(``tf.slice(x, [b_i], [s_i])``, or any slice of a ragged value, whose bounds then resolve
against each iteration's own extent) make ragged results (``common``'s plans).
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Invariant, Stacked
from pfor_converters_math.shape_ops import prepend, proven_shape
from pfor_converters_math.slicing.common import (Source, apply_plan, bound_column, bound_entries,
                                                 move_first)


def convert_slice(ctx):
    """Invariant begin and size: a full slice of the iteration axis in front."""
    x, begin, size = ctx.inputs
    return ctx.emit_stacked(x.tensor, prepend(begin, 0), prepend(size, -1))


def convert_slice_stacked_begin(ctx):
    """A stacked begin with sizes the body knows statically: batched gathers."""
    sizes = proven_shape(ctx)  # static, so no size is -1
    if sizes is None:
        raise Decline("a stacked start needs static sizes")
    return _slice_by_gather(ctx, sizes)


def _slice_by_gather(ctx, sizes):
    """Axes whose start the body knows statically are sliced once; each other axis
    gathers ``start + range(size)`` per iteration."""
    x, begin, _ = ctx.inputs
    if x.shape.rank is None:
        return ctx.decline("a stacked start on a tensor of unknown rank")
    starts = bound_entries(ctx, 1, len(sizes))
    full = x.shape.as_list()
    out, stacked = x.tensor, x.is_stacked
    if any(s is not None and (s, size) != (0, full[d])
           for d, (s, size) in enumerate(zip(starts, sizes))):
        first = [0 if s is None else s for s in starts]
        count = [-1 if s is None else size for s, size in zip(starts, sizes)]
        out = tf.slice(out, [0] * stacked + first, [-1] * stacked + count)
    for d, size in enumerate(sizes):
        if starts[d] is not None or size == full[d]:
            continue  # sliced already, or the whole axis (whose start can only be 0)
        index = begin.tensor[:, d:d + 1] + tf.range(size, dtype=begin.dtype)
        if stacked:
            out = tf.gather(out, index, axis=d + 1, batch_dims=1)
        else:
            out = move_first(tf.gather(out, index, axis=d), d)
            stacked = True
    return Stacked(tensor=out) if stacked else Invariant(tensor=out)


def _slice_plan(ctx, source):
    x = ctx.inputs[0]
    if x.shape.rank is None:
        return ctx.decline("a slice of unknown rank")
    plan, checks = [], []
    for k, extent in enumerate(source.extents):
        first, size = bound_column(ctx, 1, k), bound_column(ctx, 2, k)
        size = tf.where(tf.equal(size, -1), extent - first, size)
        checks.append(tf.reduce_all((first >= 0) & (size >= 0) & (first + size <= extent)))
        plan.append(("range", first, size))
    return plan, tf.reduce_all(tf.stack(checks)) if checks else True


def convert_slice_ragged(ctx):
    """Slice with a stacked size, a stacked begin and sizes not known statically, or a
    ragged input."""
    source = Source(ctx, ctx.inputs[0])
    plan = _slice_plan(ctx, source)
    if not isinstance(plan, tuple):
        return plan
    return apply_plan(ctx, source, *plan)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("Slice", convert_slice, inputs="SUU")
    registry.add("Slice", convert_slice_stacked_begin, inputs="*SU")
    # Sizes that differ per iteration: after the converters above.
    for pattern in ("*SU", "**S", "R**"):
        registry.add("Slice", convert_slice_ragged, inputs=pattern, priority=-1)
