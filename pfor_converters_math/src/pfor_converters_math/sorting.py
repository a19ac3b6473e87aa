"""Sorting and searching in every layout: TopKV2 (what tf.sort / tf.argsort emit) and its
first version TopK (k an attr), NthElement, LowerBound / UpperBound (tf.searchsorted).

TopKV2, TopK and NthElement work on the last axis, so a stacked input is converted as it
is (k / n must be invariant). TopK, which TensorFlow no longer builds (a graph imported
from an old GraphDef may hold it), becomes TopKV2 with its k. The bound searches take
rank-2 ``[batch, m]`` operands with equal batch sizes: the iteration axis merges into
the batch; invariant sorted rows against stacked values put the iterations' values side
by side as extra columns instead of tiling the sorted rows.

``tf.math.top_k`` with a per-iteration ``k``: values and indices ragged along their last
dimension. One TopKV2 with the largest ``k`` (``W``): its first ``k_j`` columns are
iteration j's top ``k_j``, ties included (the kernel keeps the lower index first whatever
``k``); the rest is masked. Under XLA ``W`` is the input's static last dimension, which
bounds every valid ``k``.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import ConversionError, Decline, Ragged, Stacked, shapes


def convert_last_axis(ctx):
    """Ops acting on the last axis with an invariant size argument (k, n)."""
    return ctx.emit_stacked(*[v.tensor for v in ctx.inputs])


def convert_top_k_v1(ctx):
    """TopK (k an attr): TopKV2 on the stacked input, k as its input."""
    values, indices = tf.math.top_k(ctx.inputs[0].tensor, k=ctx.attr("k"),
                                    sorted=ctx.attr("sorted"))
    return [Stacked(tensor=values), Stacked(tensor=indices)]


def _rank_two(ctx):
    sorted_inputs, values = ctx.inputs
    if sorted_inputs.shape.rank != 2 or values.shape.rank != 2:
        raise Decline("LowerBound/UpperBound operands must have rank 2")
    return sorted_inputs, values


def convert_bound(ctx):
    """Stacked sorted rows: each iteration's rows join the batch; invariant values are
    tiled (they are needed once per iteration's rows)."""
    sorted_inputs, _ = _rank_two(ctx)
    vals = ctx.stacked(1)
    out = ctx.emit(shapes.merge_leading(sorted_inputs.tensor, n=ctx.n),
                   shapes.merge_leading(vals, n=ctx.n))[0]
    return Stacked(tensor=shapes.reshape(out, ctx.dims(vals)))


def convert_bound_invariant_sorted(ctx):
    """Invariant sorted rows, stacked values: the values side by side as columns."""
    sorted_inputs, values = _rank_two(ctx)
    return Stacked(tensor=_bound_invariant_sorted(ctx, sorted_inputs.tensor, values.tensor))


def _bound_invariant_sorted(ctx, sorted_rows, values):
    """sorted ``[b, m]`` invariant, values ``[n, b, k]``: search ``[b, n*k]`` at once."""
    d = ctx.dims(values)
    if isinstance(d[1], int) and d[1] == 1:
        # tf.searchsorted on vectors: a reshape suffices, no transposes.
        out = ctx.emit(sorted_rows, shapes.reshape(values, [1, d[0] * d[2]]))[0]
        return shapes.reshape(out, d)
    cols = shapes.reshape(tf.transpose(values, [1, 0, 2]), [d[1], d[0] * d[2]])
    out = ctx.emit(sorted_rows, cols)[0]
    return tf.transpose(shapes.reshape(out, [d[1], d[0], d[2]]), [1, 0, 2])


def convert_top_k_ragged(ctx):
    """TopKV2 with a stacked k (input stacked or invariant)."""
    x, k = ctx.inputs
    if not ctx.attr("sorted"):
        return ctx.decline("sorted=False (the order of the top k then depends on k)")
    if x.shape.rank is None or x.shape.rank < 1:
        return ctx.decline("needs an input of known rank >= 1")
    ks = tf.cast(k.tensor, tf.int32)
    columns = x.shape[-1]
    if ctx.compiled:
        if columns is None:
            raise ConversionError(
                f"pfor: {ctx.op_type} '{ctx.op.name}' has a per-iteration k and an input "
                "whose last dimension is known only at run time, which XLA cannot pad "
                "to a size known at compile time; give the input a static shape.")
        width = columns
    else:
        width = tf.maximum(tf.reduce_max(ks), 0)
    last = tf.shape(x.tensor)[-1]
    valid = tf.reduce_all((ks >= 0) & (ks <= last))
    # Clipped, so the op itself never fails: the check below fails where the loop would.
    width = tf.minimum(tf.convert_to_tensor(width, tf.int32), last)
    values, indices = ctx.emit(x.tensor, tf.cast(width, k.dtype))
    message = "k must be in [0, the input's last dimension] (as the kernel)"
    values = ctx.check(valid, message, tensor=values)
    indices = ctx.check(valid, message, tensor=indices)
    lengths = [None] * (x.shape.rank - 1) + [ks]
    if not x.is_stacked:
        values, indices = ctx.stack(values), ctx.stack(indices)
    return [Ragged.from_stacked(values, lengths), Ragged.from_stacked(indices, lengths)]


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(["TopKV2", "NthElement"], convert_last_axis, inputs="SU")
    registry.add("TopK", convert_top_k_v1, inputs="S")
    registry.add(["LowerBound", "UpperBound"], convert_bound, inputs="S*")
    registry.add(["LowerBound", "UpperBound"], convert_bound_invariant_sorted, inputs="US")
    registry.add("TopKV2", convert_top_k_ragged, inputs="*S")  # a per-iteration k
