"""Helpers the ragged converters of this pack share: ragged operands joined in one
dimension (concatenation, contraction), and static axes. Broadcasting ragged operands
and a ragged result are the core's (``extend.padded_operands``).

Where two ragged operands meet in one dimension their padded widths may differ (each
was padded by whatever made it), so they are padded to the wider one, and their lengths
there are checked equal per iteration, as the loop's shapes must be. Sizes are compared
with ``tf.equal``, never ``==`` (in a ``tf.compat.v1`` graph a tensor's ``==`` is
object identity).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_core.extend import Decline, Ragged, padded_operands, shapes


def is_ragged(value) -> bool:
    return isinstance(value, Ragged)


def same_lengths(ctx, a, b, what: str):
    """``a`` (a lengths tensor), checked at run time to equal ``b``; no check when they
    are the same tensor."""
    if a is b:
        return a
    return ctx.check(tf.reduce_all(tf.equal(a, b)), f"{what}: the per-iteration sizes "
                     "differ (the loop would fail on a shape mismatch):", [a, b], tensor=a)


def join(ctx, values, axes, what):
    """Operands ``values`` meet in ``axes`` (one per operand, an axis of the padded
    tensor, or None when it lacks the dimension): their lengths there, checked equal,
    and their padded tensors padded to one width. Returns (lengths, tensors)."""
    found = [(k, v.lengths[a - 1]) for k, (v, a) in enumerate(zip(values, axes))
             if a is not None and is_ragged(v) and v.lengths[a - 1] is not None]
    if not found:
        return None, None
    if len(found) != sum(a is not None for a in axes):
        raise Decline(f"{what}: a dimension that varies per iteration meets a fixed one")
    width = shapes.widest([padded_operands.padded_dims(ctx, values[k])[axes[k]] for k, _ in found])
    tensors = {k: shapes.pad_axis(values[k].padded, axes[k], width) for k, _ in found}
    first = found[0][1]
    for _, other in found[1:]:
        first = same_lengths(ctx, first, other, what)
    return first, tensors


def static_axes(ctx, axes, rank: int, what: str = "axis"):
    """Invariant, static axes normalized to ``0..rank-1`` (a flat numpy int array)."""
    if axes.is_stacked:
        raise Decline(f"the {what} differs per iteration")
    value = tf.get_static_value(axes.tensor)
    if value is None:
        raise Decline(f"the {what} is known only at run time")
    value = np.asarray(value).astype(np.int64).reshape(-1)
    if value.size and not (np.all(value >= -rank) and np.all(value < rank)):
        raise Decline(f"{what} {value.tolist()} out of range for rank {rank}")
    return value % max(rank, 1)
