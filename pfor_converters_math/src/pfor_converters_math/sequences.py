"""ReverseSequence: reverse the first ``seq_lengths[b]`` elements along ``seq_dim`` of
each batch row ``b`` (along ``batch_dim``).

The kernel takes any rank, so with invariant lengths the iteration axis is one more
axis: the op runs on the stacked input with both axes shifted. Per-iteration lengths
``[n, B]`` are the kernel's lengths once the iteration axis and the batch axis are one:
the batch axis is moved next to the iteration axis (no move when it is the first, the
usual batch-major case), the two merged into ``n*B`` rows, one op runs with
``batch_dim=0`` and the result is split and moved back. The kernel's checks of each
length (``0 <= length <= size along seq_dim``) stay the kernel's own.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Stacked, shapes


def _dims(ctx):
    rank = ctx.inputs[0].shape.rank
    seq, batch = ctx.attr("seq_dim"), ctx.attr("batch_dim")
    if rank is None:
        raise ctx.decline("the input's rank is unknown")
    return rank, seq % rank if rank else seq, batch % rank if rank else batch


def convert_reverse_sequence(ctx):
    """Invariant lengths: the op on the stacked input, both axes shifted by one."""
    x, lengths = ctx.inputs
    _, seq, batch = _dims(ctx)
    return ctx.emit_stacked(x.tensor, lengths.tensor,
                            attrs={"seq_dim": seq + 1, "batch_dim": batch + 1})


def convert_reverse_sequence_stacked_lengths(ctx):
    """Per-iteration lengths: merge the iteration and batch axes, one op, split back."""
    x, lengths = ctx.inputs
    rank, seq, batch = _dims(ctx)
    out = ctx.stack(x)  # the result is that size anyway
    order = [0, batch + 1] + [k for k in range(1, rank + 1) if k != batch + 1]
    moved = batch != 0
    if moved:
        out = tf.transpose(out, order)
    d = ctx.dims(out)  # [n, B, ...]
    merged = shapes.reshape(out, [d[0] * d[1]] + d[2:])
    flat_lengths = shapes.reshape(lengths.tensor, [d[0] * d[1]])
    result = tf.reverse_sequence(merged, flat_lengths, seq_axis=order.index(seq + 1) - 1,
                                 batch_axis=0)
    result = shapes.reshape(result, d)
    if moved:
        result = tf.transpose(result, [order.index(k) for k in range(rank + 1)])
    return Stacked(tensor=result)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("ReverseSequence", convert_reverse_sequence, inputs="SU")
    registry.add("ReverseSequence", convert_reverse_sequence_stacked_lengths, inputs="*S")
