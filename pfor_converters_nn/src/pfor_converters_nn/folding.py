"""The iteration axis folded into a kernel's batch axis and back, for ops whose batch
entries are independent (pooling, convolutions, image ops, LRN): a stacked value
``[n, b, ...]`` becomes ``[n*b, ...]``, the op runs once, and its result splits back
into ``[n, b, ...]`` (the core's ``fold_into_batch`` / ``unfold_from_batch``, with the
sizes read from the converter's inputs)."""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import fold_into_batch, shapes, unfold_from_batch


def fold(ctx, k: int) -> tf.Tensor:
    """Input ``k`` as ``[n*b, ...]`` (tiled first if invariant)."""
    return fold_into_batch(ctx.stacked(k), ctx.n)


def batch_of(ctx, k: int):
    """Per-iteration batch size of input ``k``."""
    value = ctx.inputs[k]
    if value.is_stacked:
        return ctx.dims(value)[1]
    return shapes.dims(value.tensor)[0]


def unfold(ctx, tensor: tf.Tensor, k: int, shape=None) -> tf.Tensor:
    """``[n*b, ...]`` -> ``[n, b, ...]``, b taken from input ``k``; the per-iteration
    dims from ``shape`` where static (kernels give odd shapes for an empty batch)."""
    return unfold_from_batch(tensor, ctx.n_dim, batch_of(ctx, k), shape)
