"""Tensor lists whose iterations hold their own numbers of items.

A while loop with per-iteration trip counts that grows a tensor list (pushes, or
writes past the end, as a ``TensorArray`` of dynamic size does) leaves every iteration
a list of its own length, all kept in one stacked list as long as the longest; so does
a list made with a per-iteration size (``tf.TensorArray(size=n_i)``). Such a list is a
``ListWithLengths``; the tensor-list converters index it by each row's own items (an
index past a row's end raises, as the loop does). A stack of a list whose items are at
the start of each row's list gives a ragged value (each row its own number of items);
other whole-list reads (concat, a stack of right-aligned items) check that all rows
agree, since the loop's values would otherwise differ in shape between iterations.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from pfor_core.extend import ConversionError, Stacked, shapes

_R = tf.raw_ops


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ListWithLengths(Stacked):
    """A stacked list whose rows hold their own numbers of items: ``lengths`` ([n]
    int32, None where not known). The items are at the start of each row's list, or
    at its end with ``right_aligned`` (pushes, which a gradient loop pops)."""

    lengths: tf.Tensor | None = None
    right_aligned: bool = False
    # (positions [n], items [n, ...]) where the list is a new one that each row wrote
    # one item into (a read's gradient in a gradient loop): a sum adds just those.
    written: tuple | None = None
    # The list holds, per step, the handle of a list the loop carried, of which only the
    # length and element shape are read back (records.shapes_record): not right-aligned
    # (those are the same in every step); ``held_lengths``: that list's rows' lengths.
    records: bool = False
    held_lengths: tf.Tensor | None = None


def known_lengths(ctx, value: ListWithLengths) -> tf.Tensor:
    """The rows' lengths; raises where they are not known."""
    if value.lengths is None:
        raise ConversionError(
            f"pfor: {ctx.op_type} '{ctx.op.name}' reads a tensor list that a while loop "
            "with per-iteration trip counts shrank or resized, so its iterations hold "
            "numbers of items pfor does not track. Read the list inside that loop, or "
            "keep a count as a loop variable.")
    return value.lengths


def then(check, tensor):
    """``tensor``, available only after ``check`` ran."""
    with tf.control_dependencies([check]):
        return tf.identity(tensor)


def within_rows(ctx, positions, lengths, tensor):
    """``tensor``, after a run-time check that ``positions`` (``[n]`` or ``[n, k]``) lie
    within each row's own ``lengths`` items (the loop raises for a position past the
    end of its list)."""
    positions = tf.cast(positions, tf.int32)
    rows = shapes.reshape(tf.cast(lengths, tf.int32), [-1] + [1] * (positions.shape.rank - 1))
    verb = "writes" if ctx.op_type == "TensorListSetItem" else "reads"
    return ctx.check(
        tf.reduce_all((positions >= 0) & (positions < rows)),
        f"{verb} a tensor list item past the end of an iteration's list (its iterations "
        "hold different numbers of items: the list was made with, or a while loop with "
        "per-iteration trip counts grew it to, a per-iteration size)", tensor=tensor)


def list_sizes(ctx, k: int = 1) -> tf.Tensor:
    """Input ``k``, the per-iteration sizes of a list being made (int32 ``[n]``),
    checked non-negative as the list op checks."""
    sizes = tf.cast(ctx.stacked(k), tf.int32)
    return ctx.check(tf.reduce_all(sizes >= 0), "makes a tensor list of negative size",
                     tensor=sizes)


def own_positions(ctx, handle, index):
    """``index`` (a layout value: the positions each row reads) checked against the
    rows' lengths of a ``ListWithLengths`` (the loop raises for a position past the
    end) and moved to where each row's items are."""
    if not isinstance(handle, ListWithLengths):
        return index
    lengths = known_lengths(ctx, handle)
    positions = index.tensor if index.is_stacked else tf.broadcast_to(
        index.tensor[None], tf.concat([tf.shape(lengths), tf.shape(index.tensor)], 0))
    if handle.right_aligned:
        rows = tf.cast(shapes.reshape(lengths, [-1] + [1] * (positions.shape.rank - 1)),
                       positions.dtype)
        whole = tf.cast(_R.TensorListLength(input_handle=handle.tensor), positions.dtype)
        return Stacked(tensor=within_rows(ctx, positions, lengths, positions + whole - rows))
    return type(index)(tensor=within_rows(ctx, positions, lengths, index.tensor))


def same_lengths(ctx, value) -> tf.Tensor:
    """The list handle, checked to hold as many items in every row: whole-list reads
    of rows of different lengths would differ in shape between iterations."""
    if not isinstance(value, ListWithLengths):
        return value.tensor
    lengths = known_lengths(ctx, value)
    # The list holds no item past the rows' (trip_counts.run_masked: an outer pfor that
    # runs this loop's masked loop keeps it as long as its longest iteration's). Under
    # XLA the list is as long as reserved, in the loop too.
    top = tf.reduce_max(tf.concat([lengths, [0]], 0))
    fits = tf.logical_or(tf.equal(_R.TensorListLength(input_handle=value.tensor), top),
                         tf.logical_or(tf.equal(tf.size(lengths), 0), ctx.compiled))
    extra = tf.debugging.assert_equal(
        fits, True, message=(
            f"pfor: {ctx.op_type} '{ctx.op.name}' reads a whole tensor list that a while "
            "loop with per-iteration trip counts grew, inside an outer pfor whose "
            "iterations ran that loop for different numbers of steps; pfor cannot read "
            "it whole there (read it item by item, or pad it to a fixed size)."))
    check = tf.debugging.assert_equal(
        lengths, tf.fill(tf.shape(lengths), tf.reduce_max(lengths)), message=(
            f"pfor: {ctx.op_type} '{ctx.op.name}' reads a whole tensor list whose "
            "iterations hold different numbers of items (it was made with a per-iteration "
            "size, or a while loop with per-iteration trip counts grew it), which pfor "
            "reads this way only when every iteration holds as many: pad the list to a "
            "fixed size, or read it item by item or by stack()."))
    with tf.control_dependencies([extra]):
        return then(check, value.tensor)
