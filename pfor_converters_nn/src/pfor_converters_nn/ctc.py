"""CTC loss and decoders: the iterations fold into the op's own batch.

The kernels take time-major ``inputs [T, B, C]`` and a ``sequence_length [B]``, and treat
every batch entry alone. Iteration j's batch entry b becomes entry ``j * B + b`` of one
call on ``[T, n * B, C]``:

- CTCLoss: the labels are a sparse ``[B, L]`` tensor per iteration (``indices [N, 2]``,
  ``values [N]``), stacked (one N), invariant (tiled) or ragged (N per iteration). Its
  entries, iteration after iteration, stay in the row-major order the kernel checks once
  their batch index is offset by ``j * B``. An index outside ``[0, B)`` would land in
  another iteration's block, so it is checked. The loss ``[n * B]`` and the gradient
  ``[T, n * B, C]`` split back per iteration.
- CTCGreedyDecoder / CTCBeamSearchDecoder: each decoded path is a sparse ``[B, len]``
  tensor per iteration whose entry count differs between iterations: its indices and
  values come out ragged (batch entry after batch entry, so iteration after iteration),
  and its dense shape is ``[B, longest decoding of the iteration]``. Log probabilities
  ``[n * B, k]`` split back. The number of entries has no static bound, so under XLA
  (and in nested pfor bodies) the decoders decline.

The dense ``tf.nn.ctc_loss`` (no sparse labels) is a scan over a Defun ``While`` loop;
the control-flow pack converts it.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Ragged, Stacked, shapes


def _folded_inputs(ctx, logits, lengths):
    """``inputs [T, B, C]`` and ``sequence_length [B]`` of all iterations as one batch:
    ``[T, n*B, C]`` and ``[n*B]`` (invariant ones tiled), and T, B as dims."""
    if logits.shape.rank != 3:
        raise Decline("inputs must have rank 3")
    if logits.is_stacked:
        d = ctx.dims(logits)  # [n, T, B, C]
        time, batch, classes = d[1:]
        folded = shapes.reshape(tf.transpose(logits.tensor, [1, 0, 2, 3]),
                                [time, d[0] * batch, classes])
    else:
        time, batch, classes = shapes.dims(logits.tensor)
        tiled = tf.broadcast_to(logits.tensor[:, None], shapes.shape_tensor(
            [time, ctx.n_dim, batch, classes]))
        folded = shapes.reshape(tiled, [time, ctx.n_dim * batch, classes])
    seq = shapes.reshape(ctx.stack(lengths), [ctx.n_dim * batch])
    return folded, seq, time, batch


def _emit_unless_empty(ctx, inputs, empty_outputs):
    """The op on the folded inputs; the kernels reject a batch of 0, which no iteration
    (n == 0) gives: then ``empty_outputs()`` instead."""
    if ctx.n_static == 0:
        return empty_outputs()
    if ctx.n_static is not None:
        return ctx.emit(*inputs)
    return tf.cond(ctx.n > 0, lambda: ctx.emit(*inputs), empty_outputs)


def _unfold_time_major(ctx, tensor, time, batch):
    """``[T, n*B, C]`` -> stacked ``[n, T, B, C]``."""
    classes = shapes.dims(tensor)[2]
    return tf.transpose(shapes.reshape(tensor, [time, ctx.n_dim, batch, classes]), [1, 0, 2, 3])


def _flat_entries(ctx, value):
    """Every iteration's entries of a sparse component (indices [N, 2] or values [N])
    one after the other, and each entry's iteration (int32)."""
    if isinstance(value, Ragged):
        flat, sizes = value.to_flat()
        counts = sizes[:, 0]
        inner = shapes.dims(value.padded)[2:]
        flat = shapes.reshape(flat, [tf.reduce_sum(counts)] + inner)
        return flat, shapes.owners(counts), counts
    tensor = ctx.stack(value)
    d = ctx.dims(tensor)
    owner = shapes.owners(tf.fill([ctx.n], d[1]))
    counts = tf.fill([ctx.n], tf.cast(d[1], tf.int32))
    return shapes.reshape(tensor, [d[0] * d[1]] + d[2:]), owner, counts


def convert_ctc_loss(ctx):
    """CTCLoss with any of logits, label indices, label values, lengths per-iteration."""
    logits, label_indices, label_values, lengths = ctx.inputs
    folded, seq, time, batch = _folded_inputs(ctx, logits, lengths)
    indices, owner, counts = _flat_entries(ctx, label_indices)
    values, _, value_counts = _flat_entries(ctx, label_values)
    rows = indices[:, 0]
    batch64 = tf.cast(batch, rows.dtype)
    inside = tf.reduce_all(tf.logical_and(rows >= 0, rows < batch64))
    rows = ctx.check(inside, "labels_indices has a batch index outside [0, batch_size)",
                     tensor=rows)
    same = tf.reduce_all(tf.equal(counts, value_counts))
    values = ctx.check(same, "labels_indices and labels_values differ in length",
                       tensor=values)
    rows = rows + tf.cast(owner, rows.dtype) * batch64
    loss, grad = _emit_unless_empty(
        ctx, [folded, tf.stack([rows, indices[:, 1]], 1), values, seq],
        lambda: [tf.zeros([0], folded.dtype),
                 tf.zeros(shapes.shape_tensor([time, 0, shapes.dims(folded)[2]]), folded.dtype)])
    return [Stacked(tensor=shapes.reshape(loss, [ctx.n_dim, batch])),
            Stacked(tensor=_unfold_time_major(ctx, grad, time, batch))]


def _decoded(ctx, indices, values, dense_shape, batch):
    """One decoded path of the folded batch as per-iteration sparse tensors: ragged
    indices (batch index made local) and values, stacked dense shapes ``[n, 2]``."""
    del dense_shape  # per iteration: [B, its longest decoding]
    rows = tf.cast(indices[:, 0], tf.int32)
    batch = tf.cast(batch, tf.int32)
    owner = tf.math.floordiv(rows, tf.maximum(batch, 1))
    local = tf.stack([tf.cast(rows - owner * batch, indices.dtype), indices[:, 1]], 1)
    counts = tf.math.bincount(owner, minlength=ctx.n, maxlength=ctx.n, dtype=tf.int32)
    longest = tf.math.unsorted_segment_max(indices[:, 1] + 1, owner, ctx.n)
    longest = tf.maximum(longest, 0)  # 0 for an iteration that decoded nothing
    shape = tf.stack([tf.fill([ctx.n], tf.cast(batch, indices.dtype)), longest], 1)
    return (Ragged.from_row_lengths(local, counts), Ragged.from_row_lengths(values, counts),
            Stacked(tensor=shape))


def convert_ctc_decoder(ctx):
    """CTCGreedyDecoder / CTCBeamSearchDecoder: ``k`` paths (1 for greedy), outputs
    ``indices * k, values * k, shapes * k, log_probability``."""
    if ctx.compiled or ctx.nested:
        return ctx.decline("the number of decoded entries has no static bound")
    logits, lengths = ctx.inputs
    folded, seq, _, batch = _folded_inputs(ctx, logits, lengths)
    paths = (len(ctx.op.outputs) - 1) // 3
    outs = _emit_unless_empty(ctx, [folded, seq], lambda: (
        [tf.zeros([0, 2], tf.int64)] * paths + [tf.zeros([0], tf.int64)] * paths
        + [tf.zeros([2], tf.int64)] * paths + [tf.zeros([0, paths], folded.dtype)]))
    decoded = [_decoded(ctx, outs[k], outs[paths + k], outs[2 * paths + k], batch)
               for k in range(paths)]
    log_prob = outs[-1]
    width = shapes.dims(log_prob)[1]
    result = [d[0] for d in decoded] + [d[1] for d in decoded] + [d[2] for d in decoded]
    return result + [Stacked(tensor=shapes.reshape(log_prob, [ctx.n_dim, batch, width]))]


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("CTCLoss", convert_ctc_loss, inputs="*??*")
    registry.add(["CTCGreedyDecoder", "CTCBeamSearchDecoder"], convert_ctc_decoder,
                 inputs="**")
