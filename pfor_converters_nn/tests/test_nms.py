"""Non-max suppression (NonMaxSuppression V1 ... V5, hard) against the sequential loop
with no fallback: boxes, scores, sizes and thresholds stacked or invariant; ties in
scores, IoU exactly at the threshold, flipped and empty boxes; per-iteration counts
(ragged) and padded results."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing

iters = st.sampled_from([0, 1, 2, 3, 3])


def draw_boxes(data, rng, shape_lead, count):
    """Boxes on a coarse grid (exact IoUs such as 1/2 and 1/3, empty and flipped boxes)
    and scores from few values (ties)."""
    corners = rng.integers(0, 4, shape_lead + [count, 4]).astype(np.float32) / 2
    return tf.constant(corners)


def run(version, pad, boxes, scores, size, iou, floor):
    if version == "V1":
        return tf.raw_ops.NonMaxSuppression(boxes=boxes, scores=scores, max_output_size=size,
                                            iou_threshold=0.5)
    if version == "V2":
        return tf.raw_ops.NonMaxSuppressionV2(boxes=boxes, scores=scores,
                                              max_output_size=size, iou_threshold=iou)
    if version == "V3":
        return tf.raw_ops.NonMaxSuppressionV3(boxes=boxes, scores=scores,
                                              max_output_size=size, iou_threshold=iou,
                                              score_threshold=floor)
    if version == "V4":
        return tf.raw_ops.NonMaxSuppressionV4(boxes=boxes, scores=scores,
                                              max_output_size=size, iou_threshold=iou,
                                              score_threshold=floor,
                                              pad_to_max_output_size=pad)
    return tf.raw_ops.NonMaxSuppressionV5(boxes=boxes, scores=scores, max_output_size=size,
                                          iou_threshold=iou, score_threshold=floor,
                                          soft_nms_sigma=0.0, pad_to_max_output_size=pad)


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_non_max_suppression(data):
    version = data.draw(st.sampled_from(["V1", "V2", "V3", "V4", "V5"]), label="version")
    pad = data.draw(st.booleans(), label="pad")
    count = data.draw(st.integers(0, 6), label="boxes")
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 5)
    rng = np.random.default_rng(data.draw(st.integers(0, 999)))
    lead = lambda k: [n] if stacked[k] else []  # noqa: E731
    boxes = draw_boxes(data, rng, lead(0), count)
    scores = tf.constant(rng.integers(0, 4, lead(1) + [count]).astype(np.float32) / 4)
    size = tf.constant(rng.integers(0, count + 2, lead(2)), tf.int32)
    iou = tf.constant(rng.choice([0.0, 1 / 3, 0.5, 1.0], lead(3)), tf.float32)
    floor = tf.constant(rng.choice([-1.0, 0.0, 0.25, 0.5], lead(4)), tf.float32)
    fn = lambda *args: run(version, pad, *args)  # noqa: E731
    # A per-iteration count (or padded size) comes back as a tf.RaggedTensor.
    testing.check(data, fn, [boxes, scores, size, iou, floor], stacked=stacked, n=n,
                  ragged_outputs=True)


def test_padded_results_of_an_invariant_size_are_stacked():
    rng = np.random.default_rng(1)
    boxes = tf.constant(rng.random([3, 5, 4]), tf.float32)
    scores = tf.constant(rng.random([3, 5]), tf.float32)

    def loop_fn(i):
        return tf.image.non_max_suppression_padded(boxes[i], scores[i], 4,
                                                   pad_to_max_output_size=True)

    got = testing.assert_matches_loop(loop_fn, 3, graph=True)
    assert all(isinstance(t, tf.Tensor) for t in got)


def test_per_example_detections_under_vectorized_map():
    """tf.image.non_max_suppression(_with_scores) per example, as a detector's
    post-processing maps it: ragged results."""
    rng = np.random.default_rng(2)
    boxes = tf.constant(rng.random([4, 8, 4]), tf.float32)
    scores = tf.constant(rng.random([4, 8]), tf.float32)

    def loop_fn(i):
        keep, kept_scores = tf.image.non_max_suppression_with_scores(
            boxes[i], scores[i], 5, iou_threshold=0.3, score_threshold=0.2)
        return tf.gather(boxes[i], keep), kept_scores

    testing.assert_matches_loop(loop_fn, 4, graph=True, ragged_outputs=True)


def test_soft_nms_falls_back():
    boxes = tf.constant(np.random.default_rng(3).random([2, 4, 4]), tf.float32)
    scores = tf.constant([[0.9, 0.8, 0.7, 0.6]] * 2)

    def loop_fn(i):
        return tf.image.non_max_suppression_with_scores(boxes[i], scores[i], 3,
                                                        soft_nms_sigma=0.5)[0]

    assert [r.op_type for r in pf.explain(loop_fn, 2).fallbacks] == ["NonMaxSuppressionV5"]


@pytest.mark.parametrize("bad", ["size", "iou"])
def test_bad_size_or_threshold_fails_like_the_loop(bad):
    boxes = tf.constant([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.5]])
    values = tf.constant([1.0, -1.0] if bad == "size" else [0.5, 1.5])

    def loop_fn(i):
        size = tf.cast(values[i], tf.int32) if bad == "size" else 2
        iou = 0.5 if bad == "size" else values[i]
        return tf.image.non_max_suppression(boxes, tf.constant([0.9, 0.8]), size, iou)

    testing.assert_fails_like_loop(loop_fn, 2)


@settings(max_examples=10, deadline=None)
@given(st.data())
def test_combined_non_max_suppression(data):
    """tf.image.combined_non_max_suppression of per-iteration batches: boxes and/or
    scores stacked, boxes shared by classes (q = 1) or per class, padded per class or
    not, clipped or not."""
    batch, count, classes = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 4)),
                             data.draw(st.integers(1, 3)))
    q = data.draw(st.sampled_from([1, classes]), label="q")
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 2)
    pad, clip = data.draw(st.booleans(), label="pad"), data.draw(st.booleans(), label="clip")
    rng = np.random.default_rng(data.draw(st.integers(0, 999)))
    boxes = tf.constant(rng.uniform(-0.2, 1.2, [n] * stacked[0] + [batch, count, q, 4]),
                        tf.float32)
    scores = tf.constant(rng.random([n] * stacked[1] + [batch, count, classes]), tf.float32)

    def fn(b, s):
        return tuple(tf.image.combined_non_max_suppression(
            b, s, 2, 3, iou_threshold=0.4, score_threshold=0.2, pad_per_class=pad,
            clip_boxes=clip))

    testing.check(data, fn, [boxes, scores], stacked=stacked, n=n)


@settings(max_examples=10, deadline=None)
@given(st.data())
def test_draw_bounding_boxes(data):
    """tf.image.draw_bounding_boxes (V2, with colours) and the V1 op: images and/or
    boxes stacked."""
    batch, count = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 3))
    n = data.draw(iters, label="n")
    stacked = testing.draw_stacked(data, 2)
    version = data.draw(st.sampled_from(["V1", "V2"]), label="version")
    rng = np.random.default_rng(data.draw(st.integers(0, 999)))
    images = tf.constant(rng.random([n] * stacked[0] + [batch, 5, 6, 3]), tf.float32)
    boxes = tf.constant(rng.uniform(-0.1, 1.1, [n] * stacked[1] + [batch, count, 4]),
                        tf.float32)
    colours = tf.constant([[1.0, 0.0, 0.0, 1.0], [0.0, 0.5, 1.0, 1.0]])

    def fn(x, b):
        if version == "V1":
            return tf.raw_ops.DrawBoundingBoxes(images=x, boxes=b)
        return tf.image.draw_bounding_boxes(x, b, colours)

    testing.check(data, fn, [images, boxes], stacked=stacked, n=n)
