"""Tensor lists of ragged items carried through a while loop whose trip count differs
per iteration.

The ragged counterpart of loop_views.py: the loop keeps the whole loop's pair of lists
(padded items ``[N, ...]`` and their shapes ``[N, rank]``, see ragged_items.py), and
its body sees them as a ``RaggedListView`` saying which rows it converts (``rows``). A
write pads the old item and the new rows to a common size and scatters the rows in,
their shapes beside them; reads gather the rows. After the loop each row holds its own
number of items (``RaggedList.counts``), pushes at the end of its list
(``right_aligned``), as loop_views.py leaves plain lists. A gradient loop adds lists
it made for its rows (a read's gradient) to the one it carries: AddN scatters them
into the view's rows. The masked loop (inside an outer pfor) sees them with a
``mask``: every row, a write keeping the old item where the row's writes do not count
(per-row writes decline there); under XLA, where their padded size is not known when
compiling, loops decline these lists.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from pfor_core.extend import Decline, Invariant, Stacked
from pfor_controlflow.lists import handles, loop_views
from pfor_controlflow.lists.loop_views import right_align_items, swap01
from pfor_controlflow.lists.ragged_items import (PaddedItems, RaggedList, as_ragged_list,
                                                 fits_element, item_parts, known_counts,
                                                 read_item, stack_items)
from pfor_controlflow.lists.with_lengths import within_rows

_R = tf.raw_ops


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class RaggedListView(PaddedItems):
    """A list of ragged items of ``width`` rows seen by a conversion of some of them:
    ``tensor`` and ``shapes`` are the whole loop's lists (elements ``[width, ...]``)."""

    width: tf.Tensor
    rows: tf.Tensor  # int32 [m]: the rows being converted
    aligned: bool = False  # the running rows hold as many items as the whole list
    # bool [width]: the rows whose writes count (a masked loop converts all rows,
    # ``rows`` is then every row, or per row the row whose items it reads:
    # total_ops.stand_ins); None: all of ``rows``.
    mask: tf.Tensor | None = None
    # int32 [width]: each row's own number of items at its start where rows hold their
    # own (a list of per-iteration size), which reads and writes check.
    lengths: tf.Tensor | None = None


def view_of(value, width, rows, aligned=False, mask=None, lengths=None,
            reads=None) -> RaggedListView:
    """The ``RaggedList`` ``value`` seen by a conversion of its ``rows`` (of all rows,
    of which those in ``mask`` count, for a masked loop, each reading the items of
    row ``reads``, by default its own); ``lengths``: see ``RaggedListView``."""
    if mask is not None:  # (a masked view writes by mask only: ``rows`` serves reads)
        rows = tf.range(tf.cast(width, tf.int32)) if reads is None else reads
    return RaggedListView(tensor=value.tensor, shapes=value.shapes, rank=value.rank,
                          width=width, rows=rows, aligned=aligned, mask=mask,
                          lengths=lengths, element_shapes=value.element_shapes)


def result(handle, shapes, rank, *, lengths, change, pushed, n, nested=False,
           own=None, element_shapes=None) -> RaggedList:
    """The loop's output for a list of ragged items: ``lengths`` each row's number of
    items when it finished, right-aligned where the body pushes (``pushed``: the
    element dtype); ``change`` as ``loop_vars.length_change`` says; ``own``: the rows'
    own numbers of items the list came in with, which a loop that writes it in place
    keeps; ``element_shapes``: see ``PaddedItems``."""
    if pushed is not None:
        handle, shapes = _right_align(handle, shapes, rank, lengths, pushed, _N(n, nested))
    if change == "same":
        return RaggedList(tensor=handle, shapes=shapes, rank=rank, counts=own,
                          element_shapes=element_shapes)
    return RaggedList(tensor=handle, shapes=shapes, rank=rank, counts=lengths,
                      right_aligned=pushed is not None,
                      counts_known=change in ("pushes", "writes"),
                      element_shapes=element_shapes)


class _N:
    """What ``stack_items`` needs of a context: the number of rows, and whether the
    ops land in the body of an outer pfor."""

    def __init__(self, n, nested=False):
        self.n, self.nested = n, nested


def _right_align(handle, shapes, rank, lengths, dtype, rows):
    items, sizes = stack_items(rows, RaggedList(tensor=handle, shapes=shapes, rank=rank), dtype)
    items, sizes = right_align_items(items, lengths), right_align_items(sizes, lengths)
    element = tf.concat([tf.reshape(tf.cast(rows.n, tf.int32), [1]), [rank]], 0)
    return (_R.TensorListFromTensor(tensor=items, element_shape=-1),
            _R.TensorListFromTensor(tensor=sizes, element_shape=element))


# -- helpers --------------------------------------------------------------------------------
def _view(ctx) -> RaggedListView:
    value = ctx.inputs[0]
    if not isinstance(value, RaggedListView):
        raise Decline("not a list of ragged items seen by a loop over some iterations")
    return value


def _index(ctx, k=1):
    if ctx.inputs[k].is_stacked:
        raise Decline("a per-iteration index")
    return ctx.inputs[k].tensor


def _within(ctx, view, positions, tensor):
    """``tensor``, after a run-time check that ``positions`` (one, or ``[m]`` per
    converted row) lie within the own items of every converted row whose writes count,
    where rows hold their own numbers (the loop raises past the end of its list)."""
    if view.lengths is None:
        return tensor
    if ctx.has_attr("resize_if_index_out_of_bounds") and ctx.attr(
            "resize_if_index_out_of_bounds"):
        raise Decline("a write that grows a list whose rows hold their own numbers of items")
    lengths = _rows(view, view.lengths)
    if view.mask is not None:  # rows that do not run are not checked
        lengths = tf.where(view.mask, lengths, tf.int32.max)
    positions = positions + tf.zeros_like(lengths)
    return within_rows(ctx, positions, lengths, tensor)


def _stacked_index(ctx, view, k=1):
    """A per-iteration index: every row's ``[item, row]`` in the whole list."""
    return tf.stack([tf.cast(ctx.stacked(k), tf.int32), view.rows], 1)


def _all_items(ctx, view):
    """Every item of the whole list padded to the largest ``[T, width, ...]``, and
    their shapes ``[T, width, rank]``."""
    value = RaggedList(tensor=view.tensor, shapes=view.shapes, rank=view.rank)
    return stack_items(_N(view.width, ctx.nested), value, ctx.attr("element_dtype"))


def _whole(view) -> tf.Tensor:
    return tf.reshape(tf.cast(view.width, tf.int32), [1])


def _sizes_element(view) -> tf.Tensor:
    return tf.concat([_whole(view), [view.rank]], 0)


def _pad_to(tensor, dims) -> tf.Tensor:
    grow = dims - tf.shape(tensor, out_type=tf.int32)
    return tf.pad(tensor, tf.stack([tf.zeros_like(grow), grow], 1))


def _merge(view, padded, sizes, old=None, old_sizes=None):
    """Whole elements (item and shapes) holding ``padded``/``sizes`` in the view's
    rows and ``old``/``old_sizes`` (or zeros) elsewhere."""
    if old is None:
        old = tf.zeros(tf.concat([_whole(view), tf.shape(padded)[1:]], 0), padded.dtype)
        old_sizes = tf.zeros(_sizes_element(view), tf.int32)
    dims = tf.maximum(tf.shape(old, out_type=tf.int32)[1:],
                      tf.shape(padded, out_type=tf.int32)[1:])
    old = _pad_to(old, tf.concat([_whole(view), dims], 0))
    padded = _pad_to(padded, tf.concat([tf.shape(padded, out_type=tf.int32)[:1], dims], 0))
    if view.mask is not None:  # masked: every row, the old item where writes do not count
        return _select(view.mask, padded, old), _select(view.mask, sizes, old_sizes)
    at = view.rows[:, None]
    return _scatter(old, at, padded), _scatter(old_sizes, at, sizes)


def _select(mask, new, old) -> tf.Tensor:
    rows = tf.reshape(mask, tf.concat([tf.shape(mask), tf.ones_like(tf.shape(new))[1:]], 0))
    return tf.where(rows, new, old)


def _unmasked(view):
    """``view``, refused where a masked loop sees it: per-row writes of rows whose
    writes do not count would land."""
    if view.mask is not None:
        raise Decline("a per-row write to a list of ragged items in a masked loop")
    return view


def _scatter(base, at, updates) -> tf.Tensor:
    """``tensor_scatter_nd_update``, also where ``base`` has no elements (which the
    kernel refuses for a nonempty ``at``)."""
    return tf.cond(tf.size(base) > 0, lambda: tf.tensor_scatter_nd_update(base, at, updates),
                   lambda: base)


def _rows(view, element) -> tf.Tensor:
    return tf.gather(element, view.rows)


def _item_of(ctx, view, k):
    """Item input ``k`` to write: its padded tensor and sizes (checked against the
    rows' element shapes where the list has its own per row)."""
    item = ctx.inputs[k]
    if handles.rank_of(item) != view.rank:
        raise Decline(f"an item of rank {handles.rank_of(item)} in a list of items of rank {view.rank}")
    padded, sizes = item_parts(ctx, item)
    return fits_element(ctx, view, sizes, padded, view.rows), sizes


def _per_row(convert):
    """``convert`` (per-row indices or sizes) also for a plain ``RaggedList``: seen as
    a view of all its rows, and the result a ``RaggedList`` again."""
    def on_any(ctx):
        value = ctx.inputs[0]
        if isinstance(value, RaggedListView):
            return convert(ctx, value)
        if not isinstance(value, RaggedList):
            raise Decline("not a list of ragged items")
        if value.counts is not None or not value.counts_known:
            ctx = _checked_own(ctx, value)
        view = view_of(value, ctx.n, rows=tf.range(tf.cast(ctx.n, tf.int32)))
        out = convert(ctx, view)
        return value.again(*out.pair()) if isinstance(out, RaggedListView) else out
    on_any.__name__, on_any.__qualname__ = convert.__name__, convert.__qualname__
    on_any.__doc__ = convert.__doc__
    return on_any


def _checked_own(ctx, value):
    """``ctx`` with its per-row position into a list whose rows hold their own numbers
    of items at their start checked inside each row's items, as the loop checks."""
    if value.right_aligned or ctx.op_type not in ("TensorListSetItem", "TensorListGetItem"):
        return ctx
    index = within_rows(ctx, ctx.stacked(1), known_counts(ctx, value), ctx.inputs[1].tensor)
    return ctx.with_inputs((ctx.inputs[0], Stacked(tensor=index)) + tuple(ctx.inputs[2:]))


# -- converters -----------------------------------------------------------------------------
def convert_ragged_view_push_back(ctx):
    view = _view(ctx)
    padded, sizes = _merge(view, *_item_of(ctx, view, 1))
    return view.again(_R.TensorListPushBack(input_handle=view.tensor, tensor=padded),
                      _R.TensorListPushBack(input_handle=view.shapes, tensor=sizes))


@_per_row
def convert_ragged_view_set_item_at_rows(ctx, view):
    """Each row writes its own item (a gradient loop's per-row step number): the
    whole list as one tensor, the rows' items scattered in, made a list again."""
    if not ctx.inputs[1].is_stacked or ctx.attr("resize_if_index_out_of_bounds"):
        raise Decline("an invariant index, or a write that may grow the list")
    _unmasked(view)
    at = _within(ctx, view, _at_rows(ctx), _stacked_index(ctx, view))
    padded, sizes = _item_of(ctx, view, 2)
    items, shapes = _all_items(ctx, view)
    dims = tf.maximum(tf.shape(items, out_type=tf.int32)[2:],
                      tf.shape(padded, out_type=tf.int32)[1:])
    items = _pad_to(items, tf.concat([tf.shape(items, out_type=tf.int32)[:2], dims], 0))
    padded = _pad_to(padded, tf.concat([tf.shape(padded, out_type=tf.int32)[:1], dims], 0))
    items, shapes = _scatter(items, at, padded), _scatter(shapes, at, sizes)
    return view.again(_R.TensorListFromTensor(tensor=items, element_shape=-1),
                      _R.TensorListFromTensor(tensor=shapes, element_shape=_sizes_element(view)))


@_per_row
def convert_ragged_view_get_item_at_rows(ctx, view):
    if not ctx.inputs[1].is_stacked:
        raise Decline("an invariant index")
    at = _within(ctx, view, _at_rows(ctx), _stacked_index(ctx, view))
    items, shapes = _all_items(ctx, view)
    # (a gather refuses params of no elements: zeros then, as many as it would give)
    padded = tf.cond(tf.size(items) > 0, lambda: tf.gather_nd(items, at),
                     lambda: tf.zeros(tf.concat([tf.shape(at)[:1], tf.shape(items)[2:]], 0),
                                      items.dtype))
    return read_item(ctx, padded, tf.gather_nd(shapes, at), view.rank, ctx.op.outputs[0])


def _only_returned(tensor) -> bool:
    """Whether ``tensor`` is only returned by its function (through Identity)."""
    return all(c.type == "Identity" and _only_returned(c.outputs[0])
               for c in tensor.consumers())


@_per_row
def convert_ragged_view_resize_rows(ctx, view):
    """A resize to a per-row size that the step then returns (a gradient loop
    shrinking the gradient of a list it reads by index): the items past a row's new
    size are left in place, where only a later push or a length would see them, and
    the loop's result marks the numbers of items as not tracked."""
    if not ctx.inputs[1].is_stacked or not _only_returned(ctx.op.outputs[0]):
        raise Decline("an invariant size, or a resized list read in the step")
    _unmasked(view)
    size = tf.reduce_max(tf.concat([tf.cast(ctx.stacked(1), tf.int32), [0]], 0))
    size = tf.maximum(size, _R.TensorListLength(input_handle=view.tensor))
    return view.again(_R.TensorListResize(input_handle=view.tensor, size=size),
                      _R.TensorListResize(input_handle=view.shapes, size=size))


def _at_rows(ctx):
    return tf.cast(ctx.stacked(1), tf.int32)


def convert_ragged_view_set_item(ctx):
    view, index = _view(ctx), _index(ctx)
    index = _within(ctx, view, index, index)
    padded, sizes = _item_of(ctx, view, 2)
    handle, shapes = view.pair()
    if ctx.attr("resize_if_index_out_of_bounds"):
        size = tf.maximum(_R.TensorListLength(input_handle=handle), index + 1)
        handle = _R.TensorListResize(input_handle=handle, size=size)
        shapes = _R.TensorListResize(input_handle=shapes, size=size)
    old_sizes = _R.TensorListGetItem(input_handle=shapes, index=index,
                                     element_shape=_sizes_element(view), element_dtype=tf.int32)
    # An item never set reads as zeros of its (zero) sizes.
    old = _R.TensorListGetItem(input_handle=handle, index=index,
                               element_shape=tf.concat([_whole(view),
                                                        handles.largest(old_sizes, view.rank)], 0),
                               element_dtype=ctx.attr("element_dtype"))
    padded, sizes = _merge(view, padded, sizes, old, old_sizes)
    return view.again(_R.TensorListSetItem(input_handle=handle, index=index, item=padded),
                      _R.TensorListSetItem(input_handle=shapes, index=index, item=sizes))


def convert_ragged_view_get_item(ctx):
    view, index = _view(ctx), _index(ctx)
    index = _within(ctx, view, index, index)
    sizes = _R.TensorListGetItem(input_handle=view.shapes, index=index,
                                 element_shape=_sizes_element(view), element_dtype=tf.int32)
    padded = _R.TensorListGetItem(
        input_handle=view.tensor, index=index, element_dtype=ctx.attr("element_dtype"),
        element_shape=tf.concat([_whole(view), handles.largest(sizes, view.rank)], 0))
    return read_item(ctx, _rows(view, padded), _rows(view, sizes), view.rank, ctx.op.outputs[0])


def convert_ragged_view_pop_back(ctx):
    view = _view(ctx)
    # (the element shape shapes only an unset item, and these lists' items are all set:
    # it may differ per iteration, as a gradient loop that pops a ragged item gives it)
    handle, padded = _R.TensorListPopBack(input_handle=view.tensor, element_shape=-1,
                                          element_dtype=ctx.attr("element_dtype"))
    shapes, sizes = _R.TensorListPopBack(input_handle=view.shapes,
                                         element_shape=_sizes_element(view),
                                         element_dtype=tf.int32)
    return [view.again(handle, shapes),
            read_item(ctx, _rows(view, padded), _rows(view, sizes), view.rank, ctx.op.outputs[1])]


def convert_ragged_view_add_lists(ctx):
    """AddN of a list a loop over some rows sees and lists of those rows (a gradient
    loop adds the gradient of a read, a list it made for its rows, to the gradient of
    the list it carries): every list's items as whole elements, the others' scattered
    into the view's rows, padded to the largest and added; the sizes the largest."""
    views = [v for v in ctx.inputs if isinstance(v, RaggedListView)]
    if not views or ctx.op.outputs[0].dtype != tf.variant:
        raise Decline("no list of ragged items seen by a loop over some iterations")
    view, dtype = _unmasked(views[0]), handles.summed_dtype(ctx)
    if dtype is None:
        raise Decline("the lists' element dtype is not known here")
    wholes = []
    for value in ctx.inputs:
        if isinstance(value, RaggedListView):
            if value.rows is not view.rows or value.rank != view.rank:
                raise Decline("lists seen by different loops")
            wholes.append(stack_items(_N(view.width, ctx.nested), RaggedList(
                tensor=value.tensor, shapes=value.shapes, rank=value.rank), dtype))
            continue
        items, sizes = stack_items(ctx, as_ragged_list(ctx, value, view.rank, dtype), dtype)
        at = view.rows[:, None]
        wholes.append(tuple(
            tf.transpose(_scatter(tf.zeros(tf.concat([_whole(view), tf.shape(x)[:1],
                                                      tf.shape(x)[2:]], 0), x.dtype),
                                  at, swap01(x)), [1, 0] + list(range(2, x.shape.rank)))
            for x in (items, sizes)))
    count = tf.reduce_max(tf.stack([tf.shape(items)[0] for items, _ in wholes]))
    dims = tf.reduce_max(tf.stack([tf.shape(items, out_type=tf.int32)[2:]
                                   for items, _ in wholes]), 0)
    lead = tf.stack([count, tf.cast(view.width, tf.int32)])
    items = tf.add_n([_pad_to(x, tf.concat([lead, dims], 0)) for x, _ in wholes])
    sizes = tf.reduce_max(tf.stack([_pad_to(s, tf.concat([lead, [view.rank]], 0))
                                    for _, s in wholes]), 0)
    return view.again(_R.TensorListFromTensor(tensor=items, element_shape=-1),
                      _R.TensorListFromTensor(tensor=sizes, element_shape=_sizes_element(view)))


def convert_ragged_view_length(ctx):
    return loop_views.view_length(ctx, _view(ctx))


def convert_ragged_view_element_shape(ctx):
    """The element shape the list was made with (the same in every iteration, unless
    it was made with each iteration's own)."""
    view = _view(ctx)
    if view.element_shapes is not None:
        return Stacked(tensor=tf.cast(_rows(view, view.element_shapes), ctx.attr("shape_type")))
    shape = _R.TensorListElementShape(input_handle=view.tensor,
                                      shape_type=ctx.attr("shape_type"))
    return Invariant(tensor=loop_views.without_rows(shape))
