"""Loops of no iterations.

A sequential loop of no iterations runs nothing of its body; a converted one would run
every converted op on empty batches, which goes wrong in two ways:

- TensorFlow's graph optimizer (grappler) crashes the process (SIGFPE) on some ops
  whose inputs it knows to have a dimension of static size 0, e.g. a ``Mul`` by a
  constant it folded from the loop index: its arithmetic optimizer divides by that
  dimension. A static ``iters == 0`` therefore builds no converted body at all, and a
  run-time ``iters`` reaches the converted ops through a ``PlaceholderWithDefault``,
  which grappler never folds, so it cannot learn that ``iters`` is 0 either.
- A value of no static shape that no iteration made has no known shape: the fallback
  loop takes its unknown dimensions as 0, and an op after it (a matmul, an add of a
  bias) may then reject the empty batch. A run-time ``iters`` of a body with values of
  no static shape therefore runs its converted body inside a ``tf.cond`` on
  ``iters > 0``.
"""

from __future__ import annotations

import contextlib

import tensorflow as tf
from tensorflow.python.eager import record
from tensorflow.python.framework import func_graph, ops
from tensorflow.python.ops import control_flow_util

from pfor_core import collectives, emit

_HANDLES = (tf.variant, tf.resource)


def hide(n: tf.Tensor) -> tf.Tensor:
    """``n`` as grappler cannot constant-fold it (see the module docstring)."""
    return tf.raw_ops.PlaceholderWithDefault(input=n, shape=[])


def is_hidden(op) -> bool:
    """Whether ``op`` is an untagged ``PlaceholderWithDefault`` with an input, as
    ``hide`` makes (a nested pfor's run-time ``iters`` in an outer body)."""
    return (op.type == "PlaceholderWithDefault" and bool(op.inputs)
            and collectives.kind_of(op) is None)


def rows(original: tf.Tensor) -> tf.Tensor:
    """No rows of a body tensor: shape ``[0] + shape``, unknown dimensions taken as 0
    (unknown rank: shape ``[0]``)."""
    shape = original.shape
    dims = [0] + ([d if d is not None else 0 for d in shape.as_list()]
                  if shape.rank is not None else [])
    return tf.zeros(dims, original.dtype)


def ragged_rows(original: tf.Tensor, like: tf.RaggedTensor) -> tf.RaggedTensor:
    """No rows of a body tensor, as a ``tf.RaggedTensor`` built like ``like`` (values
    of no static rank: of rank 1)."""
    shape = like.flat_values.shape
    inner = [d if d is not None else 0 for d in shape.as_list()[1:]] if shape.rank else []
    values = tf.zeros([0] + inner, original.dtype)
    partitions = [tf.zeros([0], like.row_splits.dtype)] * like.ragged_rank
    return tf.RaggedTensor.from_nested_row_lengths(values, partitions, validate=False)


def ragged_output(original: tf.Tensor):
    """No rows of a body tensor for ``ragged_outputs=True``: a ``tf.RaggedTensor``
    ragged in the dimensions the body does not know (else ``rows``)."""
    from pfor_core import ragged  # pylint: disable=import-outside-toplevel

    shape = original.shape
    if shape.rank is None or shape.is_fully_defined():
        return rows(original)
    axes = [d for d, size in enumerate(shape.as_list()) if size is None]
    return ragged.from_flat(tf.zeros([0], original.dtype), tf.zeros([0, shape.rank], tf.int32),
                            axes, shape)


def possible(body) -> bool:
    """Whether empty outputs can be made without the converted body (not for tensor
    lists or resources, which have no rows)."""
    return all(t.dtype not in _HANDLES for t in body.outputs)


@contextlib.contextmanager
def unrun_graph():
    """A graph for a conversion that must never run: it captures what it reads from
    the caller's graph without changing it, and no gradient tape records its ops."""
    with func_graph.FuncGraph("pfor_no_iterations").as_default(), record.stop_recording():
        yield


def guard_needed(body) -> bool:
    """Whether a run-time ``iters`` needs the ``tf.cond`` on ``iters > 0``: some body
    tensor (also in a function the body calls) has no static shape and the converted
    ops are not compiled by XLA (which needs static shapes anyway) nor part of an outer
    pfor's body (which converts them again)."""
    if not possible(body) or not body.outputs:
        return False
    graph = ops.get_default_graph()
    if control_flow_util.GraphOrParentsInXlaContext(graph) or _in_body(graph):
        return False
    return _has_unknown_shapes(body.graph, set())


def in_body(graph=None) -> bool:
    """Whether ops built into ``graph`` (default: the current one) land in the body of
    an outer ``pfor``, which will vectorize them again."""
    graph = ops.get_default_graph() if graph is None else graph
    return _in_body(graph)


def _in_body(graph) -> bool:
    while graph is not None:
        if getattr(graph, collectives.BODY_MARK, False):
            return True
        graph = getattr(graph, "outer_graph", None)
    return False


def _has_unknown_shapes(graph, seen: set) -> bool:
    for op in graph.get_operations():
        if any(t.dtype not in _HANDLES and not t.shape.is_fully_defined()
               for t in op.outputs):
            return True
        for name in emit.function_names(op):
            if name in seen:
                continue
            seen.add(name)
            fn = emit.find_function(graph, name)
            inner = getattr(fn, "graph", None)
            if inner is None or _has_unknown_shapes(inner, seen):
                return True  # a function whose graph we cannot see: assume the worst
    return False
