"""Non-max suppression (NonMaxSuppression, V2 ... V5 with hard suppression) of
per-iteration boxes, scores, sizes or thresholds.

The kernel's greedy loop, run for all iterations at once, one selection per step: each
iteration takes its best live candidate (highest score, the lowest index among equal
scores, as the kernel's queue orders them), and every live candidate whose IoU with it
exceeds the threshold dies. An iteration stops when it has ``max_output_size`` boxes
or no live candidate left; the loop ends when all have stopped, after as many steps as
the most boxes any iteration selects. The IoU is the kernel's formula in float32 (its
corner order, zero for an empty box), so decisions on the threshold agree exactly.
Candidates start alive when their score is above ``score_threshold`` (strictly; V1/V2
use the lowest float).

The selected indices have a per-iteration count: a ragged value (``[n, W]``, W the
largest count), unless V4/V5 pad them to ``max_output_size``, which gives a stacked
value when that size is invariant. ``valid_outputs`` is stacked. Soft NMS (V5 with
``soft_nms_sigma > 0``) re-ranks candidates as their scores decay and is not converted:
only a constant sigma of 0 is. Data-dependent loop lengths and shapes do not compile
under XLA, so the converter declines there.

CombinedNonMaxSuppression already takes a batch (``[b, boxes, q, 4]`` boxes and
``[b, boxes, classes]`` scores, each batch row alone): stacked boxes and scores fold
into ``[n*b, ...]`` (an invariant one is broadcast), the sizes and thresholds must be
invariant, and every output splits back.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_core.extend import Ragged, Stacked, fold_into_batch, unfold_from_batch

LOWEST = float(np.finfo(np.float32).min)


def _corners(boxes):
    """(ymin, xmin, ymax, xmax, area) as the kernel orders each box's corners."""
    y1, x1, y2, x2 = (boxes[..., k] for k in range(4))
    ymin, ymax = tf.minimum(y1, y2), tf.maximum(y1, y2)
    xmin, xmax = tf.minimum(x1, x2), tf.maximum(x1, x2)
    return ymin, xmin, ymax, xmax, (ymax - ymin) * (xmax - xmin)


def _iou_with(corners, pick):
    """IoU of every box ``[n, nb]`` with the picked box of each iteration ``[n]``."""
    ymin, xmin, ymax, xmax, area = corners
    take = [tf.gather(c, pick, axis=1, batch_dims=1)[:, None] for c in corners]
    inter = (tf.maximum(tf.minimum(ymax, take[2]) - tf.maximum(ymin, take[0]), 0.0)
             * tf.maximum(tf.minimum(xmax, take[3]) - tf.maximum(xmin, take[1]), 0.0))
    iou = inter / (area + take[4] - inter)
    return tf.where((area <= 0.0) | (take[4] <= 0.0), tf.zeros_like(iou), iou)


def _select(ctx, boxes, scores, limit, iou_threshold, score_threshold):
    """The greedy selection: (selected indices ``[n, W]``, zero past each count;
    counts ``[n]``)."""
    n = ctx.n
    count_boxes = tf.shape(scores)[1]
    corners = _corners(boxes)
    positions = tf.range(count_boxes)[None, :]

    def live(alive, count):
        return tf.reduce_any(alive, axis=1) & (count < limit)

    def body(step, alive, count, when):
        active = live(alive, count)
        masked = tf.where(alive, scores, -np.inf)
        best = tf.reduce_max(masked, axis=1, keepdims=True)
        pick = tf.reduce_min(tf.where(alive & (masked == best), positions, count_boxes),
                             axis=1)
        pick = tf.minimum(pick, tf.maximum(count_boxes - 1, 0))
        chosen = active[:, None] & tf.equal(positions, pick[:, None])
        suppressed = active[:, None] & (_iou_with(corners, pick) > iou_threshold)
        alive = alive & ~chosen & ~suppressed
        when = tf.where(chosen, step, when)
        return step + 1, alive, count + tf.cast(active, tf.int32), when

    alive = scores > score_threshold
    start = (tf.constant(0), alive, tf.zeros([n], tf.int32),
             tf.fill(tf.shape(scores), -1))
    steps, _, count, when = tf.while_loop(
        lambda step, alive, count, when: tf.reduce_any(live(alive, count)), body, start)
    # Iteration j's k-th selection happened at step k: scatter each box to its slot.
    rows = tf.range(n)[:, None]
    slots = tf.where(when >= 0, rows * steps + when, -1)
    indices = tf.math.unsorted_segment_sum(tf.broadcast_to(positions, tf.shape(when)),
                                           slots, n * steps)
    return tf.reshape(indices, tf.stack([n, steps])), count


def convert_non_max_suppression(ctx):
    """NonMaxSuppression / V2 / V3 / V4 / V5 (hard suppression)."""
    if ctx.compiled:
        return ctx.decline("the number of selected boxes has no static bound under XLA")
    version = ctx.op_type[len("NonMaxSuppression"):] or "V1"
    inputs = list(ctx.inputs)
    if version == "V5":
        sigma = None if inputs[5].is_stacked else tf.get_static_value(inputs[5].tensor)
        if sigma is None or float(sigma) != 0.0:
            return ctx.decline("soft NMS (soft_nms_sigma other than a constant 0)")
    boxes = tf.cast(ctx.stack(inputs[0]), tf.float32)  # [n, nb, 4]
    scores = tf.cast(ctx.stack(inputs[1]), tf.float32)  # [n, nb]
    limit_value = inputs[2]
    limit = tf.cast(limit_value.tensor, tf.int32)
    limit = limit if limit_value.is_stacked else tf.fill([ctx.n], limit)
    if version == "V1":
        iou = tf.constant(ctx.attr("iou_threshold"), tf.float32)
    else:
        iou = tf.cast(inputs[3].tensor, tf.float32)
        iou = iou[:, None] if inputs[3].is_stacked else iou
    if version in ("V1", "V2"):
        floor = tf.constant(LOWEST, tf.float32)
    else:
        floor = tf.cast(inputs[4].tensor, tf.float32)
        floor = floor[:, None] if inputs[4].is_stacked else floor
    valid = (tf.reduce_all(limit >= 0) & tf.reduce_all(iou >= 0.0)
             & tf.reduce_all(iou <= 1.0))
    scores = ctx.check(valid, "requires max_output_size >= 0 and iou_threshold in [0, 1] "
                       "(as the kernel)", tensor=scores)
    indices, count = _select(ctx, boxes, scores, limit, iou, floor)
    outputs = [indices]
    if version == "V5":
        picked = tf.gather(ctx.stack(inputs[1]), indices, axis=1, batch_dims=1)
        slot = tf.range(tf.shape(indices)[1])[None, :]
        outputs.append(tf.where(slot < count[:, None], picked, tf.zeros_like(picked)))
    padded = version in ("V4", "V5") and ctx.attr("pad_to_max_output_size")
    lengths = count
    if padded:  # zeros up to max_output_size: a per-iteration size is ragged
        width = tf.reduce_max(limit) if limit_value.is_stacked else limit_value.tensor
        width = tf.maximum(tf.cast(width, tf.int32), tf.shape(indices)[1])
        extra = [[0, 0], [0, width - tf.shape(indices)[1]]]
        outputs = [tf.pad(t, extra) for t in outputs]
        lengths = limit
    if padded and not limit_value.is_stacked:
        results = [Stacked(tensor=t) for t in outputs]
    else:
        results = [Ragged.from_stacked(t, [lengths]) for t in outputs]
    if version in ("V4", "V5"):
        results.append(Stacked(tensor=count))
    return results


def convert_combined_non_max_suppression(ctx):
    """CombinedNonMaxSuppression(boxes, scores, sizes..., thresholds...): fold n into
    the batch of boxes and scores."""
    batch = next(ctx.dims(v)[1] for v in ctx.inputs[:2] if v.is_stacked)
    folded = [fold_into_batch(ctx.stack(v), ctx.n) for v in ctx.inputs[:2]]
    outs = ctx.emit(*folded, *[v.tensor for v in ctx.inputs[2:]])
    return [Stacked(tensor=unfold_from_batch(t, ctx.n_dim, batch)) for t in outs]


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(["NonMaxSuppression", "NonMaxSuppressionV2", "NonMaxSuppressionV3",
                  "NonMaxSuppressionV4", "NonMaxSuppressionV5"],
                 convert_non_max_suppression, inputs="*...")
    registry.add("CombinedNonMaxSuppression", convert_combined_non_max_suppression,
                 inputs="**UUUU")
