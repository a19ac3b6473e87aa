"""Tensor-list converters (tf.TensorArray inside a loop body is a TensorList).

A stacked list keeps one scalar variant handle; every element carries the iteration
axis first (element shape ``[n, ...]``), and all iterations share the list length
(lock-step). So an op at an invariant position is the same list op on the stacked
handle, with ``n`` prepended to its per-iteration element-shape input, and only the
axis order of whole-list reads changes (Stack / Gather give ``[T, n, ...]``, swapped
to ``[n, T, ...]``). An invariant list meets a stacked value through ``stack_list``.

A stacked index (each iteration reads or writes its own position) stacks the list to
one tensor ``[T, n, ...]`` and gathers / scatters at ``(index[j], j)``: O(T) work per
op, but exact. Per-iteration list lengths or element shapes (a stacked size or
element-shape input) would make the list ragged: those decline or, for ops creating a
list, raise (the fallback loop cannot produce a stacked list).

A loop with per-iteration trip counts that grows a list leaves each row its own number
of items: a ``ListWithLengths``. Reads check their indices against the row's length and
whole-list reads check that all rows agree, as the loop would fail or give a
different shape otherwise; ops that would need per-row positions decline.
"""

from __future__ import annotations

import functools

import tensorflow as tf
from tensorflow.python.framework import ops

from pfor_core.extend import ConversionError, Decline, Invariant, Ragged, Stacked, shapes
from pfor_controlflow.lists import handles
from pfor_controlflow.lists.loop_views import without_rows
from pfor_controlflow.lists.with_lengths import (ListWithLengths, known_lengths, list_sizes,
                                                 own_positions, same_lengths, then)
from pfor_controlflow.split_optional import SplitOptional

_R = tf.raw_ops


def _declining(fn=None, *, rows_own_lengths=False, optionals=False):
    """Decline on special layouts (``ListWithLengths`` too, unless ``rows_own_lengths``,
    and a conditional's split optionals, unless ``optionals``: the converter then
    handles them)."""
    if fn is None:
        return functools.partial(_declining, rows_own_lengths=rows_own_lengths,
                                 optionals=optionals)
    plain = ((Stacked, Invariant) + ((ListWithLengths,) if rows_own_lengths else ())
             + ((SplitOptional,) if optionals else ()))

    @functools.wraps(fn)
    def convert(ctx):
        if any(type(v) not in plain for v in ctx.inputs):
            # e.g. a list seen by a loop over some iterations only (a subclass of
            # Stacked whose rows are not this conversion's): not a plain list.
            return ctx.decline("an input is a special layout, not a plain list")
        return fn(ctx)  # (a Decline its helpers raise declines too)
    return convert


# -- public helpers (the While / If converters use them) --------------------------------
def is_list(value) -> bool:
    """Whether a layout value (or tensor) is a tensor list handle."""
    return value.dtype == tf.variant


def stack_list(ctx, value, element_dtype=None, element_shape=None,
               inner_dtype=None) -> tf.Tensor:
    """The stacked-list handle for a list layout value.

    A stacked list is returned as it is. An invariant list is made again with every
    element broadcast to ``[n, ...]`` and its element shape with ``n`` prepended:
    - made right here by TensorListReserve / EmptyTensorList: the same op with the new
      element shape (unset elements stay unset, so reads of them behave as in the loop);
      ``element_shape`` (static, per iteration) stands in for an unknown one, which XLA
      needs to set the list up before a loop reads it;
    - made by TensorListFromTensor: from the broadcast tensor;
    - any other list: element by element in a loop (elements may differ in shape). An
      unset element then reads as zeros shaped like the list's element shape, or like
      the set elements, which must then agree (as TensorListGetItem requires). A list
      of lists likewise, each inner list stacked so (``inner_dtype``: their element
      dtype, which no handle tells).
    """
    if value.is_stacked:
        return value.tensor
    handle = value.tensor
    producer = None if isinstance(handle, ops.EagerTensor) else handle.op
    dtype = element_dtype or handles.element_dtype(handle)
    kind = producer.type if producer is not None else None
    if kind in ("TensorListReserve", "EmptyTensorList"):
        shape, size = producer.inputs
        if element_shape is not None and not _static_shape(shape).is_fully_defined():
            shape = tf.constant(element_shape.as_list(), tf.int32)
        size_arg = "num_elements" if kind == "TensorListReserve" else "max_num_elements"
        if dtype == tf.variant:
            # A list of lists (its elements are stacked lists, scalar handles) or of
            # ragged encodings (stacked as [n]): the element shape is left unknown.
            return getattr(_R, kind)(element_shape=tf.constant(-1, shape.dtype),
                                     element_dtype=dtype, **{size_arg: size})
        return getattr(_R, kind)(element_shape=handles.prepend_n(ctx, shape), element_dtype=dtype,
                                 **{size_arg: size})
    if dtype == tf.variant:
        if inner_dtype is None:
            raise ValueError("stack_list: a list of tensor lists with elements already set, "
                             "whose inner lists' element dtype is unknown")
        return _broadcast_each(ctx, handle, dtype, inner_dtype)
    if kind == "TensorListFromTensor":
        tensor, shape = producer.inputs
        return _R.TensorListFromTensor(tensor=_broadcast_second(ctx, tensor),
                                       element_shape=handles.prepend_n(ctx, shape))
    return _broadcast_each(ctx, handle, dtype)


def _static_shape(shape: tf.Tensor) -> tf.TensorShape:
    """The shape an element-shape input gives (-1 entries and -1 alone: unknown)."""
    value = tf.get_static_value(shape)
    if value is None or value.ndim == 0:
        return tf.TensorShape(None)
    return tf.TensorShape([d if d >= 0 else None for d in value.tolist()])


def _broadcast_second(ctx, tensor):
    """[T, ...] -> [T, n, ...], each element repeated n times."""
    dims = tf.shape(tensor)
    n = tf.reshape(tf.cast(ctx.n, tf.int32), [1])
    return tf.broadcast_to(tf.expand_dims(tensor, 1), tf.concat([dims[:1], n, dims[1:]], 0))


def _broadcast_each(ctx, handle, dtype, inner_dtype=None):
    """Every element of the list broadcast to ``[n, ...]``; for a list of lists
    (``inner_dtype`` given), every inner list stacked so."""
    length = _R.TensorListLength(input_handle=handle)
    shape = _R.TensorListElementShape(input_handle=handle, shape_type=tf.int32)
    if dtype == tf.variant:
        shape = tf.constant(-1, tf.int32)  # the elements are lists (scalar handles)
    else:
        shape = handles.prepend_n(ctx, shape)
    out = _R.TensorListReserve(element_shape=shape, num_elements=length, element_dtype=dtype)

    def body(t, out):
        item = _R.TensorListGetItem(input_handle=handle, index=t, element_shape=-1,
                                    element_dtype=dtype)
        if dtype == tf.variant:
            whole = _broadcast_each(ctx, item, inner_dtype)
        else:
            whole = tf.broadcast_to(item[None], tf.concat(
                [tf.reshape(tf.cast(ctx.n, tf.int32), [1]), tf.shape(item)], 0))
        return t + 1, _R.TensorListSetItem(input_handle=out, index=t, item=whole)

    return tf.while_loop(lambda t, _: t < length, body, (tf.constant(0), out))[1]


# -- shape helpers ----------------------------------------------------------------------


def _swap01(x: tf.Tensor) -> tf.Tensor:
    """Swap the first two axes: [T, n, ...] <-> [n, T, ...]."""
    if x.dtype == tf.variant:  # no variant Transpose kernel on CPU: a gather of rows
        dims = tf.shape(x)
        order = tf.reshape(tf.transpose(tf.reshape(tf.range(dims[0] * dims[1]), dims[:2])), [-1])
        rows = tf.reshape(x, tf.concat([[-1], dims[2:]], 0))
        return tf.reshape(tf.gather(rows, order), tf.concat([dims[1:2], dims[:1], dims[2:]], 0))
    rank = x.shape.rank
    if rank is not None:
        return tf.transpose(x, [1, 0] + list(range(2, rank)))
    return tf.transpose(x, tf.concat([[1, 0], tf.range(2, tf.rank(x))], 0))


def _invariant_input(ctx, k: int, what: str) -> tf.Tensor:
    """Input ``k`` (a size or element shape), which must be the same in every iteration.

    An op that makes a list from a per-iteration one raises: its lists would differ in
    length or element shape, and the fallback loop cannot make a stacked list either.
    """
    value = ctx.inputs[k]
    if not value.is_stacked:
        return value.tensor
    if any(t.dtype == tf.variant for t in ctx.op.outputs):
        raise ConversionError(
            f"pfor: {ctx.op_type} '{ctx.op.name}' makes a tensor list with a per-iteration "
            f"{what}: iterations would hold lists of different lengths or element shapes, "
            "which pfor does not support. Make the list's size and element shape the same "
            "in every iteration (pad to a fixed size).")
    raise Decline(f"per-iteration {what}")


def _stacked_out(ctx, tensor, k: int = 0) -> Stacked:
    """A stacked output, with the body op's static per-iteration shape."""
    tensor.set_shape(tensor.shape.merge_with(
        ctx.stacked_shape(ctx.output_shapes[k])))
    return Stacked(tensor=tensor)


def _stack_items(ctx, handle, element_shape) -> tf.Tensor:
    """All elements of a stacked list as one tensor [T, n, ...]."""
    return _R.TensorListStack(input_handle=handle, element_shape=element_shape,
                              element_dtype=ctx.attr("element_dtype"))


def _row_ids(ctx, like: tf.Tensor) -> tf.Tensor:
    """Iteration number j at every position of ``like`` ([n] or [n, k])."""
    rows = tf.range(ctx.n, dtype=like.dtype)
    if like.shape.rank == 1:
        return rows
    return tf.broadcast_to(rows[:, None], tf.shape(like))


def _pairs(ctx, positions):
    """Indices (positions[j, ...], j) into [T, n, ...]."""
    return tf.stack([positions, _row_ids(ctx, positions)], -1)


def _take_own(items, positions):
    """Row j of ``positions`` ([n] or [n, k]) picks from iteration j's elements of
    ``items`` [T, n, ...]. (A batched gather: gather_nd refuses zero-size elements.)"""
    return tf.gather(_swap01(items), positions, batch_dims=1)


def _scatter(ctx, handle, positions, values, resize: bool):
    """Each iteration j writes ``values[j, m]`` at list position ``positions[j, m]``.

    ``positions`` is [n, k], ``values`` [n, k, ...]. With ``resize`` the list grows to
    cover the largest position, which must then be the same length for every iteration.
    """
    if values.shape.rank is None:
        raise Decline("values of unknown rank")
    positions = tf.cast(positions, tf.int32)
    if resize:
        length = _R.TensorListLength(input_handle=handle)
        wanted = tf.maximum(length, tf.reduce_max(positions, axis=1) + 1)  # [n]
        grown = tf.maximum(length, tf.reduce_max(wanted))
        check = tf.debugging.assert_equal(
            wanted, tf.fill(tf.shape(wanted), grown), message=(
                "pfor: iterations grow a tensor list to different lengths (a stacked "
                "write index past the end); pfor needs lists of one length."))
        with tf.control_dependencies([check]):
            handle = _R.TensorListResize(input_handle=handle, size=grown)
    if positions.shape[1] == 0:
        return handle  # no writes (ScatterIntoExistingList with no indices)
    d = shapes.dims(values, ctx.n)
    items = _stack_items(ctx, handle, shapes.shape_tensor(d[:1] + d[2:]))  # [T, n, ...]
    # Which write (m) lands at each (t, j), or -1: a scatter of small ints, then one
    # select (a scatter of the values themselves fails on zero-size elements).
    pairs = _pairs(ctx, positions)
    writer = tf.tensor_scatter_nd_update(
        tf.fill(tf.shape(items)[:2], -1), pairs,
        tf.broadcast_to(tf.range(tf.shape(positions)[1]), tf.shape(positions)))
    # (gather with batch_dims, not gather_nd, which refuses zero-size elements)
    landing = _swap01(tf.gather(values, tf.transpose(tf.maximum(writer, 0)), batch_dims=1))
    written = shapes.reshape(writer >= 0, shapes.dims(writer) + [1] * (len(d) - 2))
    items = tf.where(written, landing, items)
    return _R.TensorListFromTensor(
        tensor=items, element_shape=_R.TensorListElementShape(input_handle=handle,
                                                              shape_type=tf.int32))


def _unflatten(x: tf.Tensor, lead: list) -> tf.Tensor:
    """[prod(lead), ...] -> [*lead, ...]."""
    if x.shape.rank is not None:
        return shapes.reshape(x, lead + shapes.dims(x)[1:])
    return tf.reshape(x, tf.concat([shapes.shape_tensor(lead), tf.shape(x)[1:]], 0))


def _second_n(ctx, shape: tf.Tensor) -> tf.Tensor:
    """Per-iteration element shape -> that of elements [d0, n, ...] (unknown rank kept)."""
    if shape.shape.rank != 1:
        return tf.constant(-1, shape.dtype)
    n = tf.reshape(tf.cast(ctx.n, shape.dtype), [1])
    return tf.concat([shape[:1], n, shape[1:]], 0)


# -- lists whose rows hold their own numbers of items -----------------------------------
def _pop_own(ctx, shape):
    """PopBack of a right-aligned list: every row's last item is at the end."""
    value = ctx.inputs[0]
    if not value.right_aligned or ctx.attr("element_dtype") == tf.variant:
        raise Decline("a tensor list whose rows hold their own numbers of items, not "
                       "at the end of the list")
    handle = value.tensor
    lengths = value.lengths
    if lengths is not None:
        handle = then(tf.debugging.assert_positive(lengths, message=(
            f"pfor: {ctx.op_type} '{ctx.op.name}' pops from an empty tensor list")), handle)
        lengths = lengths - 1
    out, item = ctx.emit(handle, handles.prepend_n(ctx, shape))
    return [ListWithLengths(tensor=out, lengths=lengths, right_aligned=True),
            _stacked_out(ctx, item, 1)]


def _push_own(ctx):
    """PushBack onto a right-aligned list: every row's new item goes at the end."""
    value = ctx.inputs[0]
    if (not isinstance(value, ListWithLengths) or not value.right_aligned
            or ctx.attr("element_dtype") == tf.variant):
        raise Decline("a tensor list whose rows hold their own numbers of items, not "
                       "at the end of the list")
    out = ctx.emit(value.tensor, ctx.stacked(1))[0]
    lengths = None if value.lengths is None else value.lengths + 1
    return ListWithLengths(tensor=out, lengths=lengths, right_aligned=True)


# -- converters ---------------------------------------------------------------------------
@_declining
def convert_from_tensor(ctx):
    """tensor [n, T, ...] -> T elements [n, ...]."""
    shape = _invariant_input(ctx, 1, "element shape")
    tensor = ctx.stacked(0)
    return ctx.emit_stacked(_swap01(tensor), handles.prepend_n(ctx, shape))


@_declining(rows_own_lengths=True)
def convert_set_item(ctx):
    handle, index, _ = ctx.inputs
    resize = ctx.attr("resize_if_index_out_of_bounds")
    if isinstance(handle, ListWithLengths):
        return _set_own(ctx, handle, index, resize)
    handle = stack_list(ctx, handle, ctx.attr("element_dtype"))
    item = ctx.stacked(2)
    if not index.is_stacked:
        return ctx.emit_stacked(handle, index.tensor, item)
    return Stacked(tensor=_scatter(ctx, handle, index.tensor[:, None], item[:, None], resize))


def _set_own(ctx, value, index, resize):
    """A write into a list whose rows hold their own numbers of items (at their start):
    a position past a row's end raises as in the loop, or with ``resize`` grows that
    row's list (the stacked list grows to the longest)."""
    if value.right_aligned or ctx.attr("element_dtype") == tf.variant:
        raise Decline("a write into a list of lists, or one whose rows hold their "
                       "items at its end")
    lengths = known_lengths(ctx, value)
    positions = tf.cast(index.tensor, tf.int32)
    handle = value.tensor
    if resize:
        lengths = tf.maximum(lengths, positions + 1)
        longest = tf.reduce_max(tf.concat([lengths, [0]], 0))
        whole = _R.TensorListLength(input_handle=handle)
        handle = _R.TensorListResize(input_handle=handle, size=tf.maximum(whole, longest))
    else:
        index = own_positions(ctx, value, index)
    item = ctx.stacked(2)
    if not index.is_stacked:
        out = ctx.emit(handle, index.tensor, item)[0]
    else:  # a select, not a scatter: an outer pfor then meets elementwise ops only
        if item.shape.rank is None:
            raise Decline("an item of unknown rank")
        d = shapes.dims(item, ctx.n)
        items = _stack_items(ctx, handle, shapes.shape_tensor(d))  # [T, n, ...]
        count = _R.TensorListLength(input_handle=handle)
        hit = tf.equal(tf.expand_dims(tf.range(count), 1),
                       tf.expand_dims(tf.cast(index.tensor, tf.int32), 0))  # [T, n]
        for _ in d[1:]:
            hit = tf.expand_dims(hit, -1)
        out = _R.TensorListFromTensor(
            tensor=tf.where(hit, item[None], items),
            element_shape=_R.TensorListElementShape(input_handle=handle, shape_type=tf.int32))
        if not resize and _made_here(ctx.op.inputs[0]):
            return ListWithLengths(tensor=out, lengths=lengths, written=(index.tensor, item))
    return ListWithLengths(tensor=out, lengths=lengths)


def _made_here(handle) -> bool:
    """Whether the list ``handle`` is a new one of unset items (TensorListReserve)."""
    while handle.op.type == "Identity":
        handle = handle.op.inputs[0]
    return handle.op.type == "TensorListReserve"


@_declining(rows_own_lengths=True)
def convert_get_item(ctx):
    handle, index, _ = ctx.inputs
    shape = _invariant_input(ctx, 2, "element shape")
    index = own_positions(ctx, handle, index)
    rows = _rows_of_source(ctx, handle, index)
    if rows is not None:
        out = rows
    elif not handle.is_stacked:  # each iteration reads its own position of one list
        out = _R.TensorListGather(input_handle=handle.tensor, indices=index.tensor,
                                  element_shape=shape, element_dtype=ctx.attr("element_dtype"))
    elif not index.is_stacked:
        out = ctx.emit(handle.tensor, index.tensor, handles.prepend_n(ctx, shape))[0]
    else:
        items = _stack_items(ctx, handle.tensor, handles.prepend_n(ctx, shape))
        out = _take_own(items, index.tensor)
    return _stacked_out(ctx, out)


def _rows_of_source(ctx, handle, index):
    """Item i of an invariant list made from a tensor, read at the loop index in
    iteration i (``tf.map_fn``'s unstacked inputs): the tensor's first n rows, where
    they are known to be there (else None: a gather, which fails as the loop would)."""
    if handle.is_stacked or not ctx.is_loop_index(index):
        return None
    made = handle.tensor
    while made.op.type == "Identity":
        made = made.op.inputs[0]
    if made.op.type != "TensorListFromTensor" or tf.get_static_value(ctx.loop_start) != 0:
        return None
    source, n = made.op.inputs[0], ctx.n_static
    rows = source.shape[0] if source.shape.rank else None
    if n is None or rows is None or rows < n:
        return None
    return source if rows == n else source[:n]


@_declining(rows_own_lengths=True)
def convert_stack(ctx):
    shape = _invariant_input(ctx, 1, "element shape")
    value = ctx.inputs[0]
    if _ragged_rows(ctx, value):
        # Rows of their own numbers of items stack to values of their own lengths.
        items = _own_items(ctx, value, ctx.emit(value.tensor, handles.prepend_n(ctx, shape))[0])
        rank = ctx.output_shapes[0].rank
        return Ragged.from_stacked(items, [value.lengths] + [None] * (rank - 1))
    items = ctx.emit(same_lengths(ctx, value), handles.prepend_n(ctx, shape))[0]
    return _stacked_out(ctx, _swap01(items))


def _ragged_rows(ctx, value) -> bool:
    """Whether a whole-list read of ``value`` gives each row its own items: a list whose
    rows hold their own numbers of items, where the body does not know the number
    statically (else all rows must hold that many)."""
    out = ctx.output_shapes[0]
    return (isinstance(value, ListWithLengths) and value.lengths is not None
            and out.rank is not None and out[0] is None)


def _own_items(ctx, value, stacked) -> tf.Tensor:
    """The stacked items ``[T, n, ...]`` of a ``ListWithLengths`` as ``[n, T, ...]``,
    each row's own items first (pushes leave them at the end of the list, which an
    outer pfor keeps as long as its longest iteration's)."""
    items = _swap01(stacked)
    if not value.right_aligned:
        return items
    count = tf.shape(items)[1]
    source = tf.range(count)[None, :] + (count - tf.cast(value.lengths, tf.int32))[:, None]
    return tf.gather(items, tf.minimum(source, count - 1), batch_dims=1)


@_declining(rows_own_lengths=True)
def convert_gather(ctx):
    handle, indices, _ = ctx.inputs
    shape = _invariant_input(ctx, 2, "element shape")
    indices = own_positions(ctx, handle, indices)
    if not handle.is_stacked:  # one gather of all iterations' indices
        flat = shapes.merge_leading(indices.tensor, 2, ctx.n)
        values = ctx.emit(handle.tensor, flat, shape)[0]
        out = _unflatten(values, ctx.dims(indices))
    elif not indices.is_stacked:
        out = _swap01(ctx.emit(handle.tensor, indices.tensor, handles.prepend_n(ctx, shape))[0])
    else:
        items = _stack_items(ctx, handle.tensor, handles.prepend_n(ctx, shape))
        out = _take_own(items, indices.tensor)
    return _stacked_out(ctx, out)


@_declining
def convert_scatter_into_list(ctx):
    handle = stack_list(ctx, ctx.inputs[0], ctx.attr("element_dtype"))
    values, indices = ctx.stacked(1), ctx.inputs[2]
    if not indices.is_stacked:
        return ctx.emit_stacked(handle, _swap01(values), indices.tensor)
    return Stacked(tensor=_scatter(ctx, handle, indices.tensor, values, resize=True))


@_declining
def convert_scatter_new_list(ctx):
    """TensorListScatter(V2): a new list from scattered rows."""
    shape = _invariant_input(ctx, 2, "element shape")
    size = _invariant_input(ctx, 3, "list size") if len(ctx.inputs) > 3 else None
    values, indices = ctx.stacked(0), ctx.inputs[1]
    if not indices.is_stacked:
        rest = [] if size is None else [size]
        return ctx.emit_stacked(_swap01(values), indices.tensor,
                                handles.prepend_n(ctx, shape), *rest)
    base = _R.TensorListReserve(
        element_shape=handles.prepend_n(ctx, shape), element_dtype=ctx.attr("element_dtype"),
        num_elements=0 if size is None else tf.maximum(size, 0))
    return Stacked(tensor=_scatter(ctx, base, indices.tensor, values, resize=True))


@_declining(rows_own_lengths=True, optionals=True)
def convert_push_back(ctx):
    dtype = ctx.attr("element_dtype")
    if isinstance(ctx.inputs[0], ListWithLengths) or isinstance(ctx.inputs[1], ListWithLengths):
        return _push_own(ctx)
    try:
        handle = stack_list(ctx, ctx.inputs[0], dtype)
        if dtype == tf.variant and _is_optional(ctx.op.inputs[1]):
            # A conditional's intermediates, accumulated by a while loop: a stacked
            # optional is pushed as it is (its pops go to the gradient conditional).
            if not ctx.inputs[1].is_stacked:
                raise Decline("an optional the same in every iteration")
            return Stacked(tensor=ctx.emit(handle, ctx.inputs[1].tensor)[0])
        # A list of lists (what a second derivative accumulates) holds stacked lists.
        item = stack_list(ctx, ctx.inputs[1]) if dtype == tf.variant else ctx.stacked(1)
    except ValueError as err:
        raise Decline(str(err)) from None
    return ctx.emit_stacked(handle, item)


@_declining(rows_own_lengths=True)
def convert_pop_back(ctx):
    shape = _invariant_input(ctx, 1, "element shape")
    dtype = ctx.attr("element_dtype")
    if isinstance(ctx.inputs[0], ListWithLengths):
        return _pop_own(ctx, shape)
    try:
        handle = stack_list(ctx, ctx.inputs[0], dtype)
    except ValueError as err:
        raise Decline(str(err)) from None
    if dtype == tf.variant and not _encodings(ctx.op.outputs[1]):
        # a list of lists: the item is a stacked list
        out, item = ctx.emit(handle, shape)
        return [Stacked(tensor=out), Stacked(tensor=item)]
    out, item = ctx.emit(handle, handles.prepend_n(ctx, shape))
    return [Stacked(tensor=out), _stacked_out(ctx, item, 1)]


@_declining(rows_own_lengths=True)
def convert_length(ctx):
    """Every iteration's list has the same length, unless the rows hold their own."""
    value = ctx.inputs[0]
    if isinstance(value, ListWithLengths):
        return Stacked(tensor=known_lengths(ctx, value))
    return Invariant(tensor=ctx.emit(value.tensor)[0])


@_declining(rows_own_lengths=True)
def convert_element_shape(ctx):
    """The stacked list's element shape without its leading n (unknown rank kept)."""
    return Invariant(tensor=without_rows(ctx.emit(ctx.inputs[0].tensor)[0]))


@_declining(rows_own_lengths=True)
def convert_concat(ctx):
    """Per-iteration concat of elements [n, d_t, ...] along d_t -> [n, sum d_t, ...]."""
    shape = _invariant_input(ctx, 1, "element shape")
    leading = _invariant_input(ctx, 2, "leading dims")
    static = tf.get_static_value(shape)
    if _ragged_rows(ctx, ctx.inputs[0]):
        return _concat_own(ctx, ctx.inputs[0], shape)
    handle = same_lengths(ctx, ctx.inputs[0])
    if static is not None and static.ndim == 1 and static.size and static[0] >= 0:
        # Every element has this leading dim: one stack and a reshape.
        width = int(static[0])
        items = _swap01(_stack_items(ctx, handle, handles.prepend_n(ctx, shape)))  # [n, T, d, ...]
        d = ctx.dims(items)
        out = shapes.reshape(items, [d[0], d[1] * width] + d[3:])
        lengths = tf.fill(tf.reshape(_R.TensorListLength(input_handle=handle), [1]),
                          tf.constant(width, tf.int64))
        return [_stacked_out(ctx, out), Invariant(tensor=lengths)]
    if leading.shape.rank != 1 or leading.shape[0] != 0:
        raise Decline("leading_dims for unset elements of unknown leading dim")
    out, lengths = _concat_each(ctx, handle, shape)
    return [_stacked_out(ctx, out), Invariant(tensor=lengths)]


def _concat_own(ctx, value, shape):
    """Each row's own items concatenated, where rows hold their own numbers of items at
    their start: items of leading dim ``d`` make rows of ``d`` times their numbers of
    items, ragged; the lengths output too. (The list's own element shape stacks it:
    a TensorArray's concat leaves the leading dim open, its unset items are zeros.)"""
    if shape.shape.rank != 1 or shape.shape[0] == 0:
        raise ConversionError(
            f"pfor: {ctx.op_type} '{ctx.op.name}' concatenates a tensor list whose "
            "iterations hold different numbers of items, of an item rank not known when "
            "tracing; give the list an element shape, or read it by stack().")
    own = _R.TensorListElementShape(input_handle=value.tensor, shape_type=tf.int32)
    element = own if own.shape.rank == 1 else handles.prepend_n(ctx, shape)
    items = _own_items(ctx, value, _stack_items(ctx, value.tensor, element))  # [n, T, d, ...]
    d = ctx.dims(items)
    out = shapes.reshape(items, [d[0], d[1] * d[2]] + d[3:])
    counts = value.lengths * tf.cast(d[2], tf.int32)
    sizes = tf.fill(tf.stack([d[0], d[1]]), tf.cast(d[2], tf.int64))
    return [Ragged.from_stacked(out, [counts] + [None] * (len(d) - 3)),
            Ragged.from_stacked(sizes, [value.lengths])]


def _concat_each(ctx, handle, shape):
    """Elements may differ in d_t: swap each to [d_t, n, ...] into a new list (a loop
    over the elements), concat that, and swap back."""
    dtype = ctx.attr("element_dtype")
    length = _R.TensorListLength(input_handle=handle)
    swapped_shape = _second_n(ctx, shape)
    swapped = _R.TensorListReserve(element_shape=swapped_shape, num_elements=length,
                                   element_dtype=dtype)

    def body(t, swapped):
        item = _R.TensorListGetItem(input_handle=handle, index=t,
                                    element_shape=handles.prepend_n(ctx, shape), element_dtype=dtype)
        return t + 1, _R.TensorListSetItem(input_handle=swapped, index=t, item=_swap01(item))

    _, swapped = tf.while_loop(lambda t, _: t < length, body, (tf.constant(0), swapped))
    out, lengths = _R.TensorListConcatV2(
        input_handle=swapped, element_shape=swapped_shape,
        leading_dims=tf.zeros([0], tf.int64), element_dtype=dtype)
    return _swap01(out), lengths


@_declining
def convert_resize(ctx):
    size = _invariant_input(ctx, 1, "list size")
    return ctx.emit_stacked(ctx.inputs[0].tensor, size)


@_declining
def convert_split(ctx):
    """tensor [n, sum d_t, ...] -> elements [n, d_t, ...], sliced one by one."""
    shape = _invariant_input(ctx, 1, "element shape")
    lengths = _invariant_input(ctx, 2, "split lengths")
    tensor = ctx.stacked(0)
    ends = tf.cumsum(lengths)
    starts = ends - lengths
    count = tf.size(lengths)
    total = tf.cast(tf.shape(tensor)[1], lengths.dtype)
    check = tf.debugging.assert_equal(
        tf.reduce_sum(lengths), total,
        message="TensorListSplit: the lengths must add up to the tensor's first dimension")
    out = _R.TensorListReserve(element_shape=handles.prepend_n(ctx, shape), num_elements=count,
                               element_dtype=ctx.attr("element_dtype"))

    def body(t, out):
        piece = tf.gather(tensor, tf.range(starts[t], ends[t]), axis=1)
        return t + 1, _R.TensorListSetItem(input_handle=out, index=t, item=piece)

    with tf.control_dependencies([check]):
        _, out = tf.while_loop(lambda t, _: t < count, body, (tf.constant(0), out))
    return Stacked(tensor=out)


def _encodings(item) -> bool:
    """Whether a variant item read from a list holds values (ragged encodings, stacked
    as ``[n]`` like other values: what ``tf.map_fn``'s gradient pops), not a list."""
    users, pending = [], [item]
    while pending:
        for op in pending.pop().consumers():
            if op.type == "Identity":
                pending.append(op.outputs[0])
            else:
                users.append(op.type)
    return bool(users) and all(u in ("ZerosLike", "RaggedTensorFromVariant") for u in users)


def _is_optional(tensor) -> bool:
    """Whether a body tensor is an optional: made by an optional op or output by a
    conditional (tf.cond's gradient intermediates)."""
    while tensor.op.type == "Identity":
        tensor = tensor.op.inputs[0]
    return tensor.op.type in ("OptionalFromValue", "OptionalNone", "If", "StatelessIf",
                              "Case", "StatelessCase")


@_declining
def convert_add_lists(ctx):
    """AddN of tensor lists (gradients of list ops add up): elementwise on the elements,
    which a stacked list holds as [n, ...]."""
    if ctx.op.outputs[0].dtype != tf.variant:
        raise Decline("not tensor lists")
    dtype = handles.summed_dtype(ctx)
    try:
        summands = [stack_list(ctx, v, dtype) for v in ctx.inputs]
    except ValueError as err:  # element dtype unknown
        raise Decline(str(err)) from None
    return ctx.emit_stacked(*summands)


@_declining
def convert_new_list(ctx):
    """TensorListReserve / EmptyTensorList reach a converter only with a per-iteration
    size or element shape. A TensorListReserve of a per-iteration size (one element
    shape): a list as long as the longest, each row holding its own number of items at
    its start, all unset (they read as zeros, as in the loop). An EmptyTensorList of a
    per-iteration cap: one empty list under the largest."""
    shape = _invariant_input(ctx, 0, "element shape")
    dtype = ctx.attr("element_dtype")
    if dtype == tf.variant:
        _invariant_input(ctx, 1, "list size")
        raise AssertionError("unreachable: an input is stacked")  # pragma: no cover
    if ctx.op_type == "EmptyTensorList":
        # Every row's list starts empty: only the cap on its size differs (a while
        # loop's accumulator, capped at its per-iteration maximum_iterations, which its
        # pushes never pass): one list under the largest cap (-1: none).
        caps = tf.cast(ctx.stacked(1), tf.int32)
        cap = tf.where(tf.reduce_any(caps < 0), -1, tf.reduce_max(tf.concat([caps, [0]], 0)))
        return Stacked(tensor=_R.EmptyTensorList(
            element_shape=handles.prepend_n(ctx, shape), max_num_elements=cap, element_dtype=dtype))
    sizes = list_sizes(ctx)
    longest = tf.reduce_max(tf.concat([sizes, [0]], 0))
    handle = _R.TensorListReserve(element_shape=handles.prepend_n(ctx, shape), num_elements=longest,
                                  element_dtype=dtype)
    return ListWithLengths(tensor=handle, lengths=sizes)
