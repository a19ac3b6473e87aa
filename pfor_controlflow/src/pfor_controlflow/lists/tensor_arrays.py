"""TensorArrays of the first kind (TensorArrayV3 and its Read / Write / Gather / Scatter /
Size / Grad ops): what ``tf.compat.v1`` code, v1 control flow and their gradients use.

Two kinds of array reach a loop body:

- One the body creates: every iteration has its own. All iterations share one array
  whose elements carry the iteration axis (element k is ``[n, ...]``, row j iteration j's
  value), as stacked tensor lists do; invariant values written to it are tiled, so every
  element is stacked and reads are stacked. The iterations run in lock-step, so an
  invariant index names the same element in all of them; a stacked index reads element
  ``index[j]`` row j (so reads do not clear elements, as they may in the loop), and a
  stacked index of a write or scatter (iterations writing different elements) is
  refused: an element would be written in some rows only.
  The emitted array op is marked (``_pfor_stacked_elements``), which is how later ops,
  also in the functions of loops and branches, know its elements are stacked; its flow
  carries the number of rows, checked where rows are read or written, so that a loop
  or branch that only some iterations take fails instead of mixing rows.
- One created outside the loop (a captured handle): its elements are the same for all
  iterations. A stacked index reads with one gather and writes with one scatter (each
  iteration its own element, as in the loop); an invariant one reads invariant values.
  Other writes run in the fallback loop, one iteration after the other, as in the loop.

An array whose size differs between iterations is refused (one array holds every
iteration's rows; the fallback loop cannot return per-iteration handles). A gradient array
(TensorArrayGradV3) is created by the body: the gradient of an outside array gets
elements with the iteration axis prepended (TensorArrayGradWithShape).
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

from pfor_core.extend import ConversionError, Invariant, Stacked, shapes

MARK = "_pfor_stacked_elements"
_CREATORS = frozenset({"TensorArrayV3", "TensorArrayGradV3", "TensorArrayGradWithShape",
                       "StackV2"})
_PLUMBING = frozenset({"Identity", "IdentityN", "Enter"})


def creator(handle: tf.Tensor):
    """The op that created the array (or stack) ``handle`` refers to, following
    identities and captures into the graphs the handle comes from; None if unknown."""
    seen = 0
    while handle is not None and seen < 1000:
        seen += 1
        op = handle.op
        if op.type in _CREATORS:
            return op
        if op.type in _PLUMBING:
            handle = op.inputs[handle.value_index if op.type == "IdentityN" else 0]
            continue
        if op.type == "Placeholder":
            outer = {id(internal): external
                     for external, internal in getattr(handle.graph, "captures", ())}
            handle = outer.get(id(handle))
            continue
        return None
    return None


def _stacked_elements_of(handle: tf.Tensor) -> bool | None:
    """Whether the converted array ``handle`` holds stacked elements (created in the
    loop body), does not (created outside), or None when that is unknown."""
    op = creator(handle)
    if op is None:
        return None
    return MARK in op.node_def.attr


def mark(op: tf.Operation) -> None:
    op._set_attr(MARK, attr_value_pb2.AttrValue(b=True))  # pylint: disable=protected-access


def rows_flow(ctx, flow: tf.Tensor, after) -> tf.Tensor:
    """A flow that carries the number of rows (``ctx.n``), ordered after ``after``."""
    with tf.control_dependencies(after):
        return tf.cast(ctx.n, flow.dtype) + tf.zeros_like(flow)


def passed_flow(flow_in: tf.Tensor, after) -> tf.Tensor:
    """The incoming flow (and the rows it carries), ordered after ``after``."""
    with tf.control_dependencies(after):
        return tf.identity(flow_in)


def same_rows(ctx, flow_in: tf.Tensor, tensor: tf.Tensor) -> tf.Tensor:
    """``tensor`` after checking that the array's rows are this conversion's iterations."""
    return ctx.check(tf.equal(tf.cast(flow_in, tf.int32), ctx.n),
                     "a TensorArray created for all iterations of the loop is used in a "
                     "loop or branch that only some iterations take: not supported",
                     tensor=tensor)


def elements_stacked(ctx) -> bool:
    """Whether the array of input 0 has stacked elements; a ConversionError if that is
    unknown (a handle passed in some other way than a capture)."""
    found = _stacked_elements_of(ctx.inputs[0].tensor)
    if found is None:
        raise ConversionError(
            f"pfor: {ctx.op_type} (op '{ctx.op.name}'): cannot tell where its TensorArray "
            "was created (its handle comes through an op pfor does not follow); create "
            "the array inside the loop body or pass it in as a captured value.")
    return found


def _refuse(ctx, what: str):
    raise ConversionError(
        f"pfor: {ctx.op_type} (op '{ctx.op.name}'): {what} of a TensorArray the loop body "
        "creates: every iteration would write other elements, which one array with the "
        "iterations stacked in each element cannot hold. Write at the same index in "
        "every iteration, or use tf.TensorArray in TF2 code (a tensor list).")


# -- creating ------------------------------------------------------------------------
def convert_tensor_array(ctx):
    """One array for all iterations; the element shape gets the iteration axis."""
    (size,) = ctx.inputs
    shape = tf.TensorShape(ctx.attr("element_shape"))
    element_shape = (tf.TensorShape([ctx.n_static]).concatenate(shape)
                     if shape.rank is not None else shape)
    # Reads do not clear elements: a stacked index reads an element for some rows only,
    # and one element may be read for several rows (the loop clears per iteration).
    handle, flow = ctx.emit(size.tensor, attrs={"element_shape": element_shape,
                                                "clear_after_read": False})
    mark(handle.op)
    return [Invariant(tensor=handle), Invariant(tensor=rows_flow(ctx, flow, [handle.op]))]


def refuse_per_iteration_size(ctx):
    raise ConversionError(
        f"pfor: TensorArrayV3 (op '{ctx.op.name}'): a TensorArray whose size differs between "
        "iterations is not supported (one array holds the rows of all iterations). Give it "
        "one size for all iterations (e.g. the largest, with dynamic_size=True), or use "
        "tf.TensorArray in TF2 code (a tensor list).")


def convert_tensor_array_grad(ctx):
    handle, flow_in = ctx.inputs
    source = ctx.attr("source")
    if elements_stacked(ctx):  # its elements are stacked already: so are the gradient's
        grad, flow = ctx.emit(handle.tensor, flow_in.tensor)
        flow = passed_flow(flow_in.tensor, [grad.op])
    else:
        grad, flow = tf.raw_ops.TensorArrayGradWithShape(
            handle=handle.tensor, flow_in=flow_in.tensor,
            shape_to_prepend=tf.reshape(ctx.n, [1]), source=source)
        flow = rows_flow(ctx, flow, [grad.op])
    mark(grad.op)
    return [Invariant(tensor=grad), Invariant(tensor=flow)]


# -- writing -------------------------------------------------------------------------
def convert_write(ctx):
    handle, index, value, flow_in = ctx.inputs
    if elements_stacked(ctx):
        if index.is_stacked:
            _refuse(ctx, "a per-iteration index")
        rows = same_rows(ctx, flow_in.tensor, ctx.stack(value))
        (out,) = ctx.emit(handle.tensor, index.tensor, rows, flow_in.tensor)
        return [Invariant(tensor=passed_flow(flow_in.tensor, [out.op]))]
    if not index.is_stacked:
        return ctx.decline("every iteration writes the same element: the loop's order")
    out = tf.raw_ops.TensorArrayScatterV3(handle=handle.tensor, indices=index.tensor,
                                          value=ctx.stack(value), flow_in=flow_in.tensor)
    return [Invariant(tensor=out)]


def convert_scatter(ctx):
    handle, indices, value, flow_in = ctx.inputs
    if elements_stacked(ctx):
        if indices.is_stacked:
            _refuse(ctx, "per-iteration indices")
        rows = same_rows(ctx, flow_in.tensor, ctx.stack(value))
        # [n, k, ...] -> element-major [k, n, ...]
        perm = [1, 0] + list(range(2, rows.shape.rank)) if rows.shape.rank is not None else \
            tf.concat([[1, 0], tf.range(2, tf.rank(rows))], 0)
        (out,) = ctx.emit(handle.tensor, indices.tensor, tf.transpose(rows, perm),
                          flow_in.tensor)
        return [Invariant(tensor=passed_flow(flow_in.tensor, [out.op]))]
    if not indices.is_stacked:
        return ctx.decline("every iteration writes the same elements: the loop's order")
    values = shapes.merge_leading(ctx.stack(value), n=ctx.n)
    out = ctx.emit(handle.tensor, shapes.merge_leading(indices.tensor, n=ctx.n), values,
                   flow_in.tensor)[0]
    return [Invariant(tensor=out)]


# -- reading -------------------------------------------------------------------------
def _gather_some(ctx, handle, indices, flow_in, row_shape, **attrs) -> tf.Tensor:
    """TensorArrayGatherV3 of ``indices`` (a vector), which may be empty: TensorFlow
    gathers no element only for a static element shape, which the iteration axis makes
    unknown when n is; zeros (each element ``[n] + row_shape``) stand in then."""
    def gather():
        return tf.raw_ops.TensorArrayGatherV3(handle=handle, indices=indices, flow_in=flow_in,
                                              dtype=ctx.attr("dtype"), **attrs)
    if not row_shape.is_fully_defined() or ctx.n_static is not None:
        return gather()
    none = tf.zeros(tf.concat([[0, ctx.n], row_shape.as_list()], 0), ctx.attr("dtype"))
    return tf.cond(tf.size(indices) > 0, gather, lambda: none)


def _diagonal(ctx, gathered: tf.Tensor) -> tf.Tensor:
    """``[n, n, ...]`` (element of row j's index, then rows) -> ``[n, ...]``: row j of
    the element iteration j asked for."""
    rows = tf.range(ctx.n)
    return tf.gather_nd(gathered, tf.stack([rows, rows], axis=1))


def convert_read(ctx):
    handle, index, flow_in = ctx.inputs
    if elements_stacked(ctx):
        if not index.is_stacked:
            (value,) = ctx.emit(handle.tensor, index.tensor, flow_in.tensor)
        else:  # each iteration's own element, its own row of it
            value = _diagonal(ctx, _gather_some(ctx, handle.tensor, index.tensor,
                                                flow_in.tensor, ctx.output_shapes[0]))
        return [Stacked(tensor=same_rows(ctx, flow_in.tensor, value))]
    if not index.is_stacked:
        return [Invariant(tensor=ctx.emit(handle.tensor, index.tensor, flow_in.tensor)[0])]
    return [Stacked(tensor=tf.raw_ops.TensorArrayGatherV3(
        handle=handle.tensor, indices=index.tensor, flow_in=flow_in.tensor,
        dtype=ctx.attr("dtype")))]


def _rows_of(value: tf.Tensor, n, k) -> tf.Tensor:
    """``[n*k, ...]`` -> ``[n, k, ...]`` (ranks may be unknown)."""
    return tf.reshape(value, tf.concat([tf.stack([n, k]), tf.shape(value)[1:]], 0))


def convert_gather(ctx):
    handle, indices, flow_in = ctx.inputs
    if elements_stacked(ctx):
        shape = tf.TensorShape(ctx.attr("element_shape"))
        elements = {"element_shape": ctx.stacked_shape(shape) if shape.rank is not None
                    else shape}
        if not indices.is_stacked:  # [k, n, ...] -> [n, k, ...]
            (value,) = ctx.emit(handle.tensor, indices.tensor, flow_in.tensor, attrs=elements)
            value = tf.transpose(value, tf.concat([[1, 0], tf.range(2, tf.rank(value))], 0))
        else:  # element indices[j, m], row j: one gather of all, then pick rows
            k = tf.shape(indices.tensor)[1]
            flat = tf.reshape(indices.tensor, [-1])
            every = _gather_some(ctx, handle.tensor, flat, flow_in.tensor,
                                 ctx.output_shapes[0][1:], **elements)
            picks = tf.stack([tf.range(tf.size(flat)), tf.repeat(tf.range(ctx.n), k)], axis=1)
            value = _rows_of(tf.gather_nd(every, picks), ctx.n, k)
        return [Stacked(tensor=same_rows(ctx, flow_in.tensor, value))]
    if not indices.is_stacked:
        return [Invariant(tensor=ctx.emit(handle.tensor, indices.tensor, flow_in.tensor)[0])]
    k = tf.shape(indices.tensor)[1]
    (value,) = ctx.emit(handle.tensor, tf.reshape(indices.tensor, [-1]), flow_in.tensor)
    return [Stacked(tensor=_rows_of(value, ctx.n, k))]


def convert_size(ctx):
    """All iterations' arrays have one size (lock-step): the shared array's."""
    handle, flow_in = ctx.inputs
    return [Invariant(tensor=ctx.emit(handle.tensor, flow_in.tensor)[0])]
