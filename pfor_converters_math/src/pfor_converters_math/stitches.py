"""DynamicStitch and ParallelDynamicStitch with invariant indices (what the gradient of
a reduction over a value of unknown rank emits for the kept shape).

Each data input is ``indices[k].shape + tail`` per iteration; stacked, the iteration
axis comes first. Moved to the end it rides along in ``tail``, so one stitch of the
moved data serves every iteration, and the axis is moved back to the front after.
Per-iteration indices would make the result's length differ per iteration: declined.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Stacked


def convert_stitch(ctx):
    count = len(ctx.inputs) // 2
    indices, data = ctx.inputs[:count], ctx.inputs[count:]
    if any(v.is_stacked for v in indices):
        return ctx.decline("per-iteration indices")
    moved = []
    for value in data:
        tensor = ctx.stack(value)  # [n] + indices.shape + tail
        rank = tensor.shape.rank
        if rank is None:
            return ctx.decline("data of unknown rank")
        moved.append(tf.transpose(tensor, list(range(1, rank)) + [0]))
    stitch = getattr(tf.raw_ops, ctx.op_type)
    out = stitch(indices=[v.tensor for v in indices], data=moved)  # [m] + tail + [n]
    rank = out.shape.rank
    return Stacked(tensor=tf.transpose(out, [rank - 1] + list(range(rank - 1))))


def register(registry):
    registry.add(["DynamicStitch", "ParallelDynamicStitch"], convert_stitch, inputs="*...")
