"""Tensor lists carried through a while loop whose trip count differs per iteration.

Such a loop converts its body for the still-active iterations only (or, masked, for
all of them with a mask), but a tensor list has no rows to gather: it stays the
whole loop's list (elements ``[N, ...]``) and enters the body as a ``ListView`` that
says which rows the body's iterations are (``rows``) or which rows' writes count
(``mask``). The list ops a loop body uses on it are converted here: reads gather the
rows, writes scatter them into a whole element. Pushes land at the same position for
every active row (they all started together), so a row's items stay in order; the
loop converter right-aligns each row's items afterwards, so that the gradient loop
(which pops) finds every row's last item at the end. A conditional's intermediates
(split optionals, which a gradient loop pops for the gradient conditional) are pushed
as optionals of whole components, moved component by component when right-aligned;
a tensor list whose length and element shape alone a gradient reads back (a tf.cond's
record of the array it reads) is pushed as the whole list, and popped as a view of it
(``records``). A gradient loop's AddN of a read's gradient (a list of the rows) adds
into the view.
Other converters get the view materialized: a plain stacked list of the rows being
converted (a copy, for reading).
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tensorflow.python.ops import handle_data_util

from pfor_core.extend import ConversionError, Decline, Invariant, Ragged, Stacked, View
from pfor_controlflow.lists import handles
from pfor_controlflow.lists.with_lengths import ListWithLengths, within_rows
from pfor_controlflow.split_optional import (SplitOptional, every, held, made_parts,
                                             read_parts, rebuilt, same_parts, stacked_shape)

_R = tf.raw_ops


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ListView(View):
    """A stacked list of ``width`` rows seen by a conversion of some of them: ``tensor``
    is the whole loop's list handle (elements ``[width, ...]``)."""

    width: tf.Tensor
    rows: tf.Tensor | None = None  # int32 [m]: the rows being converted
    mask: tf.Tensor | None = None  # bool [width]: the rows whose writes count
    # Whether the rows still running hold as many items as the whole list: it came in
    # the same for all rows and the loop only writes or grows it (all running rows
    # have run the same steps, and the longest).
    aligned: bool = False
    # Items whose shape differs between iterations are pushed padded (as a masked loop
    # that a nested pfor emitted runs them: trip_counts.run_masked).
    padded_items: bool = False
    # int32 [width]: each row's own number of items where rows hold their own
    # (with_lengths.py: a list of per-iteration size), which reads and writes check.
    lengths: tf.Tensor | None = None
    # int32 [width]: the row whose items each row reads, where a masked loop has its
    # rows that do not run compute on a running row's values (total_ops.stand_ins).
    reads: tf.Tensor | None = None
    # The rows are those that take one branch of a conditional whose predicate differs
    # per iteration: growing the list for them alone is refused (rows would then hold
    # different numbers of items, which the list does not record).
    partial: bool = False
    element_dtype: tf.DType | None = None  # where the handle does not record it
    # The list holds, per step, the whole handle of a list the loop carries, whose
    # length and element shape alone are read back (with_lengths.ListWithLengths.records);
    # ``held_lengths``: that list's rows' own lengths (None: all as long as the list).
    records: bool = False
    held_lengths: tf.Tensor | None = None

    def again(self, handle) -> "ListView":
        return dataclasses.replace(self, tensor=handle)

    def materialize(self):
        """A plain stacked list of the rows being converted (all rows of a masked view);
        a Decline when the list's element dtype is not known here."""
        if self.rows is None:
            if self.lengths is not None:
                return ListWithLengths(tensor=self.tensor, lengths=self.lengths)
            return Stacked(tensor=self.tensor)
        dtype = self.element_dtype or _element_dtype(self.tensor)
        if dtype is None:
            return Decline("a tensor list of a loop with per-iteration trip counts whose "
                           "element type is unknown has no stacked form here")
        handle = list_rows(self.tensor, self.rows, dtype)
        if self.lengths is not None:
            return ListWithLengths(tensor=handle, lengths=tf.gather(self.lengths, self.rows))
        return Stacked(tensor=handle)


def list_rows(handle, rows, dtype):
    """A stacked list of the rows ``rows`` of the stacked list ``handle`` (a copy)."""
    shape = _R.TensorListElementShape(input_handle=handle, shape_type=tf.int32)
    whole = _R.TensorListStack(input_handle=handle, element_shape=shape, element_dtype=dtype)
    return _R.TensorListFromTensor(tensor=tf.gather(whole, rows, axis=1),
                                   element_shape=tf.constant(-1, tf.int32))


def grows_only(op) -> bool:
    """Whether ``op`` is a TensorListResize to ``maximum(its length, ...)`` (what a
    converted write past the end emits)."""
    if op.type != "TensorListResize" or op.inputs[1].op.type != "Maximum":
        return False
    return any(t.op.type == "TensorListLength" and t.op.inputs[0] is op.inputs[0]
               for t in op.inputs[1].op.inputs)


def _element_dtype(handle):
    """The element dtype a list handle's shape inference recorded, or None."""
    try:
        data = handle_data_util.get_resource_handle_data(handle)
    except Exception:  # pylint: disable=broad-except
        return None
    if not data.is_set or not data.shape_and_type:
        return None
    return tf.as_dtype(data.shape_and_type[0].dtype)


def _view(ctx):
    value = ctx.inputs[0]
    return value if isinstance(value, ListView) else None


def _whole_shape(view, item: tf.Tensor) -> tf.Tensor:
    """``[width] + per-row shape`` of a stacked item."""
    return tf.concat([tf.reshape(view.width, [1]), tf.shape(item)[1:]], 0)


def _rows_of(view, element: tf.Tensor) -> tf.Tensor:
    """The rows of a whole element that the view's rows read."""
    rows = view.rows if view.rows is not None else view.reads
    return element if rows is None else tf.gather(element, rows)


def _merge(view, item: tf.Tensor, old: tf.Tensor | None) -> tf.Tensor:
    """A whole element holding ``item`` in the view's rows and ``old`` (or zeros)
    elsewhere."""
    if view.rows is not None:
        base = tf.zeros(_whole_shape(view, item), item.dtype) if old is None else old
        return tf.tensor_scatter_nd_update(base, view.rows[:, None], item)
    if old is None:
        return item  # masked: rows that do not count are cut off after the loop
    mask = tf.reshape(view.mask, tf.concat([tf.shape(view.mask),
                                            tf.ones_like(tf.shape(item))[1:]], 0))
    return tf.where(mask, item, old)


def _grown(ctx):
    """A refusal for growing a list in one branch of a per-iteration conditional."""
    return ctx.decline(
        "it grows a tensor list in a branch of a conditional whose predicate differs per "
        "iteration, so iterations would hold lists of different lengths; give the "
        "TensorArray a fixed size that covers every write (size=..., dynamic_size=False), "
        "or write outside the conditional")


def _checked(ctx, view, index, tensor):
    """``tensor``, after a run-time check that ``index`` (one, or each converted row's)
    lies within the own items of every converted row whose writes count, where rows
    hold their own numbers of items (the loop raises past the end of its list)."""
    if view.lengths is None:
        return tensor
    lengths = _rows_of(view, view.lengths)
    if view.mask is not None:  # rows that do not run are not checked
        lengths = tf.where(view.mask, lengths, tf.int32.max)
    return within_rows(ctx, index + tf.zeros_like(lengths), lengths, tensor)


def convert_push_back(ctx):
    view = _view(ctx)
    if view is None:
        return ctx.decline("not a list seen by a loop over some iterations")
    item = ctx.inputs[1]
    if view.records and isinstance(item, ListView) and item.width is view.width:
        return view.again(_R.TensorListPushBack(input_handle=view.tensor, tensor=item.tensor))
    if item.dtype == tf.variant:
        return _push_optional(ctx, view, item)
    if view.partial:
        return _grown(ctx)
    if isinstance(item, Ragged):
        if not view.padded_items:
            return ctx.decline("an item whose shape differs between iterations")
        item = Stacked(tensor=item.padded)  # (zero padding: see trip_counts.run_masked)
    whole = _merge(view, ctx.stack(item), None)
    return view.again(_R.TensorListPushBack(input_handle=view.tensor, tensor=whole))


def _push_optional(ctx, view, item):
    """A push of a conditional's intermediates (a split optional of the rows being
    converted): one optional of whole components, zeros in the rows not converted."""
    if not isinstance(item, SplitOptional) or any(
            d == tf.variant for d, _ in every(item.parts)) or not same_parts(
                made_parts(ctx.op.inputs[1]), item.parts):  # (right-aligned by those)
        return ctx.decline(
            "a tensor list, or an optional holding one, pushed in a loop with "
            "per-iteration trip counts (a gradient's record of a tf.cond that reads a "
            "TensorArray: read it outside the conditional, e.g. tf.where(j >= 0, "
            "ta.read(tf.maximum(j, 0)), zeros))")
    if view.partial:
        return _grown(ctx)
    whole = rebuilt([_merge(view, c, None) for c in held(item.tensor, item.parts)])
    return view.again(_R.TensorListPushBack(input_handle=view.tensor, tensor=whole))


def convert_pop_back(ctx):
    view = _view(ctx)
    if view is None or ctx.inputs[1].is_stacked:
        return ctx.decline("not a list seen by a loop over some iterations")
    handle, element = _R.TensorListPopBack(
        input_handle=view.tensor, element_shape=tf.constant(-1, tf.int32),
        element_dtype=ctx.attr("element_dtype"))
    if view.records:  # a recorded list, for its length and element shape
        return [view.again(handle), ListView(
            tensor=element, width=view.width, rows=view.rows, mask=view.mask,
            reads=view.reads, lengths=view.held_lengths)]
    parts = read_parts(ctx.op.outputs[1]) if ctx.attr("element_dtype") == tf.variant else None
    if parts is not None:  # a conditional's intermediates, for the gradient conditional
        return [view.again(handle), SplitOptional(tensor=rebuilt(
            [_rows_of(view, c) for c in held(element, parts)]), parts=parts)]
    return [view.again(handle), Stacked(tensor=_rows_of(view, element))]


def convert_get_item(ctx):
    view = _view(ctx)
    if view is None or any(v.is_stacked for v in ctx.inputs[1:]):
        return ctx.decline("not a list seen by a loop over some iterations at one index")
    # The element shape given (rows prepended) makes an unset element read as zeros.
    shape = ctx.inputs[2].tensor
    if shape.shape.rank == 1:
        shape = tf.concat([tf.reshape(tf.cast(view.width, shape.dtype), [1]), shape], 0)
    index = _checked(ctx, view, ctx.inputs[1].tensor, ctx.inputs[1].tensor)
    element = _R.TensorListGetItem(input_handle=view.tensor, index=index,
                                   element_shape=shape, element_dtype=ctx.attr("element_dtype"))
    return Stacked(tensor=_rows_of(view, element))


def convert_set_item(ctx):
    view = _view(ctx)
    if view is None or ctx.inputs[1].is_stacked:
        return ctx.decline("not a list seen by a loop over some iterations at one index")
    index, item = ctx.inputs[1].tensor, ctx.stacked(2)
    handle = view.tensor
    if view.lengths is not None:
        if ctx.attr("resize_if_index_out_of_bounds"):
            return ctx.decline("a write that grows a list whose rows hold their own "
                               "numbers of items")
        index = _checked(ctx, view, index, index)
    shape = _whole_shape(view, item) if view.rows is not None else tf.shape(item)
    if ctx.attr("resize_if_index_out_of_bounds"):
        if view.partial:
            return _grown(ctx)
        length = _R.TensorListLength(input_handle=handle)
        handle = _R.TensorListResize(input_handle=handle,
                                     size=tf.maximum(length, index + 1))
    # An element never set reads as zeros of the given (whole) shape.
    old = _R.TensorListGetItem(input_handle=handle, index=index, element_shape=shape,
                               element_dtype=ctx.attr("element_dtype"))
    whole = _merge(view, item, old)
    return view.again(_R.TensorListSetItem(input_handle=handle, index=index, item=whole))


def _element_shape(view, row_shape) -> tf.Tensor:
    """``[width] + row_shape``: one whole element's shape (unset items read as zeros)."""
    return tf.concat([tf.reshape(tf.cast(view.width, tf.int32), [1]),
                      tf.cast(row_shape, tf.int32)], 0)


def _all_rows(view) -> tf.Tensor:
    return view.rows if view.rows is not None else tf.range(tf.cast(view.width, tf.int32))


def convert_get_item_at_rows(ctx):
    """Each converted row reads its own position (a gradient loop's per-row step):
    the elements at those positions, each row's own row of its element."""
    view = _view(ctx)
    if view is None or not ctx.inputs[1].is_stacked or ctx.inputs[2].is_stacked:
        return ctx.decline("not a list seen by a loop over some iterations, read per row")
    positions = tf.cast(ctx.stacked(1), tf.int32)
    positions = _checked(ctx, view, positions, positions)
    shape = ctx.inputs[2].tensor
    if shape.shape.rank != 1:
        return ctx.decline("an item of unknown rank")
    elements = _R.TensorListGather(input_handle=view.tensor, indices=positions,
                                   element_shape=_element_shape(view, shape),
                                   element_dtype=ctx.attr("element_dtype"))  # [m, width, ...]
    reads = view.reads if view.reads is not None else _all_rows(view)
    return Stacked(tensor=tf.gather(elements, reads, axis=1, batch_dims=1))


def convert_set_item_at_rows(ctx):
    """Each converted row writes its own position (a gradient loop's per-row step):
    the elements at the positions written, each row's item put in its row, scattered
    back (each position once)."""
    view = _view(ctx)
    if view is None or not ctx.inputs[1].is_stacked or ctx.attr(
            "resize_if_index_out_of_bounds"):
        return ctx.decline("not a list seen by a loop over some iterations, written per "
                           "row in place")
    positions = tf.cast(ctx.stacked(1), tf.int32)
    positions = _checked(ctx, view, positions, positions)
    item, rows = ctx.stacked(2), _all_rows(view)
    if item.shape.rank is None:
        return ctx.decline("an item of unknown rank")
    if view.mask is not None:  # rows whose writes do not count write nowhere
        keep = tf.cast(tf.where(view.mask)[:, 0], tf.int32)
        positions, item, rows = (tf.gather(t, keep) for t in (positions, item, rows))
    written, slot = tf.unique(positions)
    elements = _R.TensorListGather(input_handle=view.tensor, indices=written,
                                   element_shape=_element_shape(view, tf.shape(item)[1:]),
                                   element_dtype=ctx.attr("element_dtype"))  # [k, width, ...]
    elements = tf.tensor_scatter_nd_update(elements, tf.stack([slot, rows], 1), item)
    return view.again(_R.TensorListScatterIntoExistingList(
        input_handle=view.tensor, tensor=elements, indices=written))


def convert_add_lists(ctx):
    """AddN of the list a loop over some rows sees and lists of those rows (a gradient
    loop adds the gradient of a read, a list it made for its rows, to the gradient of
    the list it carries): a list each row wrote one item into adds that item at its
    position; the other lists' items are put in the view's rows of whole elements
    (zeros past their ends: lists add up only where rows' lengths agree, so a row's
    items are all there) and added. The view keeps its length."""
    views = [v for v in ctx.inputs if isinstance(v, ListView)]
    if not views or ctx.op.outputs[0].dtype != tf.variant:
        return ctx.decline("no list seen by a loop over some iterations")
    view, dtype = views[0], handles.summed_dtype(ctx)
    if dtype is None:
        return ctx.decline("the lists' element dtype is not known here")
    if any(v.rows is not view.rows or v.mask is not view.mask for v in views):
        return ctx.decline("lists seen by different loops")
    if any((isinstance(v, View) and not isinstance(v, ListView)) or not v.is_stacked
           or (isinstance(v, ListWithLengths) and v.right_aligned) for v in ctx.inputs):
        return ctx.decline("a list of another special layout")
    first = next(j for j, v in enumerate(ctx.inputs) if v is view)
    others = ctx.inputs[:first] + ctx.inputs[first + 1:]
    sparse = [v for v in others if isinstance(v, ListWithLengths) and v.written is not None]
    dense = [v for v in others if not any(v is s for s in sparse)]
    handle = _add_dense(view, dense, dtype) if dense else view.tensor
    for value in sparse:  # one item per row: added where it is
        handle = _add_items(view, handle, *value.written)
    return view.again(handle)


def convert_zeros_like(ctx):
    """The zeros of a list the loop converts some rows of (a gradient branch's zeros for
    a list it does not read): a new list of the view's rows, as long, all unset (read
    as zeros), each row its own length."""
    view = _view(ctx)
    if view is None:
        return ctx.decline("not a list seen by a loop over some iterations")
    dtype = view.element_dtype or handles.dtype_of(view.tensor, ctx.op.outputs[0])
    if dtype is None:
        return ctx.decline("the list's element dtype is not known here")
    rows = view.rows
    count = tf.size(rows) if rows is not None else tf.cast(view.width, tf.int32)
    whole = _R.TensorListElementShape(input_handle=view.tensor, shape_type=tf.int32)
    # (a handle popped from a list of lists has no static element shape: its rank is
    # known when running; -1, an unknown rank, stays so)
    shape = tf.cond(tf.equal(tf.rank(whole), 1),
                    lambda: tf.concat([[count], tf.reshape(whole, [-1])[1:]], 0),
                    lambda: tf.constant(-1))
    handle = _R.TensorListReserve(element_shape=shape, element_dtype=dtype,
                                  num_elements=_R.TensorListLength(input_handle=view.tensor))
    lengths = view.lengths
    if lengths is not None:
        return ListWithLengths(tensor=handle, lengths=lengths if rows is None
                               else tf.gather(lengths, rows))
    return Stacked(tensor=handle)


def _add_items(view, handle, positions, items):
    """The list ``handle`` (the view's) with each converted row's item added at its own
    position (the elements at those positions gathered, added to, scattered back)."""
    positions, rows = tf.cast(positions, tf.int32), _all_rows(view)
    if view.mask is not None:  # rows whose writes do not count add nothing
        keep = tf.cast(tf.where(view.mask)[:, 0], tf.int32)
        positions, items, rows = (tf.gather(t, keep) for t in (positions, items, rows))
    written, slot = tf.unique(positions)
    elements = _R.TensorListGather(input_handle=handle, indices=written,
                                   element_shape=_element_shape(view, tf.shape(items)[1:]),
                                   element_dtype=items.dtype)  # [k, width, ...]
    elements = tf.tensor_scatter_nd_add(elements, tf.stack([slot, rows], 1), items)
    return _R.TensorListScatterIntoExistingList(input_handle=handle, tensor=elements,
                                                indices=written)


def _add_dense(view, others, dtype):
    """The view's list plus the lists ``others``, item by item (whole elements)."""
    whole = items_of(view.tensor, dtype)  # [L, width, ...]
    total = whole
    for value in others:
        items = items_of(value.tensor, dtype)
        if not isinstance(value, ListView) and view.rows is not None:  # [L', m, ...]
            rows_first = swap01(items)
            items = swap01(tf.scatter_nd(view.rows[:, None], rows_first,
                                         _whole_shape(view, rows_first)))
        pad = tf.shape(whole)[0] - tf.shape(items)[0]
        total += tf.pad(items, tf.concat([[[0, pad]], tf.zeros([items.shape.rank - 1, 2],
                                                               tf.int32)], 0))
    return _R.TensorListFromTensor(
        tensor=total, element_shape=_R.TensorListElementShape(input_handle=view.tensor,
                                                               shape_type=tf.int32))


def items_of(handle, dtype) -> tf.Tensor:
    """All items of a stacked list (unset ones as zeros of its element shape)."""
    shape = _R.TensorListElementShape(input_handle=handle, shape_type=tf.int32)
    return _R.TensorListStack(input_handle=handle, element_shape=shape, element_dtype=dtype)


def swap01(x):
    """Swap the first two axes: ``[T, n, ...] <-> [n, T, ...]`` (also of a rank known
    only when running)."""
    if x.shape.rank is None:
        return tf.transpose(x, tf.concat([[1, 0], tf.range(2, tf.rank(x))], 0))
    return tf.transpose(x, [1, 0] + list(range(2, x.shape.rank)))


def convert_resize(ctx):
    """A resize that only grows the list (what a converted write past the end emits):
    every row still running grows to the same size, the others keep their items."""
    view = _view(ctx)
    if view is None or ctx.inputs[1].is_stacked or not grows_only(ctx.op):
        return ctx.decline("not a list seen by a loop over some iterations, grown")
    if view.partial:
        return _grown(ctx)
    return view.again(_R.TensorListResize(input_handle=view.tensor, size=ctx.inputs[1].tensor))


def convert_element_shape(ctx):
    view = _view(ctx)
    if view is None:
        return ctx.decline("not a list seen by a loop over some iterations")
    shape = _R.TensorListElementShape(input_handle=view.tensor,
                                      shape_type=ctx.attr("shape_type"))
    return Invariant(tensor=without_rows(shape))


def without_rows(shape: tf.Tensor) -> tf.Tensor:
    """A stacked list's element shape without its leading row count; an unknown one
    (a scalar -1) stays unknown."""
    if shape.shape.rank == 1:
        return shape[1:]
    if shape.shape.rank == 0:
        return shape
    return tf.cond(tf.equal(tf.rank(shape), 0), lambda: shape,
                   lambda: tf.reshape(shape, [tf.size(shape)])[1:])


def convert_length(ctx):
    view = _view(ctx)
    if view is None:
        return ctx.decline("not a list seen by a loop over some iterations")
    return view_length(ctx, view)


def view_length(ctx, view):
    """The length of a list a loop over some iterations sees: one for all rows when
    their items are aligned, each row's own where they hold their own, else a clear
    error (each row's differs)."""
    lengths = getattr(view, "lengths", None)
    if lengths is not None:
        return Stacked(tensor=_rows_of(view, lengths))
    if view.aligned:
        return Invariant(tensor=_R.TensorListLength(input_handle=view.tensor))
    raise ConversionError(
        f"pfor: {ctx.op_type} '{ctx.op.name}' reads the length of a tensor list inside a "
        "while loop whose trip count differs per iteration; the lengths differ per "
        "iteration there. Keep a counter as a loop variable instead.")


def right_align(handle, lengths, dtype, parts=None) -> tf.Tensor:
    """The list with each row's ``lengths[j]`` items moved to the end (zeros before);
    ``parts``: those of the split optionals it holds (a conditional's intermediates),
    whose components move."""
    if parts is not None:
        return _right_align_optionals(handle, lengths, parts)
    shape = _R.TensorListElementShape(input_handle=handle, shape_type=tf.int32)
    return _R.TensorListFromTensor(tensor=right_align_items(items_of(handle, dtype), lengths),
                                   element_shape=shape)


def _right_align_optionals(handle, lengths, parts) -> tf.Tensor:
    spec = every(parts)
    if not spec:
        return handle  # (no branch has intermediates: every item is empty)
    items = _R.TensorListStack(input_handle=handle, element_shape=tf.constant([], tf.int32),
                               element_dtype=tf.variant)

    def moved():
        components = tf.map_fn(lambda o: held(o, parts), items, fn_output_signature=[
            tf.TensorSpec(stacked_shape(d, s), d) for d, s in spec])
        return tf.map_fn(rebuilt, [right_align_items(c, lengths) for c in components],
                         fn_output_signature=tf.TensorSpec([], tf.variant))
    items = tf.cond(tf.size(items) > 0, moved, lambda: items)
    return _R.TensorListFromTensor(tensor=items, element_shape=tf.constant([], tf.int32))


def right_align_items(whole, lengths) -> tf.Tensor:
    """The items ``whole`` (``[count, width, ...]``) with each row's ``lengths[j]``
    items moved to the end (zeros before)."""
    count, width = tf.shape(whole)[0], tf.shape(whole)[1]
    source = tf.range(count)[:, None] - (count - lengths)[None, :]  # [count, width]
    rows = tf.broadcast_to(tf.range(width)[None, :], tf.shape(source))
    moved = tf.gather_nd(whole, tf.stack([tf.maximum(source, 0), rows], -1))
    keep = tf.reshape(source >= 0, tf.concat([tf.shape(source),
                                              tf.ones_like(tf.shape(whole))[2:]], 0))
    return tf.where(keep, moved, tf.zeros_like(moved))
