"""Finding the function graphs that control-flow ops name in their attrs, and small
helpers shared by the conditional and loop converters."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import func_graph, function_def_to_graph


def function_graph(op, name: str):
    """The FuncGraph of the function ``name`` that ``op`` refers to, or None."""
    fn = op.graph._get_function(name)  # pylint: disable=protected-access
    if fn is None:
        return None
    graph = getattr(fn, "graph", None)
    if graph is not None:
        return graph
    # Functions known only by their definition (e.g. loaded ones) have no graph yet.
    definition = getattr(fn, "cached_definition", None) or getattr(fn, "definition")
    return function_def_to_graph.function_def_to_graph(definition)


def scratch_graph(name: str = "pfor_trial"):
    """A throw-away function graph for trial conversions (captures outer tensors)."""
    return func_graph.FuncGraph(name)


def with_effects(tensors, effects) -> list:
    """``tensors`` plus a token, all made to run after the ops in ``effects``; a
    function returning them runs its side effects even when nothing reads them."""
    with tf.control_dependencies(effects or None):
        return [tf.identity(t) for t in tensors] + [tf.constant(0)]


def is_handle(value) -> bool:
    """Tensor lists and resources: values with no rows to gather."""
    return value.dtype in (tf.variant, tf.resource)
