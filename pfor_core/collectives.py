"""Cross-iteration collectives: inside a loop body, every iteration gets one shared value.

``pf.all_sum(x)`` emits an ``Identity`` op tagged with a private attr; the walk hands
tagged ops to ``convert_collective``, which reduces a stacked value over the iteration
axis once (an invariant result) instead of per iteration. Outside a pfor body there is
no "all iterations" to reduce over, so the functions raise.

Inside control flow of the body, a collective needs every iteration to reach it:
- in a ``tf.cond`` / ``tf.switch_case`` whose predicate is the same in every iteration,
  all iterations take the branch, and the collective reduces over all of them;
- in one whose predicate differs between iterations, only some iterations compute the
  argument: there is no value of every iteration to reduce, and converting it raises;
- in a ``tf.while_loop`` (whose iterations may run different numbers of steps) it
  raises as it is called.
The way out is to compute the collective outside the control flow.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_v2_func_graphs as control_flow_graphs

from pfor_core import emit
from pfor_core.errors import ConversionError
from pfor_core.layout import Invariant

ATTR = "_pfor_collective"
BODY_MARK = "_pfor_body"  # set on body graphs by the trace

_KINDS = ("sum", "mean", "max", "min", "gather")


_OUTSIDE_COND = (
    "Compute it before the conditional, where every iteration runs, and use the result "
    "in the branch: e.g. `pf.all_sum(tf.where(pred, x, tf.zeros_like(x)))` is the sum "
    "over the iterations whose predicate holds.")
_OUTSIDE_WHILE = (
    "Compute it before or after the tf.while_loop, where every iteration runs (e.g. on "
    "the loop's result).")


def _collective(x, kind: str, name: str):
    graph = ops.get_default_graph()
    in_body, around = placement(graph)
    if not in_body:
        raise RuntimeError(
            f"pf.{name} is a cross-iteration collective: call it inside the loop body of "
            "pf.pfor / pf.vectorized_map / pf.vmap (directly or in its tf.cond branches, "
            "not in a nested tf.function).")
    if "while" in around:
        raise ConversionError(
            f"pf.{name} is called inside a tf.while_loop of the loop body, which is not "
            "supported: its iterations may run different numbers of steps, so there is no "
            "step every iteration reaches. " + _OUTSIDE_WHILE)
    try:
        x = tf.convert_to_tensor(x)
    except (TypeError, ValueError) as err:
        raise TypeError(f"pf.{name}(x): x must be a tensor (or convertible to one), the "
                        f"value of this iteration to reduce, got {type(x).__name__}: "
                        f"{err}") from None
    tag = {ATTR: attr_value_pb2.AttrValue(s=kind.encode())}
    if kind == "gather":
        # An op whose static shape is [None] + x.shape: the body must not assume a size.
        rows = tf.expand_dims(x, 0)
        op = graph._create_op_internal(  # pylint: disable=protected-access
            "PlaceholderWithDefault", [rows], dtypes=[x.dtype], name=name, attrs={
                "dtype": attr_value_pb2.AttrValue(type=x.dtype.as_datatype_enum),
                "shape": attr_value_pb2.AttrValue(
                    shape=tf.TensorShape([None]).concatenate(x.shape).as_proto()), **tag})
    else:
        op = graph._create_op_internal(  # pylint: disable=protected-access
            "Identity", [x], dtypes=[x.dtype], name=name, attrs={
                "T": attr_value_pb2.AttrValue(type=x.dtype.as_datatype_enum), **tag})
    return op.outputs[0]


def all_sum(x):
    """The sum of ``x`` over all iterations, the same in every iteration.

    Like every collective, it may be called in the loop body or in a branch of a
    ``tf.cond`` / ``tf.switch_case`` of it whose predicate is the same in every
    iteration; inside a conditional whose predicate differs between iterations, or
    inside a ``tf.while_loop``, it raises ``pf.ConversionError`` (compute it outside).

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.pfor(lambda i: pf.all_sum(tf.gather(x, i)), 3, fallback="error").numpy()
    array([[ 9., 12.],
           [ 9., 12.],
           [ 9., 12.]], dtype=float32)
    """
    return _collective(x, "sum", "all_sum")


def all_mean(x):
    """The mean of ``x`` over all iterations.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.pfor(lambda i: pf.all_mean(tf.gather(x, i)), 3, fallback="error").numpy()
    array([[3., 4.],
           [3., 4.],
           [3., 4.]], dtype=float32)
    """
    return _collective(x, "mean", "all_mean")


def all_max(x):
    """The elementwise maximum of ``x`` over all iterations.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.pfor(lambda i: pf.all_max(tf.gather(x, i)), 3, fallback="error").numpy()
    array([[5., 6.],
           [5., 6.],
           [5., 6.]], dtype=float32)
    """
    return _collective(x, "max", "all_max")


def all_min(x):
    """The elementwise minimum of ``x`` over all iterations.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.pfor(lambda i: pf.all_min(tf.gather(x, i)), 3, fallback="error").numpy()
    array([[1., 2.],
           [1., 2.],
           [1., 2.]], dtype=float32)
    """
    return _collective(x, "min", "all_min")


def all_gather(x):
    """Every iteration's ``x``, stacked: shape ``[iters] + x.shape``.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> pf.pfor(lambda i: pf.all_gather(i * 10), 3, fallback="error").numpy()
    array([[ 0, 10, 20],
           [ 0, 10, 20],
           [ 0, 10, 20]], dtype=int32)
    """
    return _collective(x, "gather", "all_gather")


def placement(graph) -> tuple[bool, list[str]]:
    """Whether ``graph`` is a loop body or control flow inside one, and which control
    flow ("cond", "while") lies between the call and the body, innermost first."""
    around = []
    while isinstance(graph, control_flow_graphs.ControlFlowFuncGraph):
        around.append("cond" if isinstance(graph, control_flow_graphs.CondBranchFuncGraph)
                      else "while")
        graph = graph.outer_graph
    return bool(getattr(graph, BODY_MARK, False)), around


def kind_of(op) -> str | None:
    """The collective an op stands for, or None."""
    if op.type not in ("Identity", "PlaceholderWithDefault"):
        return None
    try:
        return op.get_attr(ATTR).decode()
    except ValueError:
        return None


def refuse_in_fallback(op) -> None:
    """Raise if the functions ``op`` runs hold a collective: the fallback loop would run
    it per iteration, as a plain identity."""
    name = _collective_in_functions(op, set())
    if name:
        raise ConversionError(
            f"pfor: {op.type} '{op.name}' holds the cross-iteration collective '{name}' "
            "and no converter takes it, so it would run in the fallback loop, one "
            "iteration at a time, where the collective cannot see the other iterations. "
            + (_OUTSIDE_WHILE if "While" in op.type else _OUTSIDE_COND))


def _collective_in_functions(op, seen: set) -> str:
    for name in emit.function_names(op):
        if name in seen:
            continue
        seen.add(name)
        graph = getattr(emit.find_function(op.graph, name), "graph", None)
        for inner in graph.get_operations() if graph is not None else ():
            found = inner.name if kind_of(inner) else _collective_in_functions(inner, seen)
            if found:
                return found
    return ""


def convert_collective(kind: str, value, conversion) -> Invariant:
    if conversion.partial:
        raise ConversionError(
            f"pf.all_{kind} is called inside {conversion.partial}: only the iterations "
            "that take the branch compute its argument, so there is no value of every "
            "iteration to reduce. " + _OUTSIDE_COND)
    if conversion.chunked:
        raise ConversionError(
            f"pf.all_{kind} needs every iteration at once, but parallel_iterations splits "
            "them into chunks; drop parallel_iterations (or chunk_size) for this body.")
    t = value.tensor
    if kind == "gather":  # the value is [1] + x.shape per iteration
        return Invariant(tensor=tf.squeeze(conversion.stack(value), axis=1))
    if not value.is_stacked:
        if kind == "sum":
            t = t * tf.cast(conversion.n, t.dtype)
        return Invariant(tensor=tf.identity(t))
    reduce = {"sum": tf.reduce_sum, "mean": tf.reduce_mean, "max": tf.reduce_max,
              "min": tf.reduce_min}[kind]
    return Invariant(tensor=reduce(t, axis=0))
