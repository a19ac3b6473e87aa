"""Shape helpers converters share: static where known, dynamic where not.

They emit as few ops as static shape information allows (a converted body should cost
about as many graph ops as the body itself), and never use -1 in a reshape, which is
ambiguous when n is 0.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context, execute
from tensorflow.python.framework import ops

from pfor_core import call_values


class RankUnknown(ValueError):
    """A shape helper needed a static rank: the converter declines (see the walk)."""


def dims(tensor: tf.Tensor, n=None) -> list:
    """Each dimension as a Python int where static, else a scalar int32 tensor.

    Pass ``n=ctx.n`` for a stacked tensor: its axis 0 is then taken from the loop
    length instead of ``tf.shape`` of the tensor. That matters when n is known only at
    run time: a shape read off a deep tensor makes TensorFlow's shape inference walk
    the whole graph above it for every reshape (quadratic conversion time).
    """
    static = tensor.shape.as_list() if tensor.shape.rank is not None else None
    if static is None:
        raise RankUnknown("an input's rank is unknown (this converter needs it statically)")
    if n is not None and static and static[0] is None:
        n_static = tf.get_static_value(n)
        static[0] = int(n_static) if n_static is not None else None
        if static[0] is None and all(d is not None for d in static[1:]):
            return [tf.cast(n, tf.int32)] + static[1:]
    if all(d is not None for d in static):
        return static
    # One Unpack gives every dimension (a slice of the shape per dimension is 4 ops).
    dynamic = tf.unstack(tf.shape(tensor, out_type=tf.int32), num=len(static))
    first = [tf.cast(n, tf.int32)] if n is not None and static[0] is None else []
    return first + [d if d is not None else dynamic[k]
                    for k, d in enumerate(static) if not (first and k == 0)]


def shape_tensor(parts: list) -> tf.Tensor | list:
    """A shape from a list of ints and scalar tensors (a plain list when all static)."""
    if all(isinstance(p, int) for p in parts):
        return parts
    return tf.stack([tf.cast(p, tf.int32) if isinstance(p, tf.Tensor) else p for p in parts])


def product(parts: list):
    out = 1
    for p in parts:
        out = out * p
    return out


def reshape(tensor: tf.Tensor, parts: list) -> tf.Tensor:
    """``tensor`` reshaped to ``parts`` (ints and scalar tensors whose product is its
    size). One dynamic part among positive static ones is given as -1: a constant
    shape, with no ops computing it in every run."""
    dynamic = [k for k, p in enumerate(parts) if not isinstance(p, int)]
    if len(dynamic) == 1 and all(p > 0 for p in parts if isinstance(p, int)):
        out = tf.reshape(tensor, [-1 if k == dynamic[0] else p for k, p in enumerate(parts)])
        static = tf.get_static_value(parts[dynamic[0]])
        if static is not None:
            out.set_shape([int(static) if k == dynamic[0] else p for k, p in enumerate(parts)])
        return out
    return tf.reshape(tensor, shape_tensor(parts))


def merge_leading(tensor: tf.Tensor, count: int = 2, n=None) -> tf.Tensor:
    """Fold the first ``count`` dimensions into one: [n, b, ...] -> [n*b, ...]."""
    d = dims(tensor, n)
    merged = [product(d[:count])] + d[count:]
    source = _reshaped_from(tensor)
    if source is not None and all(isinstance(x, int) for x in merged) and (
            source.shape.as_list() == merged):
        # The value was just split from this very shape (a folded op's output): use it
        # as it was, so that the ops stay adjacent for grappler's and oneDNN's rewrites.
        return source
    return reshape(tensor, merged)


def _reshaped_from(tensor):
    """The input of the Reshape that made ``tensor`` in the current graph, or None."""
    op = getattr(tensor, "op", None)
    if op is None or op.type != "Reshape" or op.graph is not tf.compat.v1.get_default_graph():
        return None
    source = op.inputs[0]
    return source if source.shape.is_fully_defined() else None


def insert_axes(stacked: tf.Tensor, rank, n=None) -> tf.Tensor:
    """Give a stacked value per-iteration rank ``rank`` by adding size-1 axes after the
    stacked axis, so that it broadcasts against others of that rank.

    ``rank`` may be a scalar tensor and ``stacked`` of unknown rank: the axes are then
    added at run time (none where the value already has that rank)."""
    if isinstance(rank, int) and stacked.shape.rank is not None:
        have = stacked.shape.rank - 1
        if have >= rank:
            return stacked
        d = dims(stacked, n)
        return reshape(stacked, d[:1] + [1] * (rank - have) + d[1:])
    shape = tf.shape(stacked, out_type=tf.int32)
    missing = tf.maximum(tf.cast(rank, tf.int32) - (tf.size(shape) - 1), 0)
    ones = tf.ones(tf.reshape(missing, [1]), tf.int32)
    return tf.reshape(stacked, tf.concat([shape[:1], ones, shape[1:]], 0))


def rank_of(value):
    """The per-iteration rank of a layout value: an int where static, else a scalar
    int32 tensor."""
    if value.shape.rank is not None:
        return value.shape.rank
    return tf.rank(value.tensor) - int(value.is_stacked)


def max_rank(values):
    """The largest per-iteration rank of layout values (an int where all are static)."""
    ranks = [rank_of(v) for v in values]
    if all(isinstance(r, int) for r in ranks):
        return max(ranks)
    return tf.reduce_max(tf.stack([tf.convert_to_tensor(r, tf.int32) for r in ranks]))


# Grappler's remapper (TF 2.21) fuses Add(MatMul(a, b), c) into a _FusedMatMul with c
# as its bias even when c has the higher rank, then fails ("bias must be 1-dimensional")
# or silently returns the MatMul's shape. That happens when an invariant product is added
# to a stacked value of size-1 leading dims (one iteration, a one-element jacobian).
_CONTRACTIONS = frozenset({"MatMul", "Conv2D", "Conv3D", "DepthwiseConv2dNative"})


def lift_contraction(tensor: tf.Tensor, rank: int) -> tf.Tensor:
    """``tensor`` with leading size-1 axes up to ``rank`` if it is a contraction's output
    of lower rank (a free reshape that keeps the remapper's pattern from matching)."""
    op = getattr(tensor, "op", None)  # eager tensors have none
    have = tensor.shape.rank
    if op is None or op.type not in _CONTRACTIONS or None in (have, rank) or have >= rank:
        return tensor
    return reshape(tensor, [1] * (rank - have) + dims(tensor))


def normalize_axis(axis: int, rank: int, arg: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"{arg}={axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def widest(sizes):
    """The largest of static ints / scalar tensors (an int when all are static)."""
    if all(isinstance(s, int) for s in sizes):
        return max(sizes)
    return tf.reduce_max(tf.stack([tf.cast(s, tf.int32) for s in sizes]))


def pad_axis(tensor: tf.Tensor, axis: int, width) -> tf.Tensor:
    """``tensor`` zero-padded at the end of ``axis`` to ``width`` (no op if it is)."""
    have = tensor.shape[axis]
    if isinstance(width, int) and have == width:
        return tensor
    extra = width - tf.shape(tensor, out_type=tf.int32)[axis]
    paddings = [[0, 0]] * tensor.shape.rank
    paddings[axis] = [0, extra]
    return tf.pad(tensor, paddings)


def owners(counts, dtype=tf.int32) -> tf.Tensor:
    """``tf.repeat(tf.range(len(counts)), counts)``: the row each of ``sum(counts)``
    elements belongs to, for 1-D non-negative ``counts``. In 14 ops where ``tf.repeat``
    emits 57 (converters of ragged values call it for every op)."""
    counts = tf.convert_to_tensor(counts)
    ends = tf.expand_dims(tf.cumsum(counts), 0)
    steps = tf.expand_dims(tf.range(tf.reduce_sum(counts), dtype=counts.dtype), 0)
    return tf.reshape(tf.raw_ops.UpperBound(sorted_inputs=ends, values=steps,
                                            out_type=dtype), [-1])


def masked_elements(tensor: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """``tf.boolean_mask(tensor, mask)`` for a boolean ``mask`` of ``tensor``'s leading
    dimensions (static rank): the elements (or slices) where it is True, in row-major
    order. One gather of the rows, where ``boolean_mask`` emits 27 ops."""
    mask = tf.convert_to_tensor(mask)
    where = tf.reshape(tf.where(tf.reshape(mask, [-1])), [-1])
    inner = dims(tensor)[mask.shape.rank:]
    # The rows are counted, not -1: a reshape cannot infer a size next to a 0.
    rows = reshape(tensor, [tf.size(mask, out_type=tf.int32)] + inner)
    return tf.gather(rows, where)


def known_value(tensor: tf.Tensor, max_ops: int = 32, calls: bool = True):
    """``tensor``'s value where it follows from constants alone, else None: what
    ``tf.get_static_value`` finds, or else the value of the few (at most ``max_ops``)
    stateless ops between it and constants or eager tensors a function captured, run
    eagerly; with ``calls`` also the arguments of an eager call being traced
    (call_values.py). For choices made while converting (a loop's trip counts), never
    results."""
    value = tf.get_static_value(tensor)
    if value is not None or isinstance(tensor, ops.EagerTensor):
        return value
    known: dict = {}
    budget = [max_ops]

    def value_of(t):
        if id(t) not in known:
            known[id(t)] = _fold(t.op, value_of, calls, budget)
        out = known[id(t)]
        return None if out is None else out[t.value_index]

    return value_of(tensor)


def _fold(op, value_of, calls, budget):
    """The values of ``op``'s outputs, run eagerly on its inputs' known values, or None."""
    if op.type == "Placeholder":
        if op.outputs[0].dtype in (tf.variant, tf.resource):
            return None  # (a handle has no value to fold)
        eager = call_values.value_of(op.outputs[0], calls)
        return None if eager is None else [eager.numpy()]
    if op.type == "Const":
        return [tf.get_static_value(op.outputs[0])]
    if op.type == "Shape" and op.inputs[0].shape.is_fully_defined():
        return [np.array(op.inputs[0].shape.as_list(), op.outputs[0].dtype.as_numpy_dtype)]
    budget[0] -= 1
    if (budget[0] < 0 or op._is_stateful or op.control_inputs  # pylint: disable=protected-access
            or any(t.dtype in (tf.variant, tf.resource) for t in op.outputs)):
        return None
    attrs = []
    for name, attr in op.node_def.attr.items():
        if name.startswith("_"):
            continue
        if attr.WhichOneof("value") not in ("type", "i", "f", "b", "s") and not (
                attr.WhichOneof("value") == "list" and not attr.list.func
                and not attr.list.shape and not attr.list.tensor):
            return None  # (shapes, tensors, functions: not folded here)
        value = op.get_attr(name)
        if isinstance(value, tf.DType):
            value = value.as_datatype_enum
        elif isinstance(value, list):
            value = [v.as_datatype_enum if isinstance(v, tf.DType) else v for v in value]
        attrs.extend((name, value))
    inputs = [value_of(t) for t in op.inputs]
    if any(v is None for v in inputs):
        return None
    with ops.init_scope():
        try:
            out = execute.execute(op.type, len(op.outputs),
                                  [tf.constant(v, t.dtype) for v, t in zip(inputs, op.inputs)],
                                  tuple(attrs), context.context())
        except (tf.errors.OpError, TypeError, ValueError):
            return None
    return [t.numpy() for t in out]
