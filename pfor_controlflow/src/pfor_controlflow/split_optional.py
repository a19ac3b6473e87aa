"""The layout of a conditional's optional output under a per-iteration predicate: a
``SplitOptional`` holds one part per branch, each part's components stacked (see
conditionals/optionals.py). Here, below the lists and the conditionals, because the
tensor-list converters meet such optionals too (a push of one onto a list)."""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from pfor_core.extend import Stacked, View
from pfor_controlflow.functions import branch_functions

_R = tf.raw_ops


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class SplitOptional(View):
    """A stacked optional holding one part per branch: ``parts[b]`` is the
    (dtypes, shapes) spec of branch b's part, or None. ``tensor`` is the optional of
    every part's components, one after the other."""

    parts: tuple

    def materialize(self) -> Stacked:
        """The stacked optional of all parts' components, as a plain value."""
        return Stacked(tensor=self.tensor)

    def part(self, b) -> list[tf.Tensor]:
        """Branch ``b``'s components (all rows)."""
        start = sum(len(encoded(p)[0]) for p in self.parts[:b] if p is not None)
        dtypes, _ = encoded(self.parts[b])
        return held(self.tensor, self.parts)[start:start + len(dtypes)]


def every(parts) -> list[tuple]:
    """The (dtype, shape) of each component a split optional of ``parts`` holds."""
    return [(d, s) for p in parts if p is not None for d, s in zip(*encoded(p))]


def held(optional, parts) -> list[tf.Tensor]:
    """The stacked components of a split ``optional`` of ``parts``."""
    spec = every(parts)
    if not spec:
        return []
    return list(_R.OptionalGetValue(optional=optional, output_types=[d for d, _ in spec],
                                    output_shapes=[stacked_shape(d, s) for d, s in spec]))


def same_parts(a, b) -> bool:
    """Whether two split optionals' parts hold the same components."""
    def key(parts):
        return None if parts is None else [
            None if p is None else [(d, str(tf.TensorShape(s))) for d, s in zip(*p)]
            for p in parts]
    return key(a) == key(b)


def rebuilt(components) -> tf.Tensor:
    return _R.OptionalFromValue(components=components) if components else _R.OptionalNone()


def made_parts(tensor):
    """The parts of the optional ``tensor`` (a body tensor) where a conditional's
    output gives it (one per branch, as its branch made it), else None."""
    while tensor.op.type == "Identity":
        tensor = tensor.op.inputs[0]
    graphs = branch_functions(tensor.op) if tensor.op.type in _CONDITIONALS else None
    if graphs is None:
        return None
    try:
        return tuple(output_spec(g, tensor.value_index) for g in graphs)
    except ValueError:
        return None


def read_parts(tensor):
    """The parts of the optional ``tensor`` where a conditional reads it (one per
    branch, as its branch reads it), else None."""
    for op in tensor.consumers():
        if op.type == "Identity":
            found = read_parts(op.outputs[0])
            if found is not None:
                return found
        elif op.type in _CONDITIONALS:
            graphs = branch_functions(op)
            k = next(j for j, t in enumerate(op.inputs) if t is tensor) - 1
            if graphs is not None and k >= 0:
                return tuple(input_spec([g], k) for g in graphs)
    return None


_CONDITIONALS = ("If", "StatelessIf", "Case", "StatelessCase")


def output_spec(graph, j):
    """(dtypes, shapes) of the components of a branch's optional output ``j``, or
    None for an OptionalNone; raises ValueError for other variants."""
    op = graph.outputs[j].op
    while op.type == "Identity":
        op = op.inputs[0].op
    if op.type == "OptionalNone":
        return None
    if op.type != "OptionalFromValue":
        raise ValueError(f"output {j} is a variant other than an optional")
    spec = [t.dtype for t in op.inputs], [t.shape for t in op.inputs]
    encoded(spec)  # (raises for intermediates of unknown rank)
    return spec


def input_spec(graphs, k):
    """(dtypes, shapes) an optional input ``k`` is read with by the branches, or None
    if no branch reads it as an optional."""
    for graph in graphs:
        pending = [graph.inputs[k]]
        while pending:
            for consumer in pending.pop().consumers():
                if consumer.type == "Identity":
                    pending.append(consumer.outputs[0])
                elif consumer.type == "OptionalGetValue":
                    return (list(consumer.get_attr("output_types")),
                            [tf.TensorShape(s) for s in consumer.get_attr("output_shapes")])
    return None


def sized(dtype, shape) -> bool:
    """Whether a component is held with its per-iteration shapes (see
    conditionals/optionals.py's docstring)."""
    return dtype != tf.variant and not tf.TensorShape(shape).is_fully_defined()


def encoded(spec) -> tuple[list, list]:
    """The (dtypes, shapes) a stacked optional holds for components ``spec``: each
    component, followed by its per-iteration shapes where its static shape is not
    fully known. Raises ValueError for a component of unknown rank."""
    dtypes, shapes = [], []
    for dtype, shape in zip(*spec):
        shape = tf.TensorShape(shape)
        dtypes.append(dtype)
        shapes.append(shape)
        if sized(dtype, shape):
            if shape.rank is None:
                raise ValueError("an intermediate of unknown rank")
            dtypes.append(tf.int32)
            shapes.append(tf.TensorShape([shape.rank]))
    return dtypes, shapes


def stacked_shape(dtype, shape) -> tf.TensorShape:
    """The shape of a stacked component (a tensor list keeps its scalar handle)."""
    return shape if dtype == tf.variant else tf.TensorShape([None]).concatenate(shape)
