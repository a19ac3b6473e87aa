"""Tracing ``loop_fn`` into an isolated body graph.

The body is traced into its own ``FuncGraph`` whose outer graph is the caller's, with a
scalar int32 placeholder for the loop index. Tensors of the caller that the body uses
become captures: the loop-invariant inputs. Nothing of the unconverted body is left in
the caller's graph. Composite values the body returns travel as their dense components
(``composites``) and are rebuilt, stacked, by ``TracedBody.pack``.
"""

from __future__ import annotations

import dataclasses
import itertools

import tensorflow as tf
from tensorflow.python.framework import func_graph as func_graph_module
from tensorflow.python.framework import ops

from pfor_core import call_values, collectives, composites, eager_values

_names = itertools.count()


@dataclasses.dataclass(frozen=True, kw_only=True)
class TracedBody:
    graph: func_graph_module.FuncGraph
    index: tf.Tensor  # the loop-index placeholder in ``graph``
    outputs: list  # flat body tensors, one per output leaf
    structure: object  # the nested structure loop_fn returned (leaves as returned)
    encoded: list  # per leaf of ``structure``: its dense tensors and how to rebuild it
    captures: list  # (caller tensor, body placeholder) pairs

    @property
    def names(self) -> list[str]:
        """A name for each flat output, for messages (``output[0]``, ``output/key``)."""
        return [name for e in self.encoded for name in e.names]

    @property
    def ragged(self) -> list[bool]:
        """Per flat output: whether it is a component of a returned ``tf.RaggedTensor``
        (then it comes back ragged without ``ragged_outputs``)."""
        return [e.ragged for e in self.encoded for _ in e.tensors]

    def pack(self, outputs):
        """The structure loop_fn returned, from the stacked forms of ``outputs`` (one
        per body output): composite values are rebuilt from their components."""
        values, k = [], 0
        for encoded in self.encoded:
            count = len(encoded.tensors)
            values.append(encoded.rebuild(list(outputs[k:k + count])))
            k += count
        return tf.nest.pack_sequence_as(self.structure, values)


def _encode(leaf, path) -> composites.Encoded:
    """A returned leaf as the dense tensors pfor stacks (several for a composite, none
    for ``None``, which comes back as ``None``, as from ``tf.vectorized_map``)."""
    if leaf is None:
        return composites.Encoded([], lambda ts: None, path=path)
    encoded = composites.encode_output(leaf, path)
    return composites.Encoded([_to_tensor(t, path) for t in encoded.tensors],
                              encoded.rebuild, ragged=encoded.ragged, path=path)


def _to_tensor(leaf, path):
    if isinstance(leaf, tf.Tensor):
        return leaf
    if isinstance(leaf, tf.Variable):
        return leaf.read_value()
    if isinstance(leaf, (str, bytes)) or callable(leaf):
        raise TypeError(_not_a_tensor(leaf, path))
    try:
        return tf.convert_to_tensor(leaf)
    except (TypeError, ValueError) as err:
        raise TypeError(_not_a_tensor(leaf, path)) from err


def _not_a_tensor(leaf, path) -> str:
    # TensorFlow Probability recognizes a body's non-tensor result by TensorFlow's own
    # phrase ("Failed to convert elements") to give its advice: the text keeps it.
    return (f"loop_fn returned {type(leaf).__name__} at {path}, which is not a tensor "
            f"(Failed to convert elements of {type(leaf).__name__} to Tensor); loop_fn "
            "must return tensors, composite tensors with a batchable type spec "
            "(extension types, SparseTensors, RaggedTensors, ...) or None, alone or in "
            "a nested structure (tuple, list, dict).")


def trace_body(loop_fn, *, name: str = "pfor_body") -> TracedBody:
    """Trace ``loop_fn(i)`` into a new body graph under the current default graph."""
    python_fn = loop_fn
    holder = {}

    def body(i):
        result = python_fn(i)
        encoded = [_encode(leaf, path) for path, leaf in _paths(result)]
        holder["structure"] = result
        holder["encoded"] = encoded
        return [t for e in encoded for t in e.tensors]

    graph = func_graph_module.FuncGraph(f"{name}_{next(_names)}")
    setattr(graph, collectives.BODY_MARK, True)  # lets pf.all_sum & co. know they are inside
    func_graph_module.func_graph_from_py_func(
        graph.name, body, args=(), kwargs={},
        signature=[tf.TensorSpec([], tf.int32, name="loop_index")],
        func_graph=graph, add_control_dependencies=True)
    return TracedBody(graph=graph, index=graph.inputs[0], outputs=list(graph.outputs),
                      structure=holder["structure"], encoded=holder["encoded"],
                      captures=_in_graph_captures(graph))


def _in_graph_captures(graph):
    """The body's captures, each outer value a tensor of the caller's graph.

    A body traced under a function graph captures a large eager tensor or an eager
    variable's handle directly (an ``EagerTensor``, which has no ``.op`` or ``.graph``
    and which converters cannot treat like the graph tensors they are given): the
    caller's function graph captures it too, so converters see its placeholder. A
    ``tf.compat.v1`` graph cannot capture eager values: there an eager tensor becomes a
    constant of its value and an eager variable is a clear error (eager_values.py).
    """
    outer = ops.get_default_graph()
    variables = {id(v.handle): v for v in graph.variables
                 if isinstance(getattr(v, "handle", None), ops.EagerTensor)}
    captures = []
    for external, internal in graph.captures:
        if isinstance(external, ops.EagerTensor):
            if outer.building_function:
                external = outer.capture(external)
            else:
                external = eager_values.graph_value(
                    external, _user_of(internal), variable=variables.get(id(external)))
        captures.append((external, internal))
    return captures


def _user_of(internal) -> str:
    """Who in the body uses a capture, for messages: "loop_fn uses" and, where it is
    known, the body op that reads it (locating it in a model whose variables have no
    telling names)."""
    users = internal.consumers()
    return f"loop_fn (its op '{users[0].name}') uses" if users else "loop_fn uses"


def _paths(structure):
    """(path string, leaf) pairs in ``tf.nest.flatten`` order."""
    from tensorflow.python.util import nest

    flat = nest.flatten_with_joined_string_paths(structure)
    return [("output" + ("/" + p if p else ""), leaf) for p, leaf in flat]


def on_eager_values(body: TracedBody) -> TracedBody:
    """``body`` with each capture's caller tensor replaced by the eager value the
    caller's function graphs captured it from (to run it out of the graph being built:
    budget.probed); ValueError where a capture is a graph's own tensor."""
    captures = []
    for external, internal in body.captures:
        value = call_values.value_of(external, calls=False)
        if value is None:
            raise ValueError(f"the body captures '{external.name}', a tensor of the graph "
                             "being built: no value to measure a run with")
        captures.append((value, internal))
    return dataclasses.replace(body, captures=captures)
