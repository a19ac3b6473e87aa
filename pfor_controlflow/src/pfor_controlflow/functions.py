"""Finding the function graphs that control-flow ops name in their attrs, and small
helpers shared by the conditional and loop converters."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import func_graph, function_def_to_graph

from pfor_core.extend import Invariant, Stacked, find_function


def function_graph(op, name: str):
    """The FuncGraph of the function ``name`` that ``op`` refers to, or None."""
    found = function_and_outputs(op, name)
    return None if found is None else found[0]


def branch_functions(op):
    """The function graphs of a conditional's (If, Case) branches in order, or None if
    one is not found."""
    if op.type in ("If", "StatelessIf"):
        names = [op.get_attr("then_branch").name, op.get_attr("else_branch").name]
    else:
        names = [f.name for f in op.get_attr("branches")]
    graphs = [function_graph(op, name) for name in names]
    return None if any(g is None for g in graphs) else graphs


def function_and_outputs(op, name: str):
    """(graph, outputs) of the function ``name`` that ``op`` runs, or None.

    A function's Python graph can hold more outputs than the definition the op runs
    (a tape's backward function before pruning): its outputs are then looked up by
    the definition's names, keeping the graph's static shapes. Functions known only by
    their definition (e.g. loaded ones) are imported from it.
    """
    fn = find_function(op.graph, name)
    if fn is None:
        return None
    definition = getattr(fn, "cached_definition", None) or getattr(fn, "definition")
    graph = getattr(fn, "graph", None)
    signature = definition.signature
    if graph is not None and len(graph.inputs) == len(signature.input_arg):
        if len(graph.outputs) == len(signature.output_arg):
            return graph, list(graph.outputs)
        try:
            with op.graph.as_default():  # where the functions it calls are found
                _, flat_names = function_def_to_graph.function_def_to_graph_def(definition)
            return graph, [graph.get_tensor_by_name(flat_names[definition.ret[arg.name]])
                           for arg in signature.output_arg]
        except (KeyError, ValueError):
            pass
    # A definition that records its input shapes keeps them; a Defun's records none.
    shapes = None if "_input_shapes" in definition.attr else _call_site_shapes(
        op, len(signature.input_arg))
    known = [k for k, shape in enumerate(shapes or ()) if shape is not None]
    if any("_output_shapes" in definition.arg_attr[k].attr for k in known
           if k in definition.arg_attr):
        # A Defun records its arguments' shapes (unknown, mostly), which would override
        # the call site's.
        copied = type(definition)()
        copied.CopyFrom(definition)
        for k in known:
            if k in copied.arg_attr:
                copied.arg_attr[k].attr.pop("_output_shapes", None)
        definition = copied
    with op.graph.as_default():  # where the functions it calls are found
        graph = function_def_to_graph.function_def_to_graph(
            definition, include_library_functions=True, input_shapes=shapes)
    return graph, list(graph.outputs)


def _call_site_shapes(op, count: int):
    """The static shapes of a function's arguments as ``op`` passes them, or None: a
    definition without shapes (a ``function.Defun``'s) imports with unknown shapes
    otherwise, which converters needing ranks decline. A While's carried values have
    the shapes TensorFlow inferred for its outputs; a call's and a conditional's
    branches take the op's (trailing) inputs."""
    if op.type in ("While", "StatelessWhile"):
        shapes = [t.shape for t in op.outputs]
    else:
        shapes = [t.shape for t in op.inputs][len(op.inputs) - count:]
    if len(shapes) != count:
        return None
    return [shape if shape.rank is not None else None for shape in shapes]


def scratch_graph(name: str = "pfor_trial"):
    """A throw-away function graph for trial conversions (captures outer tensors)."""
    return func_graph.FuncGraph(name)


def stand_in(original, stacked: bool, n_static):
    """A placeholder layout value like the body tensor ``original``, stacked or not:
    what a trial conversion (``ctx.trial``) returns instead of building the op."""
    if not stacked:
        return Invariant(tensor=tf.raw_ops.Placeholder(dtype=original.dtype,
                                                       shape=original.shape))
    if original.dtype == tf.variant:  # a stacked list keeps a scalar handle
        return Stacked(tensor=tf.raw_ops.Placeholder(dtype=tf.variant, shape=[]))
    shape = tf.TensorShape([n_static]).concatenate(original.shape)
    return Stacked(tensor=tf.raw_ops.Placeholder(dtype=original.dtype, shape=shape))


def with_effects(tensors, effects) -> list:
    """``tensors`` (or tuples of them) plus a token, all made to run after the ops in
    ``effects``; a function returning them runs its side effects even when nothing
    reads them."""
    with tf.control_dependencies(effects or None):
        return [tf.nest.map_structure(tf.identity, t) for t in tensors] + [tf.constant(0)]


def select_rows(pick, new, old):
    """Per row (the first axis), ``new`` where ``pick`` (a bool vector) holds, else ``old``."""
    rows = tf.reshape(pick, tf.concat([tf.shape(pick), tf.ones_like(tf.shape(new))[1:]], 0))
    return tf.where(rows, new, old)


def is_handle(value) -> bool:
    """Tensor lists and resources: values with no rows to gather."""
    return value.dtype in (tf.variant, tf.resource)
