"""Lists whose rows hold their own numbers of ragged items at their start: what a
``TensorArray`` of per-iteration size
holds when values of per-iteration shapes are written into it, e.g.
``tf.TensorArray(tf.float32, size=n_i, infer_shape=False).write(i, x[:k_i])``.

Such a list is made here, as is one made with an element shape that differs between
iterations (raw ``TensorListReserve`` / ``EmptyTensorList``); a stack gives each row
its own items, a ragged value ragged along the item count too where rows hold
different numbers. (ragged_items.py has the rest: writes and reads at one position,
concat, the loops' pushes and pops; ragged_item_views.py writes and reads at per-row
positions.)
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Ragged
from pfor_controlflow.lists import ragged_items
from pfor_controlflow.lists.ragged_items import RaggedList, stack_items
from pfor_controlflow.lists.with_lengths import list_sizes

_R = tf.raw_ops


def writes_ragged_items(op) -> bool:
    """Whether the list ``op`` makes is written (directly, after other writes, or in a
    while loop) with items whose static shape is not fully known: items that may
    differ in shape between iterations."""
    return any(not item.shape.is_fully_defined() for item in ragged_items.written_items(op))


def convert_reserve(ctx):
    """A list of per-iteration size made once per iteration (not in a loop of the body,
    ragged_items.py), written with items that may differ in shape between iterations:
    a list of ragged items whose rows hold their own numbers, all unset (plain items
    make a list with lengths instead, plain.py)."""
    if ctx.in_body_loop or not writes_ragged_items(ctx.op):
        raise Decline("a list of plain items, or in a loop of the body")
    return ragged_items.reserved_rows(ctx, list_sizes(ctx))


def convert_new_shaped(ctx):
    """TensorListReserve / EmptyTensorList with an element shape that differs between
    iterations (of a static rank): a list of ragged items that keeps each row's element
    shape, which writes are checked against. A reserved list's unset items read as
    zeros of it, so it must be fully defined in every iteration (checked: pfor cannot
    tell unset items from set ones later); an empty list's takes any. A list of per-row
    size in a loop of the body may be a gradient's, whose element shape (the forward
    list's, read back per step) is not: a row's unset items whose element shape is not
    fully defined are of zero size there (as ragged_items.reserved_rows makes them)."""
    spec = ctx.op.inputs[0].shape
    if spec.rank != 1 or spec[0] is None:
        raise Decline("an element shape of unknown rank")
    dtype, rank = ctx.attr("element_dtype"), spec[0]
    if dtype == tf.variant:
        raise Decline("a list of lists")
    shapes = tf.cast(ctx.stacked(0), tf.int32)  # [n, rank]
    element = ragged_items.shapes_element(ctx, rank)
    if ctx.op_type == "EmptyTensorList":
        if ctx.inputs[1].is_stacked:
            raise Decline("a per-iteration cap on the list's size")
        cap = ctx.inputs[1].tensor
        return RaggedList(
            tensor=_R.EmptyTensorList(element_shape=-1, max_num_elements=cap,
                                      element_dtype=dtype),
            shapes=_R.EmptyTensorList(element_shape=element, max_num_elements=cap,
                                      element_dtype=tf.int32),
            rank=rank, element_shapes=shapes)
    counts = list_sizes(ctx) if ctx.inputs[1].is_stacked else None
    if ctx.in_body_loop and counts is not None:
        unset = tf.where(tf.reduce_all(shapes >= 0, 1, keepdims=True), shapes, 0)
    else:
        unset = ctx.check(
            tf.reduce_all(shapes >= 0), "makes a tensor list whose element shape differs "
            "between iterations and is not fully defined in some; pfor needs every size "
            "of it there (an unset item reads as zeros of it): give every dimension a "
            "size, or start from EmptyTensorList", tensor=shapes)
    count = (tf.reduce_max(tf.concat([counts, [0]], 0)) if counts is not None
             else tf.cast(ctx.inputs[1].tensor, tf.int32))
    count = ctx.check(count >= 0, "makes a tensor list of negative size", tensor=count)
    largest = tf.reduce_max(tf.concat([unset, tf.zeros([1, rank], tf.int32)], 0), 0)
    zeros = tf.zeros(tf.concat([[count], tf.shape(unset)[:1], largest], 0), dtype)
    sizes = tf.tile(unset[None], tf.stack([count, 1, 1]))
    return RaggedList(
        tensor=_R.TensorListFromTensor(tensor=zeros, element_shape=-1),
        shapes=_R.TensorListFromTensor(tensor=sizes, element_shape=element),
        rank=rank, counts=counts, element_shapes=shapes)


def _left_aligned(whole, counts) -> tf.Tensor:
    """``whole`` (``[T, n, ...]``) with each row's last ``counts[j]`` items moved to
    the start (where pushes in a loop of per-iteration trip counts leave them)."""
    count = tf.shape(whole)[0]
    source = tf.minimum(tf.range(count)[:, None] + (count - counts)[None, :],
                        tf.maximum(count - 1, 0))
    rows = tf.broadcast_to(tf.range(tf.shape(whole)[1])[None, :], tf.shape(source))
    return tf.gather_nd(whole, tf.stack([source, rows], -1))


def convert_stack_rows(ctx):
    """Each row's own items, stacked: ragged along the item count where rows hold
    different numbers (each row's items must agree in shape, as the loop's stack
    requires)."""
    value = ctx.inputs[0]
    if not isinstance(value, RaggedList) or value.counts is None:
        raise Decline("not a list whose rows hold their own numbers of ragged items")
    counts = ragged_items.known_counts(ctx, value)
    ragged_items.element_shape_input(ctx, value)
    rank = value.rank
    items, shapes = stack_items(ctx, value, ctx.attr("element_dtype"))
    if value.right_aligned:
        items, shapes = _left_aligned(items, counts), _left_aligned(shapes, counts)
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
