"""Tensor lists whose items differ in shape between iterations (ragged items).

A step of a loop in the body may push or write a value whose shape differs between
iterations (a ``Ragged`` value: a boolean_mask, ``x[:n_i]``), e.g. into the accumulator
in which a while loop keeps an intermediate for its gradient. Such a list becomes a
``RaggedList``: the stacked list of the items' padded tensors (elements ``[n, ...]``,
each item padded to its own largest extent, zero padding as ``Ragged`` promises) and,
beside it, a stacked list of the items' per-iteration shapes (elements int32
``[n, rank]``), updated together. Reads give ``Ragged`` values again. A while loop
carries both lists as one variable (while_loop.py); a ``RaggedList`` has no plain stacked
form, so list ops without a converter here decline and the fallback refuses it.

A loop whose trip count differs per iteration leaves each row its own number of items
(``counts``; at the end of each row's list with ``right_aligned``, as pushes leave
them for the gradient loop that pops them): reads check or use them. A gradient loop
makes such lists too (TensorListReserve of each row's size, the gradient of a read),
of plain items as well: they are kept as lists of ragged items.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from pfor_core.extend import (ConversionError, Decline, Invariant, Ragged, Stacked, View,
                              shapes, usually_uniform)
from pfor_controlflow.functions import function_graph
from pfor_controlflow.lists import handles
from pfor_controlflow.lists.plain import stack_list
from pfor_controlflow.lists.with_lengths import ListWithLengths, within_rows

_R = tf.raw_ops


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PaddedItems(View):
    """A list of padded items (``tensor``) with the list of their shapes (``shapes``),
    of per-iteration rank ``rank``: what RaggedList and the loop's view of one share."""

    shapes: tf.Tensor
    rank: int
    # int32 [width, rank]: each row's element shape (-1: any size) where the list was
    # made with one that differs between iterations, which writes are checked against.
    element_shapes: tf.Tensor | None = None

    def materialize(self):
        return Decline("a tensor list whose items differ in shape between iterations has "
                       "no stacked form")

    def again(self, handle, shapes):
        return dataclasses.replace(self, tensor=handle, shapes=shapes)

    def pair(self) -> tuple:
        """What a while loop carries for it."""
        return (self.tensor, self.shapes)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class RaggedList(PaddedItems):
    """A stacked list of items whose shape differs between iterations: ``tensor`` is
    the list of padded items (``[n, ...]``), ``shapes`` the list of their shapes
    (int32 ``[n, rank]``), ``rank`` the items' per-iteration rank; ``counts`` (int32
    ``[n]``) each row's number of items where rows hold different numbers (None: all
    hold all), at the end of each row's list with ``right_aligned``; ``counts_known``
    is False where a loop shrank the list so that the counts are not tracked."""

    counts: tf.Tensor | None = None
    right_aligned: bool = False
    counts_known: bool = True

    def stand_in(self, original=None, n_static=None) -> "RaggedList":  # pylint: disable=unused-argument
        """A placeholder of this layout (trial conversions, loop-variable stand-ins)."""
        return placeholder(self.rank)


def placeholder(rank: int) -> RaggedList:
    return RaggedList(tensor=tf.raw_ops.Placeholder(dtype=tf.variant, shape=[]),
                      shapes=tf.raw_ops.Placeholder(dtype=tf.variant, shape=[]), rank=rank)


def from_pair(pair, rank: int, counts=None, element_shapes=None) -> RaggedList:
    return RaggedList(tensor=pair[0], shapes=pair[1], rank=rank, counts=counts,
                      element_shapes=element_shapes)


def fits_element(ctx, value, sizes, tensor, rows=None):
    """``tensor``, after a run-time check that items of ``sizes`` (``[m, rank]``, of
    ``rows`` of the list where not all) fit each row's element shape, where the list
    ``value`` was made with one that differs between iterations (the loop's write
    fails otherwise)."""
    shapes = value.element_shapes
    if shapes is None:
        return tensor
    if rows is not None:
        shapes = tf.gather(shapes, rows)
    fits = tf.reduce_all((shapes < 0) | tf.equal(shapes, sizes))
    return ctx.check(fits, "an item written into a tensor list does not have the list's "
                     "element shape (the loop's write fails):", [sizes, shapes],
                     tensor=tensor)


# -- helpers --------------------------------------------------------------------------------
def _n(ctx) -> tf.Tensor:
    return tf.reshape(tf.cast(ctx.n, tf.int32), [1])


def shapes_element(ctx, rank: int) -> tf.Tensor:
    return tf.concat([_n(ctx), [rank]], 0)


def item_parts(ctx, value) -> tuple[tf.Tensor, tf.Tensor]:
    """An item to store: its padded tensor and its shapes ``[n, rank]``."""
    if isinstance(value, Ragged):
        return value.padded, value.shapes()
    tensor = ctx.stack(value)
    per = tf.shape(tensor, out_type=tf.int32)[1:]
    return tensor, tf.tile(per[None], tf.concat([_n(ctx), [1]], 0))


def as_ragged_list(ctx, value, rank: int, dtype) -> RaggedList:
    """A list layout value (invariant, stacked or ragged) as a ``RaggedList``: a plain
    list gets a list of its items' shapes (each item whole in every iteration).
    ``dtype``: the items' dtype (None: from the list's handle)."""
    if isinstance(value, RaggedList):
        if value.rank != rank:
            raise Decline(f"items of rank {rank} in a list of items of rank {value.rank}")
        return value
    if type(value) not in (Stacked, Invariant):  # e.g. rows holding their own lengths
        raise Decline(f"a tensor list held as {type(value).__name__}")
    try:
        handle = stack_list(ctx, value, dtype)
        dtype = dtype or handles.element_dtype(handle)
    except ValueError as err:
        raise Decline(str(err)) from None
    return RaggedList(tensor=handle, shapes=_shapes_list(ctx, handle, rank, dtype), rank=rank)


def _shapes_list(ctx, handle, rank, dtype) -> tf.Tensor:
    """The list of the shapes of the items of the plain stacked list ``handle``."""
    element = shapes_element(ctx, rank)
    kind = getattr(getattr(handle, "op", None), "type", None)
    if kind == "TensorListReserve":  # unset items read as zero shapes, as they are unset
        return _R.TensorListReserve(element_shape=element, num_elements=handle.op.inputs[1],
                                    element_dtype=tf.int32)
    if kind == "EmptyTensorList":
        return _R.EmptyTensorList(element_shape=element, max_num_elements=handle.op.inputs[1],
                                  element_dtype=tf.int32)
    length = _R.TensorListLength(input_handle=handle)
    shapes = _R.TensorListReserve(element_shape=element, num_elements=length,
                                  element_dtype=tf.int32)

    def body(t, shapes):
        item = _R.TensorListGetItem(input_handle=handle, index=t, element_shape=-1,
                                    element_dtype=dtype)
        per = tf.shape(item, out_type=tf.int32)[1:]
        whole = tf.tile(per[None], tf.concat([_n(ctx), [1]], 0))
        return t + 1, _R.TensorListSetItem(input_handle=shapes, index=t, item=whole)

    return tf.while_loop(lambda t, _: t < length, body, (tf.constant(0), shapes))[1]


def read_item(ctx, padded, sizes, rank, original):
    """A read item as a layout value: ragged along the dimensions the body does not
    know statically."""
    static = original.shape
    padded.set_shape(ctx.stacked_shape(static) if static.rank == rank
                     else [ctx.n_static] + [None] * rank)
    sizes.set_shape([ctx.n_static, rank])
    varying = [d for d in range(rank) if static.rank is None or static[d] is None]
    if not varying:
        padded.set_shape(ctx.stacked_shape(static))
        return Stacked(tensor=padded)
    return Ragged(padded=padded, lengths=tuple(sizes[:, d] if d in varying else None
                                               for d in range(rank)))


def _ragged_list(ctx, k=0, counts=False) -> RaggedList:
    """Input ``k`` as a ``RaggedList``; ``counts``: whether the converter reads lists
    whose rows hold their own numbers of items (else such a list is refused)."""
    value = ctx.inputs[k]
    if not isinstance(value, RaggedList):
        raise Decline("not a list of items whose shape differs between iterations")
    if (value.counts is not None or not value.counts_known) and not counts:
        raise ConversionError(
            f"pfor: {ctx.op_type} '{ctx.op.name}' reads a tensor list of items whose shape "
            "differs between iterations, and whose iterations hold different numbers of "
            "items (a while loop with per-iteration trip counts grew it, or it was made "
            "with a per-iteration size); pfor reads such "
            "a list by concat, size or item, not this way. Read it inside that loop, or "
            "pad it to a fixed number of items.")
    return value


def known_counts(ctx, value: RaggedList):
    """``value.counts`` (None: every row holds every item); raises where not tracked."""
    if not value.counts_known:
        raise ConversionError(
            f"pfor: {ctx.op_type} '{ctx.op.name}' reads a tensor list of ragged items that "
            "a while loop with per-iteration trip counts shrank or resized, so its "
            "iterations hold numbers of items pfor does not track. Read the list inside "
            "that loop, or keep a count as a loop variable.")
    return value.counts


def _invariant(ctx, k, what):
    if ctx.inputs[k].is_stacked:
        raise Decline(f"a per-iteration {what}")
    return ctx.inputs[k].tensor


def element_shape_input(ctx, value, k=1):
    """A read's element shape (input ``k``), which shapes only unset items: a
    per-iteration one only for a list made with each iteration's own (whose unset
    items hold zeros of it already)."""
    if ctx.inputs[k].is_stacked and value.element_shapes is None:
        raise Decline("a per-iteration element shape")


# -- converters -----------------------------------------------------------------------------
def convert_ragged_push_back(ctx):
    """Pushes the item's padded tensor and its shapes."""
    item = ctx.inputs[1]
    if not isinstance(item, Ragged) and not isinstance(ctx.inputs[0], RaggedList):
        raise Decline("neither a ragged item nor a list of ragged items")
    dtype = ctx.attr("element_dtype")
    if dtype == tf.variant:
        raise Decline("a list of lists")
    value = as_ragged_list(ctx, ctx.inputs[0], handles.rank_of(item), dtype)
    padded, sizes = item_parts(ctx, item)
    padded = fits_element(ctx, value, sizes, padded)
    return value.again(_R.TensorListPushBack(input_handle=value.tensor, tensor=padded),
                       _R.TensorListPushBack(input_handle=value.shapes, tensor=sizes))


def convert_ragged_pop_back(ctx):
    value = _ragged_list(ctx)
    element_shape_input(ctx, value)
    handle, padded = _R.TensorListPopBack(input_handle=value.tensor, element_shape=-1,
                                          element_dtype=ctx.attr("element_dtype"))
    shapes, sizes = _R.TensorListPopBack(input_handle=value.shapes,
                                         element_shape=shapes_element(ctx, value.rank),
                                         element_dtype=tf.int32)
    return [value.again(handle, shapes),
            read_item(ctx, padded, sizes, value.rank, ctx.op.outputs[1])]


def convert_ragged_set_item(ctx):
    item = ctx.inputs[2]
    if not isinstance(item, Ragged) and not isinstance(ctx.inputs[0], RaggedList):
        raise Decline("neither a ragged item nor a list of ragged items")
    index = _invariant(ctx, 1, "index")
    dtype = ctx.attr("element_dtype")
    if dtype == tf.variant:
        raise Decline("a list of lists")
    value = as_ragged_list(ctx, ctx.inputs[0], handles.rank_of(item), dtype)
    padded, sizes = item_parts(ctx, item)
    padded = fits_element(ctx, value, sizes, padded)
    resize = ctx.attr("resize_if_index_out_of_bounds")
    if value.counts is not None or not value.counts_known:
        return _set_own(ctx, value, index, padded, sizes, resize)
    return value.again(
        _R.TensorListSetItem(input_handle=value.tensor, index=index, item=padded,
                             resize_if_index_out_of_bounds=resize),
        _R.TensorListSetItem(input_handle=value.shapes, index=index, item=sizes,
                             resize_if_index_out_of_bounds=resize))


def _set_own(ctx, value, index, padded, sizes, resize):
    """A write at one position into a list whose rows hold their own numbers of items
    at their start: past a row's end it raises as the loop does, or with ``resize``
    grows that row's list."""
    counts = known_counts(ctx, value)
    if value.right_aligned:
        raise Decline("a write into a list whose rows hold their items at its end")
    handle, shapes = value.tensor, value.shapes
    if resize:
        counts = tf.maximum(counts, index + 1)
        size = tf.maximum(_R.TensorListLength(input_handle=handle), index + 1)
        handle = _R.TensorListResize(input_handle=handle, size=size)
        shapes = _R.TensorListResize(input_handle=shapes, size=size)
    else:
        index = within_rows(ctx, tf.fill(tf.shape(counts), index), counts, index)
    out = dataclasses.replace(value, counts=counts)
    return out.again(_R.TensorListSetItem(input_handle=handle, index=index, item=padded),
                     _R.TensorListSetItem(input_handle=shapes, index=index, item=sizes))


def convert_ragged_get_item(ctx):
    value = _ragged_list(ctx, counts=True)
    index = _invariant(ctx, 1, "index")
    counts = known_counts(ctx, value)
    if counts is not None:
        if value.right_aligned:
            raise Decline("an item of a list whose rows hold their items at its end")
        index = within_rows(ctx, tf.fill(tf.shape(counts), index), counts, index)
    # The element shape (per iteration here: a gradient passes the shape of a ragged
    # item) only shapes an unset item: the items of such a list are all set.
    padded = _R.TensorListGetItem(input_handle=value.tensor, index=index, element_shape=-1,
                                  element_dtype=ctx.attr("element_dtype"))
    sizes = _R.TensorListGetItem(input_handle=value.shapes, index=index,
                                 element_shape=shapes_element(ctx, value.rank),
                                 element_dtype=tf.int32)
    return read_item(ctx, padded, sizes, value.rank, ctx.op.outputs[0])


def stack_items(ctx, value, dtype):
    """Every item of the ``RaggedList`` ``value`` padded to the largest: ``[T, n, ...]``,
    and their shapes ``[T, n, rank]``."""
    rank = value.rank
    element = shapes_element(ctx, rank)
    shapes = _R.TensorListStack(input_handle=value.shapes, element_shape=element,
                                element_dtype=tf.int32)  # [T, n, rank]
    count = _R.TensorListLength(input_handle=value.tensor)
    if getattr(ctx, "nested", False):
        largest = _padded_size(ctx, value, count, dtype)
    else:
        largest = handles.largest(tf.reshape(shapes, [-1, rank]), rank)
    whole = tf.concat([_n(ctx), largest], 0)
    padded = _R.TensorListReserve(element_shape=whole, num_elements=count, element_dtype=dtype)

    def body(t, padded):
        item = _R.TensorListGetItem(input_handle=value.tensor, index=t, element_dtype=dtype,
                                    element_shape=whole)  # (an unset item: zeros)
        item = _fitted(item, whole)  # (an item may be padded past its sizes)
        return t + 1, _R.TensorListSetItem(input_handle=padded, index=t, item=item)

    padded = tf.while_loop(lambda t, _: t < count, body, (tf.constant(0), padded))[1]
    items = _R.TensorListStack(input_handle=padded, element_shape=whole, element_dtype=dtype)
    return items, shapes


def _padded_size(ctx, value, count, dtype) -> tf.Tensor:
    """The largest padded size of the items (inside an outer pfor, in place of their
    largest size: an outer pfor that runs the loop that pushed them pads them alike
    in all its iterations, see trip_counts.run_masked, where their sizes differ)."""
    rank = value.rank
    empty = tf.concat([_n(ctx), tf.zeros([rank], tf.int32)], 0)  # (an unset item: zeros)

    def body(t, largest):
        item = _R.TensorListGetItem(input_handle=value.tensor, index=t, element_dtype=dtype,
                                    element_shape=empty)
        return t + 1, tf.maximum(largest, tf.shape(item, out_type=tf.int32)[1:])

    return tf.while_loop(lambda t, _: t < count, body,
                         (tf.constant(0), tf.zeros([rank], tf.int32)))[1]


def convert_ragged_stack(ctx):
    """Every iteration's items must agree in shape (the loop's TensorListStack fails
    otherwise): the items, padded to the largest, stacked along a new axis 1."""
    value = _ragged_list(ctx)
    element_shape_input(ctx, value)
    dtype, rank = ctx.attr("element_dtype"), value.rank
    items, shapes = stack_items(ctx, value, dtype)
    count = tf.shape(shapes)[0]
    none = tf.zeros(tf.concat([[1], tf.shape(shapes)[1:]], 0), tf.int32)
    sizes = tf.reduce_max(tf.concat([shapes, none], 0), axis=0)  # [n, rank]
    agree = tf.reduce_all(tf.equal(shapes, sizes[None]))
    items = ctx.check(agree, "an iteration's tensor list holds items of different sizes, "
                      "which do not stack into one tensor", tensor=items)
    perm = [1, 0] + list(range(2, rank + 2))
    items = tf.transpose(items, perm)  # [n, T, ...]
    items.set_shape([ctx.n_static] + [None] * (rank + 1))
    original = ctx.op.outputs[0].shape
    varying = [d for d in range(rank)
               if original.rank is None or original[d + 1] is None]
    if not varying:
        return Stacked(tensor=items)
    # The number of items, where the body does not know it, as a size of each
    # iteration too (ragged converters then meet values made from its shape alike).
    counts = None if original.rank is not None and original[0] is not None else usually_uniform(
        tf.fill(tf.shape(sizes)[:1], count))
    return Ragged(padded=items, lengths=(counts,) + tuple(
        sizes[:, d] if d in varying else None for d in range(rank)))


def convert_ragged_from_tensor(ctx):
    """A ragged tensor ``[T, ...]`` as a list of T items. Items of one shape, T varying:
    a ``ListWithLengths``, each row holding its own T. Ragged items: a list of ragged
    items, T the same in every iteration (a stacked list holds one number of items)."""
    value = ctx.inputs[0]
    shape = _invariant(ctx, 1, "element shape")
    rank = value.rank - 1
    padded = value.padded
    if value.lengths[0] is not None and all(d is None for d in value.lengths[1:]):
        items = tf.transpose(padded, [1, 0] + list(range(2, rank + 2)))  # [T, n, ...]
        return ListWithLengths(tensor=_R.TensorListFromTensor(
            tensor=items, element_shape=handles.prepend_n(ctx, shape)), lengths=value.lengths[0])
    counts = value.lengths[0]
    if counts is not None and not _marked_uniform(value, counts):
        # rows of their own numbers of ragged items (a stack's gradient, say)
        items = tf.transpose(padded, [1, 0] + list(range(2, rank + 2)))  # [T, n, ...]
        return _from_items(ctx, items, value.shapes()[:, 1:], rank, counts)
    if counts is not None:
        count = tf.concat([counts, [0]], 0)[0]
        padded = ctx.check(tf.reduce_all(tf.equal(counts, count)), (
            "iterations would hold tensor lists of different lengths, which pfor does "
            "not support (pad the tensor to one length)"), tensor=padded[:, :count])
    items = tf.transpose(padded, [1, 0] + list(range(2, rank + 2)))  # [T, n, ...]
    return _from_items(ctx, items, value.shapes()[:, 1:], rank, None)


def _from_items(ctx, items, shapes, rank, counts) -> RaggedList:
    """A list of the items ``items`` (``[T, n, ...]``), all of each row's ``shapes``."""
    count = tf.shape(items, out_type=tf.int32)[:1]
    every = tf.broadcast_to(shapes[None], tf.concat([count, tf.shape(shapes)], 0))
    return RaggedList(
        tensor=_R.TensorListFromTensor(tensor=items, element_shape=-1),
        shapes=_R.TensorListFromTensor(tensor=every,
                                       element_shape=shapes_element(ctx, rank)),
        rank=rank, counts=counts)


def _marked_uniform(value, lengths) -> bool:
    """Whether ``lengths`` is marked the same in every iteration (``usually_uniform``)."""
    return Ragged(padded=value.padded, lengths=(lengths,) + (None,) * (value.rank - 1)
                  ).usually_uniform


def convert_ragged_element_shape(ctx):
    """The element shape the list was made with (the same in every iteration, unless
    it was made with each iteration's own)."""
    value = _ragged_list(ctx, counts=True)
    if value.element_shapes is not None:
        return Stacked(tensor=tf.cast(value.element_shapes, ctx.attr("shape_type")))
    shape = _R.TensorListElementShape(input_handle=value.tensor,
                                      shape_type=ctx.attr("shape_type"))
    return Invariant(tensor=shape[1:])


def convert_ragged_add_lists(ctx):
    """AddN of tensor lists (gradients of list reads add up) of which some hold ragged
    items: item by item, every list's item padded to the largest and added (an unset
    item reads as zeros of size 0); the sizes are the largest of each item's."""
    if ctx.op.outputs[0].dtype != tf.variant or not any(
            isinstance(v, RaggedList) for v in ctx.inputs):
        raise Decline("no tensor list of ragged items")
    rank = next(v.rank for v in ctx.inputs if isinstance(v, RaggedList))
    dtype = handles.summed_dtype(ctx)
    if dtype is None:
        raise Decline("the lists' element dtype is not known here")
    lists = [as_ragged_list(ctx, v, rank, dtype) for v in ctx.inputs]
    count = _R.TensorListLength(input_handle=lists[0].tensor)
    element = shapes_element(ctx, rank)
    data = _R.TensorListReserve(element_shape=-1, num_elements=count, element_dtype=dtype)
    shapes = _R.TensorListReserve(element_shape=element, num_elements=count,
                                  element_dtype=tf.int32)

    def body(t, data, shapes):
        sizes = [_R.TensorListGetItem(input_handle=v.shapes, index=t, element_shape=element,
                                      element_dtype=tf.int32) for v in lists]
        items = [_R.TensorListGetItem(  # an unset item: zeros of its (zero) sizes
            input_handle=v.tensor, index=t, element_dtype=dtype,
            element_shape=tf.concat([_n(ctx), handles.largest(size, rank)], 0))
            for v, size in zip(lists, sizes)]
        whole = tf.concat([_n(ctx), handles.largest(tf.concat(sizes, 0), rank)], 0)
        total = tf.add_n([_fitted(item, whole) for item in items])
        size = tf.reduce_max(tf.stack(sizes), axis=0)
        return (t + 1, _R.TensorListSetItem(input_handle=data, index=t, item=total),
                _R.TensorListSetItem(input_handle=shapes, index=t, item=size))

    _, data, shapes = tf.while_loop(lambda t, *_: t < count, body,
                                    (tf.constant(0), data, shapes))
    # (gradients of one list: their rows hold as many items as its rows)
    counted = [v for v in lists if v.counts is not None or not v.counts_known]
    if counted:
        return dataclasses.replace(counted[0], tensor=data, shapes=shapes)
    return RaggedList(tensor=data, shapes=shapes, rank=rank)


def _fitted(item, whole):
    """``item`` padded with zeros or cut (an item may be padded past its sizes) to
    ``whole``."""
    grow = tf.maximum(whole - tf.shape(item, out_type=tf.int32), 0)
    item = tf.pad(item, tf.stack([tf.zeros_like(grow), grow], 1))
    return tf.slice(item, tf.zeros_like(whole), whole)


def convert_ragged_resize(ctx):
    value = _ragged_list(ctx)
    size = _invariant(ctx, 1, "list size")
    return value.again(_R.TensorListResize(input_handle=value.tensor, size=size),
                       _R.TensorListResize(input_handle=value.shapes, size=size))


def convert_ragged_zeros_like(ctx):
    """Zeros in every item (a gradient of a list that gets none), the sizes (and
    numbers of items) kept."""
    value = _ragged_list(ctx, counts=True)
    return value.again(tf.raw_ops.ZerosLike(x=value.tensor), value.shapes)


def convert_ragged_length(ctx):
    value = _ragged_list(ctx, counts=True)
    counts = known_counts(ctx, value)
    if counts is not None:
        return Stacked(tensor=counts)
    return Invariant(tensor=_R.TensorListLength(input_handle=value.tensor))


def _own_items(value, count, n) -> tf.Tensor:
    """Bool ``[T, n]``: which of the ``count`` items are each row's own (all, where
    every row holds all)."""
    counts = value.counts
    if counts is None:
        return tf.ones(tf.stack([count, n]), tf.bool)
    positions = tf.range(count)[:, None]
    if value.right_aligned:
        return positions >= count - counts[None, :]
    return positions < counts[None, :]


def convert_ragged_concat(ctx):
    """Per row, its own items joined along their first dimension; the others must
    agree within the row (the loop's TensorListConcatV2 fails otherwise). Output 1:
    per row its items' first dimensions, ragged where rows hold different numbers
    of items."""
    value = _ragged_list(ctx, counts=True)
    known_counts(ctx, value)
    element_shape_input(ctx, value)
    _invariant(ctx, 2, "leading dims")
    dtype, rank = ctx.attr("element_dtype"), value.rank
    if rank < 1:
        raise Decline("a list of scalars does not concat")
    items, sizes = stack_items(ctx, value, dtype)  # [T, n, D0, ...], [T, n, rank]
    count, n = tf.shape(sizes)[0], tf.shape(sizes)[1]
    own = _own_items(value, count, n)  # [T, n]
    firsts = tf.where(own, sizes[:, :, 0], 0)  # [T, n]
    inner = tf.where(own[:, :, None], sizes[:, :, 1:], 0)
    widest = tf.reduce_max(tf.concat([inner, tf.zeros_like(inner[:1])], 0), axis=0)  # [n, r-1]
    agree = tf.reduce_all(tf.logical_or(tf.equal(inner, widest[None]),
                                        tf.logical_not(own)[:, :, None]))
    items = ctx.check(agree, "an iteration's tensor list holds items that differ in more "
                      "than their first dimension, which do not concat", tensor=items)
    perm = [1, 0] + list(range(2, rank + 2))
    rows = tf.transpose(items, perm)  # [n, T, D0, ...]
    keep = tf.range(tf.shape(items)[2])[None, None, :] < tf.transpose(firsts)[:, :, None]
    values = shapes.masked_elements(rows, keep)  # [sum, D1, ...], row by row, item by item
    totals = tf.reduce_sum(firsts, axis=0)
    joined = Ragged.from_row_lengths(values, totals)
    original = ctx.op.outputs[0].shape
    lengths = (totals,) + tuple(
        widest[:, d - 1] if original.rank is None or original[d] is None else None
        for d in range(1, rank))
    joined = Ragged(padded=joined.padded, lengths=lengths)
    firsts = tf.cast(tf.transpose(firsts), tf.int64)  # [n, T]
    if value.counts is None:
        return [joined, Stacked(tensor=firsts)]
    if value.right_aligned:  # each row's own items first
        source = tf.range(count)[None, :] + (count - value.counts)[:, None]
        firsts = tf.gather(firsts, tf.minimum(source, count - 1), batch_dims=1)
    return [joined, Ragged.from_stacked(firsts, [value.counts])]


def _reserved_rank(op):
    """The rank of the items of the list ``op`` makes: from its element shape, else
    from the items written into it."""
    shape = op.inputs[0].shape
    if shape.rank == 1 and shape[0] is not None:
        return shape[0]
    ranks = {item.shape.rank for item in written_items(op)}
    return ranks.pop() if len(ranks) == 1 and None not in ranks else None


_WRITES = {"TensorListSetItem": 2, "TensorListPushBack": 1}


def written_items(op) -> list:
    """The items written or pushed into the list ``op`` makes, directly, after other
    writes, or in the body of a while loop the list goes through."""
    items, seen, pending = [], set(), [op.outputs[0]]
    while pending:
        handle = pending.pop()
        for consumer in handle.consumers():
            if id(consumer) in seen:
                continue
            seen.add(id(consumer))
            if consumer.type in ("While", "StatelessWhile"):
                body = function_graph(consumer, consumer.get_attr("body").name)
                if body is not None:
                    pending.extend(body.inputs[j] for j, t in enumerate(consumer.inputs)
                                   if t is handle and j < len(body.inputs))
            elif consumer.type in _WRITES and consumer.inputs[0] is handle:
                items.append(consumer.inputs[_WRITES[consumer.type]])
                pending.append(consumer.outputs[0])
    return items


def convert_reserve_rows(ctx):
    """TensorListReserve of a per-row number of items in a loop of the body (a gradient
    loop's gradient of a read, sized as each row's list was at that step): a list of
    (possibly ragged) items whose rows hold their own numbers of items, at the start of
    each row's list, all unset (an unset item reads as zeros of its sizes, zero)."""
    if not ctx.in_body_loop:  # a list made once per iteration: per_row_items.py
        raise Decline("a list of per-iteration size outside a loop of the body")
    if not ctx.inputs[0].is_stacked and all(
            item.shape.is_fully_defined() for item in written_items(ctx.op)) and not any(
            op.type == "TensorListResize" for op in ctx.op.graph.get_operations()):
        # One element shape and items alike: a plain list with lengths (plain.py), where
        # the body resizes no list (the gradient of a TensorArray that grew, whose rows'
        # counts change: kept here).
        raise Decline("a list of plain items")
    return reserved_rows(ctx, tf.cast(ctx.stacked(1), tf.int32))


def reserved_rows(ctx, counts) -> RaggedList:
    """A list of (possibly ragged) items whose rows hold ``counts`` items, all unset."""
    rank = _reserved_rank(ctx.op)
    if rank is None:
        raise Decline("items of unknown rank")
    dtype = ctx.attr("element_dtype")
    if dtype == tf.variant:
        raise Decline("a list of lists")
    count = tf.reduce_max(tf.concat([counts, [0]], 0))
    return RaggedList(
        tensor=_R.TensorListReserve(element_shape=-1, num_elements=count, element_dtype=dtype),
        shapes=_R.TensorListReserve(element_shape=shapes_element(ctx, rank),
                                    num_elements=count, element_dtype=tf.int32),
        rank=rank, counts=counts)


def convert_ragged_split(ctx):
    """A tensor split along its first dimension into items of per-row lengths (the
    gradient of a concat): a list of ragged items; where the lengths are ragged (rows
    of different numbers of items) each row holds its own number."""
    value, sizes = ctx.inputs[0], ctx.inputs[2]
    if not isinstance(value, Ragged) and not isinstance(sizes, Ragged):
        raise Decline("neither a ragged tensor nor ragged lengths")
    _invariant(ctx, 1, "element shape")
    if isinstance(value, Ragged):
        padded, extents = value.padded, value.extents()
    else:
        padded = ctx.stack(value)
        dims = tf.shape(padded, out_type=tf.int32)
        extents = [tf.fill(dims[:1], dims[1 + d]) for d in range(padded.shape.rank - 1)]
    rank = padded.shape.rank - 1
    if rank < 1:
        raise Decline("a scalar does not split")
    counts = sizes.lengths[0] if isinstance(sizes, Ragged) else None
    firsts = tf.cast(sizes.padded if isinstance(sizes, Ragged) else ctx.stack(sizes),
                     tf.int32)  # [n, T], zero past a row's own items
    starts = tf.cumsum(firsts, axis=1, exclusive=True)
    width = tf.reduce_max(tf.concat([tf.reshape(firsts, [-1]), [0]], 0))
    steps = tf.range(width)
    inside = steps[None, None, :] < firsts[:, :, None]  # [n, T, W]
    where = tf.minimum(starts[:, :, None] + steps[None, None, :],
                       tf.maximum(tf.shape(padded)[1] - 1, 0))
    items = tf.gather(padded, where, batch_dims=1)  # [n, T, W, D1, ...]
    items = tf.where(tf.reshape(inside, tf.concat([tf.shape(inside), [1] * (rank - 1)], 0)),
                     items, tf.zeros([], items.dtype))
    items = tf.transpose(items, [1, 0] + list(range(2, rank + 2)))  # [T, n, W, ...]
    whole = tf.transpose(tf.stack([firsts] + [
        tf.broadcast_to(e[:, None], tf.shape(firsts)) for e in extents[1:]], -1), [1, 0, 2])
    return RaggedList(
        tensor=_R.TensorListFromTensor(tensor=items, element_shape=-1),
        shapes=_R.TensorListFromTensor(tensor=whole, element_shape=shapes_element(ctx, rank)),
        rank=rank, counts=counts)
