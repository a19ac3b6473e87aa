"""Re-emitting a body op, unchanged or with new inputs, into the current graph."""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.eager import execute
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_util

# Attrs that describe the op's place in the body graph, not its computation.
_SKIP_ATTRS = frozenset({"_class", "_output_shapes"})


def _attr_value(value) -> attr_value_pb2.AttrValue:
    if isinstance(value, attr_value_pb2.AttrValue):
        return value
    out = attr_value_pb2.AttrValue()
    if isinstance(value, bool):
        out.b = value
    elif isinstance(value, int):
        out.i = value
    elif isinstance(value, float):
        out.f = value
    elif isinstance(value, (str, bytes)):
        out.s = value.encode() if isinstance(value, str) else value
    elif isinstance(value, tf.DType):
        out.type = value.as_datatype_enum
    elif isinstance(value, tf.TensorShape):
        out.shape.CopyFrom(value.as_proto())
    elif isinstance(value, (list, tuple)):
        if all(isinstance(v, bool) for v in value) and value:
            out.list.b.extend(value)
        elif all(isinstance(v, int) for v in value):
            out.list.i.extend(value)
        elif all(isinstance(v, float) for v in value):
            out.list.f.extend(value)
        elif all(isinstance(v, tf.DType) for v in value):
            out.list.type.extend(v.as_datatype_enum for v in value)
        else:
            raise TypeError(f"cannot express attr list {value!r}")
    else:
        raise TypeError(f"cannot express attr value {value!r}")
    return out


def function_names(op: tf.Operation) -> list[str]:
    """The names of the functions an op's attrs name (branches, loop bodies, calls)."""
    names = []
    for attr in op.node_def.attr.values():
        if attr.HasField("func"):
            names.append(attr.func.name)
        elif attr.HasField("list"):
            names.extend(f.name for f in attr.list.func)
    return names


def find_function(graph, name: str):
    """The function ``name`` as ``graph`` or a graph it was built in knows it, or None
    (a function graph a tape copied, such as a control-flow gradient's forward wrapper,
    keeps the ops but not the functions they name: its outer graphs have them)."""
    while graph is not None:
        fn = graph._get_function(name)  # pylint: disable=protected-access
        if fn is not None:
            return fn
        graph = getattr(graph, "outer_graph", None)
    return None


def copy_functions(op: tf.Operation, graph) -> None:
    """Make the functions an op's attrs name available in ``graph``."""
    source = op.graph
    for name in function_names(op):
        if graph._is_function(name):  # pylint: disable=protected-access
            continue
        fn = source._get_function(name)  # pylint: disable=protected-access
        if fn is not None:
            graph._add_function_recursive(fn)  # pylint: disable=protected-access


def recreate(op: tf.Operation, inputs: Sequence[tf.Tensor], *, op_type: str | None = None,
             attrs: dict | None = None, dtypes: Sequence[tf.DType] | None = None,
             name: str | None = None) -> tf.Operation:
    """Create ``op`` again in the default graph on ``inputs``; returns the new op."""
    graph = ops.get_default_graph()
    node_attrs = {k: v for k, v in op.node_def.attr.items() if k not in _SKIP_ATTRS}
    if attrs:
        for key, value in attrs.items():
            node_attrs[key] = _attr_value(value)
    copy_functions(op, graph)
    inputs = [t if isinstance(t, tf.Tensor) else ops.convert_to_tensor(t) for t in inputs]
    new_op = graph._create_op_internal(  # pylint: disable=protected-access
        op_type or op.type, inputs,
        dtypes=list(dtypes) if dtypes is not None else [t.dtype for t in op.outputs],
        name=name or op.name.rsplit("/", 1)[-1], attrs=node_attrs)
    if execute.must_record_gradient():
        _record_on_tapes(new_op, inputs)
    return new_op


def _record_on_tapes(op, inputs) -> None:
    """Record the op on active gradient tapes, as TensorFlow's generated op wrappers do
    (creating an op directly skips that), so converted graphs stay differentiable by a
    tape that is recording around ``pfor`` (e.g. a hessian's outer tape)."""
    attrs = []
    for key in op.node_def.attr:
        if not key.startswith("_"):
            attrs.extend((key, op.get_attr(key)))
    execute.record_gradient(op.type, list(inputs), tuple(attrs), list(op.outputs))


def copy_op(op: tf.Operation, inputs: Sequence[tf.Tensor], **kwargs) -> list[tf.Tensor]:
    """Like ``recreate`` but returns the new op's outputs."""
    return list(recreate(op, inputs, **kwargs).outputs)


def checked(tensor: tf.Tensor, condition, data) -> tf.Tensor:
    """``tensor``, ordered after an Assert of ``condition`` that prints ``data``.

    Data other than strings and int32 is formatted as strings first: other dtypes would
    make Assert guard itself with a cond (int32 needs no op that runs every time). XLA
    compiles Asserts to nothing and has no string kernels, so under XLA only the string
    constants are kept.
    """
    compiled = control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph())
    strings = []
    for d in data:
        if isinstance(d, str):
            strings.append(d)
        elif not compiled:
            d = tf.convert_to_tensor(d)
            strings.append(d if d.dtype in (tf.string, tf.int32) else tf.strings.as_string(d))
    check = tf.debugging.Assert(condition, strings, summarize=8)
    with tf.control_dependencies([check]):
        return tf.identity(tensor)
