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

A component whose static shape is not fully known may differ in shape between
iterations (a ragged value: a boolean_mask in a branch): a stacked optional holds it
padded, followed by its per-iteration shapes (int32 ``[n, rank]``), whether it is
ragged or not (``encoded``). Maker and reader see the same static shapes (the
gradient reads what the branch stored), so both know where the shapes are.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Invariant, Ragged, Stacked
from pfor_controlflow.split_optional import (SplitOptional, encoded, output_spec, sized,
                                             stacked_shape)

_R = tf.raw_ops


def _producer(tensor):
    while tensor.op.type == "Identity":
        tensor = tensor.op.inputs[0]
    return tensor.op


def encode(value, shape, stack) -> list[tf.Tensor]:
    """A component's layout value as the stacked tensors an optional holds for it
    (``shape``: its static shape; ``stack``: a layout value's stacked tensor)."""
    if isinstance(value, Ragged):
        return [value.padded, value.shapes()]
    tensor = stack(value)
    if not sized(value.dtype, shape):
        return [tensor]
    if tf.TensorShape(shape).rank is None:
        raise ValueError("an intermediate of unknown rank")
    dims = tf.shape(tensor, out_type=tf.int32)
    return [tensor, tf.tile(dims[None, 1:], tf.stack([dims[0], 1]))]


def decode(parts, dtype, shape):
    """The layout value of a component read from the stacked tensors ``parts`` (an
    iterator) of an optional: ragged along the dimensions not known statically."""
    tensor = next(parts)
    if not sized(dtype, shape):
        return Stacked(tensor=tensor)
    sizes = next(parts)
    shape = tf.TensorShape(shape)
    return Ragged(padded=tensor, lengths=tuple(
        sizes[:, d] if shape[d] is None else None for d in range(shape.rank)))


def rows_of(component, positions):
    """The rows at ``positions`` of a stacked component; a tensor list is already a
    branch's own (see the module docstring)."""
    return component if component.dtype == tf.variant else tf.gather(component, positions)


def is_invariant(value) -> bool:
    """Whether a layout value is an optional the same in every iteration."""
    return (not value.is_stacked and value.dtype == tf.variant
            and not isinstance(value.tensor, tf.__internal__.EagerTensor)
            and _producer(value.tensor).type in ("OptionalNone", "OptionalFromValue"))


def stacked_form(value, graph, j, n) -> tf.Tensor:
    """The invariant optional ``value`` (output ``j`` of ``graph``) as a stacked one
    (components as ``encoded`` says)."""
    spec = output_spec(graph, j)
    if spec is None:
        return value.tensor  # no value in any row
    return wrap(components(value, spec, n)).tensor


def components(value, spec, n) -> list[tf.Tensor]:
    """The components of an optional layout value as stacked tensors of ``n`` rows,
    as a stacked optional holds them (``encoded``)."""
    if value.is_stacked:
        dtypes, shapes = encoded(spec)
        return list(_R.OptionalGetValue(
            optional=value.tensor, output_types=dtypes,
            output_shapes=[stacked_shape(d, s) for d, s in zip(dtypes, shapes)]))
    dtypes, shapes = spec
    if tf.variant in dtypes:
        raise ValueError("an invariant tensor list among a branch's intermediates")
    parts = _R.OptionalGetValue(optional=value.tensor, output_types=dtypes,
                                output_shapes=shapes)
    rows = tf.reshape(n, [1])
    return [t for p, d, s in zip(parts, dtypes, shapes) for t in encode(
        Invariant(tensor=p), s,
        lambda v: tf.broadcast_to(v.tensor[None], tf.concat([rows, tf.shape(v.tensor)], 0)))]


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
    try:
        return wrap([t for v, c in zip(ctx.inputs, ctx.op.inputs)
                     for t in encode(v, c.shape, ctx.stack)])
    except ValueError as err:
        return ctx.decline(str(err))


def convert_get_value(ctx):
    (value,) = ctx.inputs
    if not value.is_stacked:
        return ctx.decline("an invariant optional reads the same in every iteration")
    dtypes, shapes = list(ctx.attr("output_types")), ctx.attr("output_shapes")
    try:
        held = encoded((dtypes, shapes))
    except ValueError as err:
        return ctx.decline(str(err))
    if held[0] != dtypes:  # components that may differ in shape between iterations
        if isinstance(value, SplitOptional):
            return ctx.decline("the parts of a conditional's intermediates of no static "
                               "shape read outside it")
        parts = iter(_R.OptionalGetValue(
            optional=value.tensor, output_types=held[0],
            output_shapes=[tf.TensorShape([ctx.n_static]).concatenate(s) for s in held[1]]))
        return [decode(parts, d, s) for d, s in zip(dtypes, shapes)]
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
