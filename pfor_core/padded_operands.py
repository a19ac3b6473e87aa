"""Padded operands, the ragged counterparts of ``patterns``: operands of which some are
ragged lined up for numpy broadcasting, and a converter's ragged result.

A ragged operand (``Ragged``) is its padded tensor ``[n, D_0, ...]``; where two ragged
operands vary in the same dimension their padded widths may differ (each was padded by
whatever made it), so they are padded to the wider one, and their lengths must agree
per iteration as the loop's broadcasting demands: equal, or one of them 1 (that
operand's one row is then repeated, as broadcasting would). A dimension that varies may
meet a dimension of a stacked or invariant operand only if that one has static size 1
or a static size ``k`` that every iteration's size is checked against.

Sizes are compared with ``tf.equal``, never ``==``: while a ``tf.compat.v1`` graph is
built a tensor's ``==`` is object identity (a Python bool), which would fail every
check of two lengths tensors and never repeat an operand's row of size 1.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core import shapes
from pfor_core.errors import Decline
from pfor_core.layout import Stacked
from pfor_core.ragged import Ragged


def per_iteration_rank(value) -> int:
    """The rank of one iteration's value (a ragged one's included); declines if unknown."""
    rank = value.rank if isinstance(value, Ragged) else value.shape.rank
    if rank is None:
        raise Decline("an input's rank is unknown")
    return rank


def padded_dims(ctx, value) -> list:
    """Dimensions of a value's stacked storage (padded for a ragged one)."""
    return shapes.dims(value.padded if isinstance(value, Ragged) else value.tensor, ctx.n)


def broadcast(ctx, values):
    """Line up layout values (at least one ragged) for numpy broadcasting.

    Returns ``(tensors, lengths)``: stacked tensors of one rank (the output's plus the
    iteration axis) that broadcast against each other, and the output's lengths (one
    entry per per-iteration dimension, None where uniform). A dimension that varies in
    one operand and has a static size ``k > 1`` in another is ``k`` in the output (each
    iteration's size checked to be 1 or ``k``, as the loop's broadcast needs); one that
    meets a size unknown statically declines.
    """
    ranks = [per_iteration_rank(v) for v in values]
    rank = max(ranks)
    values, lengths = _varying(ctx, list(values), ranks, rank)
    fixed = _fixed_sizes(values, ranks, rank, lengths)
    tensors = [v.padded if isinstance(v, Ragged) else v.tensor for v in values]
    out_lengths = []
    for out, found in enumerate(lengths):
        axis = {k: 1 + out - (rank - ranks[k]) for k, _ in found}
        if not found:
            out_lengths.append(None)
        elif out in fixed:
            for k, length in found:
                tensors[k] = _broadcast_to_size(ctx, tensors[k], axis[k], length, fixed[out])
            out_lengths.append(None)
        else:
            out_lengths.append(_line_up(ctx, tensors, values, found, axis))
    for k, (v, r) in enumerate(zip(values, ranks)):  # one rank for all
        if v.is_stacked and r < rank:
            d = shapes.dims(tensors[k], ctx.n)
            tensors[k] = shapes.reshape(tensors[k], d[:1] + [1] * (rank - r) + d[1:])
        elif not v.is_stacked:
            tensors[k] = shapes.lift_contraction(tensors[k], rank + 1)
    return tensors, out_lengths


def _varying(ctx, values, ranks, rank):
    """Per output dimension, the ``(operand, lengths)`` pairs of the operands that vary
    there; an operand of no static size in such a dimension (the same in every
    iteration) becomes a ragged one with its size as lengths."""
    lengths = [[] for _ in range(rank)]
    for k, (v, r) in enumerate(zip(values, ranks)):
        if isinstance(v, Ragged):
            for d in v.ragged_axes:
                lengths[d + rank - r].append((k, v.lengths[d]))
    for k, (v, r) in enumerate(zip(values, ranks)):
        static = v.shape.as_list()
        unknown = [d for d in range(r) if lengths[d + rank - r] and static[d] is None
                   and not (isinstance(v, Ragged) and v.lengths[d] is not None)]
        if unknown:  # its size, the same in every iteration, checked as a ragged one's
            values[k] = sized(ctx, v, unknown)
            for d in unknown:
                lengths[d + rank - r].append((k, values[k].lengths[d]))
    return values, lengths


def _fixed_sizes(values, ranks, rank, lengths) -> dict:
    """Output dim -> a static size > 1 of an operand that does not vary there."""
    fixed = {}
    for k, (v, r) in enumerate(zip(values, ranks)):
        static = v.shape.as_list()
        for d in range(r):
            out = d + rank - r
            if lengths[out] and not (isinstance(v, Ragged) and v.lengths[d] is not None) \
                    and static[d] != 1:
                if static[d] is None:
                    raise Decline(f"input {k} has a size unknown statically in a dimension "
                                  "where another input's size differs per iteration")
                fixed[out] = static[d]
    return fixed


def _line_up(ctx, tensors, values, found, axis):
    """The operands ``found`` vary in one output dimension (at ``axis[k]`` of operand
    k): padded to one width, their sizes checked to broadcast, an operand of size 1
    repeating its one slice. Returns the output's lengths there."""
    width = shapes.widest([padded_dims(ctx, values[k])[axis[k]] for k, _ in found])
    for k, _ in found:
        tensors[k] = shapes.pad_axis(tensors[k], axis[k], width)
    unique = []
    for _, length in found:
        if not any(length is u for u in unique):
            unique.append(length)
    if len(unique) == 1:
        return unique[0]
    total = unique[0]
    for other in unique[1:]:
        fits = tf.reduce_all(tf.equal(total, other) | tf.equal(total, 1) | tf.equal(other, 1))
        total = ctx.check(fits, "operands whose sizes differ per iteration do not "
                          "broadcast (the loop would fail on a shape mismatch):",
                          [total, other], tensor=tf.where(tf.equal(total, 1), other, total))
    for k, length in found:  # an operand of size 1 here repeats its one slice
        t = tensors[k]
        first = t[(slice(None),) * axis[k] + (slice(0, 1),)]  # empty if t is
        one = tf.reshape(tf.equal(length, 1), [-1] + [1] * (t.shape.rank - 1))
        tensors[k] = tf.where(one, first, t)
    return total


def sized(ctx, value, axes) -> Ragged:
    """``value`` as a ragged value whose lengths along ``axes`` (per-iteration dims of
    no static size, the same in every iteration) are its size there: the size a value
    made inside a nested pfor's body may have, which the outer pfor does not know
    statically, then meets ragged operands like theirs."""
    tensor = value.padded if isinstance(value, Ragged) else ctx.stack(value)
    rank = tensor.shape.rank - 1
    lengths = list(value.lengths) if isinstance(value, Ragged) else [None] * rank
    n = tf.shape(tensor, out_type=tf.int32)[:1]
    for d in axes:
        lengths[d] = tf.fill(n, tf.shape(tensor, out_type=tf.int32)[d + 1])
    return Ragged(padded=tensor, lengths=tuple(lengths))


def _broadcast_to_size(ctx, tensor, axis, length, size):
    """A padded axis of per-iteration sizes ``length`` (each checked to be 1 or
    ``size``) broadcast to ``size``: rows of size 1 repeat their one element."""
    length = ctx.check(tf.reduce_all(tf.equal(length, 1) | tf.equal(length, size)),
                       f"operands do not broadcast: a size differing per iteration meets "
                       f"{size} (the loop would fail on a shape mismatch):", [length],
                       tensor=length)
    last = tf.maximum(tf.shape(tensor, out_type=tf.int32)[axis] - 1, 0)
    positions = tf.minimum(tf.range(size)[None, :], last)
    positions = tf.where(tf.equal(length, 1)[:, None], 0, positions)
    return tf.gather(tensor, positions, axis=axis, batch_dims=1)


def result(tensor, lengths, *, masked: bool = True):
    """A ragged result: ``tensor`` with the padding set to zero (unless ``masked`` is
    False: the caller knows it is zero already and no gradient crosses it); stacked
    when no dimension varies (a varying size broadcast against a fixed one)."""
    if all(length is None for length in lengths):
        return Stacked(tensor=tensor)
    value = Ragged(padded=tensor, lengths=tuple(lengths))
    return value.with_padded(value.masked()) if masked else value
