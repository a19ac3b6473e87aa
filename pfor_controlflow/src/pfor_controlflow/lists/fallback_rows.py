"""Tensor lists in the core's fallback loop, which runs an op once per iteration: each
iteration gets its own list, and the lists the iterations make are stacked again.

An iteration's list holds its row of every item, and only its own items where rows
hold their own numbers; the stacked lists are padded to the longest, each row's length
kept (a ``ListWithLengths``).

This is what makes the fallback total for tensor lists (``fallback="loop"`` runs an
op that no converter takes, such as a conditional whose branches grow a list under a
per-iteration predicate). Lists of items whose shape differs between iterations, and
lists of lists, are not sliced here: the fallback then says so.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.ops import handle_data_util

from pfor_core.extend import ConversionError, Decline, Ragged, Stacked, View
from pfor_controlflow.lists import handles
from pfor_controlflow.lists.loop_views import ListView, items_of
from pfor_controlflow.lists.with_lengths import ListWithLengths

_R = tf.raw_ops


class ListRows:
    """The form of tensor lists the fallback loop asks for (``registry.variant_form``)."""

    def rows(self, value, original):
        """Iteration ``i``'s own list of the stacked list ``value``, as a function of
        ``i``; None if ``value`` is no list of plain items."""
        dtype = getattr(value, "element_dtype", None) or handles.dtype_of(value.tensor, original)
        if dtype is None or dtype == tf.variant:
            return None
        # A loop's view of some rows of its whole list: those rows of the whole list.
        rows = value.rows if isinstance(value, ListView) else None
        lengths = value.lengths if isinstance(value, (ListView, ListWithLengths)) else None
        if isinstance(value, View) and rows is None:
            value = value.materialize()
            if isinstance(value, Decline):
                return None
        whole = items_of(value.tensor, dtype)  # [items, width, ...]
        right = isinstance(value, ListWithLengths) and value.right_aligned

        def row(i):
            at = i if rows is None else rows[i]
            items = tf.gather(whole, at, axis=1)
            if lengths is not None:
                size, total = lengths[at], tf.shape(whole)[0]
                items = items[total - size:] if right else items[:size]
            return _R.TensorListFromTensor(tensor=items,
                                           element_shape=tf.shape(items)[1:])
        return row

    def collect(self, original):
        """How the loop collects the list ``original`` an op makes per iteration: as its
        items stacked; None if it is no list of items of known rank."""
        dtype = handles.list_dtype_near(original)
        item = _item_shape(original)
        if dtype is None or dtype == tf.variant or item.rank is None:
            return None

        def encode(handle):
            shape = _R.TensorListElementShape(input_handle=handle, shape_type=tf.int32)
            return _R.TensorListStack(input_handle=handle, element_shape=shape,
                                      element_dtype=dtype)

        return encode, dtype, tf.TensorShape([None]).concatenate(item), _restacked(original)


def _restacked(original):
    def decode(value):
        """The rows' lists (their items, as the loop collected them) as one stacked list
        of the longest row's length, each row's own length kept."""
        if isinstance(value, Ragged):
            if any(size is not None for size in value.lengths[1:]):
                raise ConversionError(
                    f"pfor: the fallback loop made a tensor list per iteration "
                    f"('{original.name}') whose items differ in shape between iterations, "
                    "which it cannot stack. Give the list's items a static shape "
                    "(element_shape=...), or keep the list inside the loop that uses it.")
            items, lengths = value.padded, value.lengths[0]
        else:
            items, lengths = value.tensor, None
        rank = items.shape.rank
        items = tf.transpose(items, [1, 0] + list(range(2, rank)))  # [items, n, ...]
        handle = _R.TensorListFromTensor(tensor=items, element_shape=tf.shape(items)[1:])
        return Stacked(tensor=handle) if lengths is None else ListWithLengths(
            tensor=handle, lengths=tf.cast(lengths, tf.int32))
    return decode


def _item_shape(original, budget=100) -> tf.TensorShape:
    """The per-iteration shape of the items of the list ``original`` (a body tensor), as
    its handle data records it, else as a list op reading it (or a later version of
    it) is told; unknown if neither tells."""
    data = handle_data_util.get_resource_handle_data(original)
    if data is not None and data.is_set and data.shape_and_type:
        shape = tf.TensorShape(data.shape_and_type[0].shape)
        if shape.rank is not None:
            return shape
    todo = [original]
    while todo and budget > 0:
        budget -= 1
        for consumer in todo.pop().consumers():
            if consumer.type in handles.PASSING:
                todo.append(consumer.outputs[0])
            elif consumer.type.startswith("TensorList") and len(consumer.inputs) > 1:
                told = _told_shape(consumer)
                if told is not None and told.rank is not None:
                    return told
    return tf.TensorShape(None)


def _told_shape(op):
    """The static element shape a list op is given (None if it takes none)."""
    names = [arg.name for arg in op.op_def.input_arg]
    if "element_shape" not in names:
        return None
    value = tf.get_static_value(op.inputs[names.index("element_shape")])
    if value is None:
        return None
    if value.ndim == 0:  # -1: any shape
        return tf.TensorShape(None)
    return tf.TensorShape([None if d < 0 else int(d) for d in value.tolist()])


FORM = ListRows()
