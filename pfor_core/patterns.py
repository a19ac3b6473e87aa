"""Pattern builders: converters for whole families of ops, one line per family.

- ``elementwise``: unary ops that act on each element alone; the stacked input is
  passed through the same op.
- ``broadcasting``: n-ary ops with numpy broadcasting; stacked inputs get size-1 axes
  after the stacked axis so every input lines up from the right.
- ``batch_polymorphic(batched_inputs)``: ops whose kernels already accept leading batch
  dimensions (most of tf.linalg); the stacked axis is one more batch dimension.
- ``fold_into_batch`` / ``unfold_from_batch``: for kernels that treat the entries of
  their batch axis (axis 0) independently (pooling, convolutions, image ops): the
  stacked axis folds into the batch, ``[n, b, ...] -> [n*b, ...]``, one op runs, and
  its result splits back.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from pfor_core import shapes


def elementwise(ctx):
    """Unary elementwise op: apply to the stacked tensor as it is."""
    if ctx.pattern != "S":
        return ctx.decline(f"elementwise converter expects one stacked input, got {ctx.pattern}")
    return ctx.emit_stacked(ctx.inputs[0].tensor)


def broadcasting(ctx):
    """N-ary elementwise op with broadcasting between inputs (ranks known or not:
    unknown ones are lined up at run time)."""
    rank = shapes.max_rank(ctx.inputs)
    tensors = [shapes.insert_axes(v.tensor, rank, ctx.n) if v.is_stacked
               else shapes.lift_contraction(v.tensor, rank + 1) if isinstance(rank, int)
               else v.tensor for v in ctx.inputs]
    return ctx.emit_stacked(*tensors)


def fold_into_batch(tensor, n=None):
    """A stacked tensor ``[n, b, ...]`` as one batch ``[n*b, ...]`` (``n``, the loop
    length as an int or scalar tensor, keeps the result's static shape where known).

    Where the tensor was just split from that very shape (a folded op's output), the
    unsplit tensor is returned, so that folded ops stay adjacent for grappler.

    >>> import tensorflow as tf
    >>> from pfor_core.extend import fold_into_batch
    >>> fold_into_batch(tf.zeros([2, 3, 4])).shape
    TensorShape([6, 4])
    """
    return shapes.merge_leading(tensor, 2, n)


def unfold_from_batch(tensor, n, batch, shape=None):
    """Undo ``fold_into_batch``: ``[n*b, ...] -> [n, b, ...]``.

    ``n`` and ``batch`` (b) are ints or scalar tensors; b comes from an input, so that
    ``n == 0`` keeps the per-iteration batch size instead of dividing by zero.
    ``shape``, if given, is a ``tf.TensorShape`` of known rank for one iteration's
    result, batch first (e.g. the op's static output shape): its known dimensions after
    the batch replace the tensor's (kernels give odd shapes for an empty batch).

    >>> import tensorflow as tf
    >>> from pfor_core.extend import unfold_from_batch
    >>> unfold_from_batch(tf.zeros([6, 4]), 2, 3).shape
    TensorShape([2, 3, 4])
    """
    rest = shapes.dims(tensor)[1:]
    if shape is not None:
        rest = [s if s is not None else rest[k] for k, s in enumerate(shape.as_list()[1:])]
    return shapes.reshape(tensor, [n, batch] + rest)


def _input_indices(batched_inputs) -> frozenset:
    """``batched_inputs`` as a set of input positions, or a clear error."""
    ok = isinstance(batched_inputs, (list, tuple, set, frozenset, range)) and all(
        isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 0
        for k in batched_inputs)
    if not ok:
        raise TypeError(f"batched_inputs must be a list of input positions (ints >= 0, "
                        f"e.g. batched_inputs=[0, 1]) or None for all inputs, got "
                        f"{batched_inputs!r}.")
    return frozenset(int(k) for k in batched_inputs)


def batch_polymorphic(batched_inputs: Iterable[int] | None = None):
    """Converter for ops whose kernels take extra leading batch dimensions.

    ``batched_inputs`` lists the inputs with batch dimensions (default: all); the
    others (e.g. a band width) must be invariant. Invariant batched inputs are tiled
    when another is stacked, because not every such kernel broadcasts batch dims.
    """
    batched = None if batched_inputs is None else _input_indices(batched_inputs)
    if batched is None:
        inputs = "*..."
    else:
        inputs = "".join("*" if k in batched else "U" for k in range(max(batched, default=-1) + 1))
        inputs += "U..."

    def convert_batch_polymorphic(ctx):
        picked = range(len(ctx.inputs)) if batched is None else batched
        for k, v in enumerate(ctx.inputs):
            if v.is_stacked and k not in picked:
                return ctx.decline(f"input {k} is stacked but is not a batched input")
        tensors = [ctx.stacked(k) if k in picked else v.tensor
                   for k, v in enumerate(ctx.inputs)]
        return ctx.emit_stacked(*tensors)

    convert_batch_polymorphic.batched_inputs = batched
    convert_batch_polymorphic.inputs = inputs  # the pattern it handles
    return convert_batch_polymorphic
