"""Helpers on tensor-list handles that plain lists, lists of ragged items and the loop
variables share: a list's element dtype (from its handle, or from the graph around it),
the stacked element shape, and the sizes of ragged items."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import handle_data_util

from pfor_core.extend import Decline, Ragged


def element_dtype(handle) -> tf.DType:
    """The element dtype of the list ``handle``, from the op that made it or its handle
    data; raises ValueError if neither tells."""
    # The attr of the op that made the list; not of one that read it from a list of lists
    # (its element_dtype is the outer list's).
    if not isinstance(handle, ops.EagerTensor) and "element_dtype" in handle.op.node_def.attr \
            and handle.op.type != "TensorListGetItem" and handle.value_index == 0:
        return handle.op.get_attr("element_dtype")
    data = handle_data_util.get_resource_handle_data(handle)
    if data is not None and data.is_set and data.shape_and_type:
        return tf.as_dtype(data.shape_and_type[0].dtype)
    raise ValueError(f"stack_list: cannot tell the element dtype of tensor list {handle!r}; "
                     "pass element_dtype")


# Ops that give a new handle of the tensor list they take first (writes, and others).
PASSING = frozenset({"Identity", "TensorListSetItem", "TensorListResize",
                     "TensorListPushBack", "TensorListPopBack",
                     "TensorListScatterIntoExistingList"})


def list_source(graph, tensor):
    """The input of function ``graph`` whose tensor list the variant ``tensor`` is a
    handle of (through ``PASSING`` ops and while loops that carry it), or None."""
    if tensor.dtype != tf.variant:
        return None
    inputs = {t.ref(): k for k, t in enumerate(graph.inputs)}
    while tensor.ref() not in inputs:
        op = tensor.op
        if op.type in PASSING and tensor.value_index == 0:
            tensor = op.inputs[0]
        elif op.type in ("While", "StatelessWhile"):
            tensor = op.inputs[tensor.value_index]
        else:
            return None
    return inputs[tensor.ref()]


def prepend_n(ctx, shape: tf.Tensor) -> tf.Tensor:
    """Per-iteration element shape (int32/int64 tensor, scalar -1 for an unknown rank)
    -> the stacked list's element shape: ``n`` first where the rank is known."""
    shape = tf.convert_to_tensor(shape)
    n = tf.reshape(tf.cast(ctx.n, shape.dtype), [1])
    if shape.shape.rank == 0:  # made here: ops need a scalar shape to be a constant -1
        return tf.constant(-1, shape.dtype)
    if shape.shape.rank == 1:
        return tf.concat([n, shape], 0)
    return tf.cond(tf.equal(tf.rank(shape), 0), lambda: shape,
                   lambda: tf.concat([n, tf.reshape(shape, [tf.size(shape)])], 0))


def summed_dtype(ctx):
    """The element dtype of the lists AddN sums, from an input made by a list op (an
    item popped from a list of lists carries the outer list's handle data instead),
    else from the graph around the inputs and the sum."""
    for t in ctx.op.inputs:
        op = t.op
        while op.type == "Identity":
            t = op.inputs[0]
            op = t.op
        if t.value_index == 0 and "element_dtype" in op.node_def.attr:
            return op.get_attr("element_dtype")
    for t in list(ctx.op.inputs) + list(ctx.op.outputs):
        dtype = list_dtype_near(t)
        if dtype is not None and dtype != tf.variant:
            return dtype
    return None


LIST_OUT = ("TensorListSetItem", "TensorListPushBack", "TensorListPopBack",
            "TensorListResize", "Identity")  # output 0 is the list they got


WHILES = ("While", "StatelessWhile")


def dtype_of(handle, *around) -> tf.DType | None:
    """The element dtype of the list ``handle``: as the handle tells (``element_dtype``),
    else as the graph around the tensors ``around`` tells (``list_dtype_near``); None
    if neither."""
    try:
        return element_dtype(handle)
    except (ValueError, AttributeError):
        pass
    return next((d for d in map(list_dtype_near, around) if d is not None), None)


def list_dtype_near(tensor, budget=200):
    """The element dtype of the list ``tensor`` from the graph around it: its handle
    data, or an op that makes or uses the same list (through Identity, AddN, list
    updates and while loops); None if nothing within ``budget`` tensors tells."""
    todo, seen = [tensor], set()
    while todo and len(seen) < budget:
        t = todo.pop()
        if id(t) in seen or t.dtype != tf.variant:
            continue
        seen.add(id(t))
        data = handle_data_util.get_resource_handle_data(t)
        if data is not None and data.is_set and data.shape_and_type:
            return tf.as_dtype(data.shape_and_type[0].dtype)
        op = t.op
        if op.type.startswith("TensorList") and "element_dtype" in op.node_def.attr \
                and op.type != "TensorListGetItem" and t.value_index == 0:
            return op.get_attr("element_dtype")
        if op.type in ("Identity", "AddN") or (op.type in LIST_OUT and t.value_index == 0):
            todo.extend(op.inputs[:len(op.inputs) if op.type == "AddN" else 1])
        elif op.type in WHILES:
            todo.append(op.inputs[t.value_index])
        for c in t.consumers():
            if c.type.startswith("TensorList") and "element_dtype" in c.node_def.attr \
                    and c.inputs[0] is t:
                return c.get_attr("element_dtype")
            if c.type in ("Identity", "AddN") or (c.type in LIST_OUT and c.inputs[0] is t):
                todo.append(c.outputs[0])
            elif c.type in WHILES:
                todo.extend(c.outputs[j] for j, x in enumerate(c.inputs) if x is t)
    return None


def rank_of(value) -> int:
    """The rank of a list item (ragged or not); declines an unknown rank."""
    rank = value.rank if isinstance(value, Ragged) else value.shape.rank
    if rank is None:
        raise Decline("an item of unknown rank")
    return rank


def largest(sizes, rank):
    """The largest of ``sizes`` ([m, rank]) per dimension (zeros when m is 0)."""
    return tf.reduce_max(tf.concat([sizes, tf.zeros([1, rank], tf.int32)], 0), axis=0)
