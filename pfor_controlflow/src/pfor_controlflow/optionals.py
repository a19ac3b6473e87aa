"""Optionals (what tf.cond's gradient uses to pass a branch's intermediates on).

A stacked optional keeps one scalar variant handle whose components carry the
iteration axis, like a stacked tensor list. Under a per-iteration predicate, output
slot j of a conditional holds, per row, the intermediates of the branch that row
took, and the branches' intermediates differ in number, type and shape. So the
converted output is a ``SplitOptional``: the components of every branch's part, each
filled in that branch's rows (zeros elsewhere), one after the other. The gradient
conditional (same predicate, branches in the same order) hands each of its branches
its own part.

A component that is a tensor list (a while loop's accumulator, when the loop is in a
branch) has no rows to place: it stays as the branch made it, its rows those of the
branch in order, which is how the gradient conditional's branch sees them again.
"""

from __future__ import annotations

import tensorflow as tf

import dataclasses

from pfor_core.extend import Invariant, Stacked, View

_R = tf.raw_ops


def _producer(tensor):
    while tensor.op.type == "Identity":
        tensor = tensor.op.inputs[0]
    return tensor.op


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
        start = sum(len(p[0]) for p in self.parts[:b] if p is not None)
        dtypes, shapes = self.parts[b]
        every = [(d, s) for p in self.parts if p is not None for d, s in zip(*p)]
        values = _R.OptionalGetValue(
            optional=self.tensor, output_types=[d for d, _ in every],
            output_shapes=[stacked_shape(d, s) for d, s in every])
        return list(values[start:start + len(dtypes)])


def stacked_shape(dtype, shape) -> tf.TensorShape:
    """The shape of a stacked component (a tensor list keeps its scalar handle)."""
    return shape if dtype == tf.variant else tf.TensorShape([None]).concatenate(shape)


def rows_of(component, positions):
    """The rows at ``positions`` of a stacked component; a tensor list is already a
    branch's own (see the module docstring)."""
    return component if component.dtype == tf.variant else tf.gather(component, positions)


def output_spec(graph, j):
    """(dtypes, shapes) of the components of a branch's optional output ``j``, or
    None for an OptionalNone; raises ValueError for other variants."""
    op = _producer(graph.outputs[j])
    if op.type == "OptionalNone":
        return None
    if op.type != "OptionalFromValue":
        raise ValueError(f"output {j} is a variant other than an optional")
    if not all(t.shape.is_fully_defined() for t in op.inputs):
        raise ValueError(f"output {j} holds intermediates of no static shape")
    return [t.dtype for t in op.inputs], [t.shape for t in op.inputs]


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


def components(value, spec, n) -> list[tf.Tensor]:
    """The components of an optional layout value as stacked tensors of ``n`` rows."""
    dtypes, shapes = spec
    stacked = value.is_stacked
    shapes = [stacked_shape(d, s) if stacked else s for d, s in zip(dtypes, shapes)]
    parts = _R.OptionalGetValue(optional=value.tensor, output_types=dtypes,
                                output_shapes=shapes)
    if stacked:
        return list(parts)
    if tf.variant in dtypes:
        raise ValueError("an invariant tensor list among a branch's intermediates")
    return [tf.broadcast_to(p[None], tf.concat([tf.reshape(n, [1]), tf.shape(p)], 0))
            for p in parts]


def zeros(spec, n) -> list[tf.Tensor]:
    """Components of ``n`` rows for rows whose branch gave no value (never read)."""
    return [tf.zeros(tf.concat([tf.reshape(n, [1]), tf.constant(s.as_list(), tf.int32)], 0), d)
            for d, s in zip(*spec)]


def split(parts, positions, pieces, n) -> SplitOptional:
    """Each branch's components placed in its rows: ``pieces[b]`` for ``positions[b]``."""
    rows = tf.reshape(n, [1])
    filled = [c if c.dtype == tf.variant else
              tf.scatter_nd(p[:, None], c, tf.concat([rows, tf.shape(c)[1:]], 0))
              for p, cs in zip(positions, pieces) for c in cs]
    return SplitOptional(tensor=_R.OptionalFromValue(components=filled) if filled
                         else _R.OptionalNone(), parts=tuple(parts))


def wrap(tensors) -> Stacked:
    return Stacked(tensor=_R.OptionalFromValue(components=list(tensors)))


def none() -> Invariant:
    return Invariant(tensor=_R.OptionalNone())


def convert_from_value(ctx):
    return wrap([ctx.stack(v) for v in ctx.inputs])


def convert_get_value(ctx):
    (value,) = ctx.inputs
    if not value.is_stacked:
        return ctx.decline("an invariant optional reads the same in every iteration")
    dtypes, shapes = list(ctx.attr("output_types")), ctx.attr("output_shapes")
    stacked = [tf.TensorShape(s) if d == tf.variant else
               tf.TensorShape([ctx.n_static]).concatenate(s) for d, s in zip(dtypes, shapes)]
    if isinstance(value, SplitOptional):
        # Outside a matching conditional: the parts of this type (in disjoint rows) add up.
        parts = [b for b, p in enumerate(value.parts) if p is not None and p[0] == dtypes
                 and [s.as_list() for s in p[1]] == [tf.TensorShape(s).as_list() for s in shapes]]
        if not parts:
            return ctx.decline("no branch's intermediates have the types read")
        sums = [tf.add_n(list(c)) for c in zip(*(value.part(b) for b in parts))]
        return [Stacked(tensor=tf.ensure_shape(t, s)) for t, s in zip(sums, stacked)]
    parts = _R.OptionalGetValue(optional=value.tensor, output_types=dtypes,
                                output_shapes=stacked)
    return [Stacked(tensor=p) for p in parts]


def register(registry):
    registry.add("OptionalFromValue", convert_from_value)
    registry.add("OptionalGetValue", convert_get_value, inputs="S", views=True)
