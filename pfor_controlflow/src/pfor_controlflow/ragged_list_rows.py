"""Lists whose rows hold their own numbers of ragged items at their start: what a
``TensorArray`` of per-iteration size
holds when values of per-iteration shapes are written into it, e.g.
``tf.TensorArray(tf.float32, size=n_i, infer_shape=False).write(i, x[:k_i])``.

Such a list is made here; a stack gives each row its own items, a ragged value ragged
along the item count too where rows hold different numbers. (ragged_lists.py has the
rest: writes and reads at one position, concat, the loops' pushes and pops;
ragged_list_views.py writes and reads at per-row positions.)
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Ragged
from pfor_controlflow import ragged_lists
from pfor_controlflow.list_lengths import list_sizes
from pfor_controlflow.ragged_lists import RaggedList, stack_items

_R = tf.raw_ops


def writes_ragged_items(op) -> bool:
    """Whether the list ``op`` makes is written (directly, after other writes, or in a
    while loop) with items whose static shape is not fully known: items that may
    differ in shape between iterations."""
    return any(not item.shape.is_fully_defined() for item in ragged_lists.written_items(op))


def convert_reserve(ctx):
    """A list of per-iteration size made once per iteration (not in a loop of the body,
    ragged_lists.py), written with items that may differ in shape between iterations:
    a list of ragged items whose rows hold their own numbers, all unset (plain items
    make a list with lengths instead, tensor_lists.py)."""
    if ctx.in_body_loop or not writes_ragged_items(ctx.op):
        raise Decline("a list of plain items, or in a loop of the body")
    return ragged_lists.reserved_rows(ctx, list_sizes(ctx))


def _counts(ctx, value: RaggedList):
    """The rows' numbers of items (None: all hold all), refusing lists whose rows hold
    theirs at the end or untracked."""
    counts = ragged_lists.known_counts(ctx, value)
    if counts is not None and value.right_aligned:
        raise Decline("a list whose rows hold their items at its end")
    return counts


def convert_stack_rows(ctx):
    """Each row's own items, stacked: ragged along the item count where rows hold
    different numbers (each row's items must agree in shape, as the loop's stack
    requires)."""
    value = ctx.inputs[0]
    if not isinstance(value, RaggedList) or value.counts is None:
        raise Decline("not a list whose rows hold their own numbers of ragged items")
    counts = _counts(ctx, value)
    if ctx.inputs[1].is_stacked:
        raise Decline("a per-iteration element shape")
    rank = value.rank
    items, shapes = stack_items(ctx, value, ctx.attr("element_dtype"))
    count = tf.shape(shapes)[0]
    own = tf.range(count)[:, None] < counts[None, :]  # [T, n]
    sizes = tf.reduce_max(tf.concat([tf.where(own[:, :, None], shapes, 0),
                                     tf.zeros_like(shapes[:1])], 0), axis=0)  # [n, rank]
    agree = tf.reduce_all(tf.equal(shapes, sizes[None]) | ~own[:, :, None])
    items = ctx.check(agree, "an iteration's tensor list holds items of different sizes, "
                      "which do not stack into one tensor", tensor=items)
    rows = tf.transpose(items, [1, 0] + list(range(2, rank + 2)))  # [n, T, ...]
    original = ctx.op.outputs[0].shape
    return Ragged.from_stacked(rows, [counts] + [
        sizes[:, d] if original.rank is None or original[d + 1] is None else None
        for d in range(rank)])


def register(registry):
    add = registry.add
    add("TensorListStack", convert_stack_rows, inputs="SU", priority=25, narrow=True)
    add("TensorListReserve", convert_reserve, inputs="*S", priority=25)

