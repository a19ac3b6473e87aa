"""Image ops (resizing, colour adjustments, depth/space moves) and in_top_k.

Most fold n into the batch; where a per-iteration parameter has no kernel, the formula.

The resize kernels (ResizeBilinear, ResizeNearestNeighbor, ResizeBicubic, ResizeArea,
ScaleAndTranslate) treat the images of a batch independently: stacked images
[n, b, h, w, c] become [n*b, h, w, c], one op runs, the result splits back. The target
size, scale and translation must be loop-invariant (a stacked size would give each
iteration its own output shape): no converter takes those (the fallback loop does).

The gradient kernels ResizeBilinearGrad, ResizeBicubicGrad and ScaleAndTranslateGrad
read only the shape of their ``original_image`` input, but their shape functions take
the whole static shape (batch included) from it, so the folded op needs an original
image whose batch is n*b too: a stacked one folds for free, an invariant one is
broadcast (the kernel leaves no cheaper choice that keeps static shapes right). With
invariant gradients and a stacked original image every iteration computes the same
result: it runs once, on one iteration's worth of zeros, and stays invariant.
ResizeNearestNeighborGrad takes the size instead: only the gradients fold.

Colour adjustments (AdjustContrastv2, AdjustHue, AdjustSaturation) take images with
any leading dimensions, so stacked images with an invariant factor run as they are. A
stacked factor (per-example random augmentation: tf.image.random_hue under pfor) has
no kernel: the op's formula is written out with the factor broadcast per iteration
(contrast: (x - mean over height and width) * f + mean; hue and saturation: in HSV,
hue + delta wrapped into [0, 1), saturation * scale clipped to [0, 1]).

DepthToSpace / SpaceToDepth move pixels within each image: fold n into the batch
(channels-last only; the CPU has no other kernel).

DrawBoundingBoxes/V2 draw each image's own boxes ([b, h, w, d] images, [b, k, 4] boxes):
both fold into [n*b, ...] (an invariant one is broadcast: each image needs its boxes);
the colours (V2) must be invariant.

InTopK/InTopKV2 score each row of the batch alone: predictions [n, b, c] and targets
[n, b] fold into [n*b, c] and [n*b]; an invariant one of them is broadcast (each row
needs its pair). A stacked k (InTopKV2) has no converter.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Invariant, Stacked, shapes
from pfor_converters_nn import folding


def _unfold(ctx, tensor: tf.Tensor, k: int) -> Stacked:
    return Stacked(tensor=folding.unfold(ctx, tensor, k))


def convert_resize(ctx):
    """Resize ops (images, size[, scale, translation]): fold n into the batch."""
    out = ctx.emit(folding.fold(ctx, 0), *[v.tensor for v in ctx.inputs[1:]])[0]
    return _unfold(ctx, out, 0)


def convert_resize_grad(ctx):
    """Stacked gradients of a (grads, original_image[, scale, translation]) kernel:
    fold n into the batch of both (an invariant original image is broadcast)."""
    rest = [v.tensor for v in ctx.inputs[2:]]
    out = ctx.emit(folding.fold(ctx, 0), folding.fold(ctx, 1), *rest)[0]
    return _unfold(ctx, out, 0)


def convert_resize_grad_invariant_grads(ctx):
    """Invariant gradients, stacked original image: the same gradients and
    per-iteration shape in every iteration, so one result, computed once."""
    grads, original = ctx.inputs[:2]
    rest = [v.tensor for v in ctx.inputs[2:]]
    zeros = tf.zeros(shapes.shape_tensor(ctx.dims(original)[1:]), original.dtype)
    return Invariant(tensor=ctx.emit(grads.tensor, zeros, *rest)[0])


def convert_resize_nearest_grad(ctx):
    """ResizeNearestNeighborGrad(grads, size): fold the gradients."""
    out = ctx.emit(folding.fold(ctx, 0), ctx.inputs[1].tensor)[0]
    return _unfold(ctx, out, 0)


def convert_adjust_color(ctx):
    """AdjustContrastv2 / AdjustHue / AdjustSaturation of stacked images with an
    invariant factor: the op as it is (it takes any leading dimensions)."""
    images, factor = ctx.inputs
    return ctx.emit_stacked(images.tensor, factor.tensor)


def convert_adjust_color_stacked_factor(ctx):
    """A stacked factor has no kernel: the op's formula with the factor broadcast per
    iteration (invariant images are broadcast: the result has that size anyway)."""
    images, factor = ctx.inputs
    if images.shape.rank is None:
        raise Decline("the images' rank is unknown")
    x = ctx.stacked(0)
    compute = tf.float32 if x.dtype in (tf.float16, tf.bfloat16) else x.dtype
    x = tf.cast(x, compute)
    # The factor as [n, 1, ..., 1], to broadcast against the images.
    f = shapes.insert_axes(tf.cast(factor.tensor, compute), images.shape.rank, ctx.n)
    out = ADJUST[ctx.op_type](x, f)
    return Stacked(tensor=tf.cast(out, images.dtype))


def _contrast(x, f):
    mean = tf.math.reduce_mean(x, axis=[-3, -2], keepdims=True)
    return (x - mean) * f + mean


def _hue(x, delta):
    h, s, v = tf.unstack(tf.image.rgb_to_hsv(x), axis=-1)
    h = h + delta[..., 0]
    return tf.image.hsv_to_rgb(tf.stack([h - tf.math.floor(h), s, v], axis=-1))


def _saturation(x, scale):
    h, s, v = tf.unstack(tf.image.rgb_to_hsv(x), axis=-1)
    s = tf.clip_by_value(s * scale[..., 0], 0.0, 1.0)
    return tf.image.hsv_to_rgb(tf.stack([h, s, v], axis=-1))


ADJUST = {"AdjustContrastv2": _contrast, "AdjustHue": _hue, "AdjustSaturation": _saturation}


def convert_depth_space(ctx):
    """DepthToSpace / SpaceToDepth: fold n into the batch (channels-last)."""
    if ctx.attr("data_format") not in (b"NHWC", "NHWC"):
        return ctx.decline("only channels-last (NHWC) is converted")
    return _unfold(ctx, ctx.emit(folding.fold(ctx, 0))[0], 0)


def convert_draw_boxes(ctx):
    """DrawBoundingBoxes(images, boxes) / DrawBoundingBoxesV2(images, boxes, colors)."""
    k = 0 if ctx.inputs[0].is_stacked else 1
    out = ctx.emit(folding.fold(ctx, 0), folding.fold(ctx, 1),
                   *[v.tensor for v in ctx.inputs[2:]])[0]
    return _unfold(ctx, out, k)


def convert_in_top_k(ctx):
    """InTopK(predictions, targets) / InTopKV2(predictions, targets, k)."""
    k = 0 if ctx.inputs[0].is_stacked else 1
    out = ctx.emit(folding.fold(ctx, 0), folding.fold(ctx, 1),
                   *[v.tensor for v in ctx.inputs[2:]])[0]
    return _unfold(ctx, out, k)


RESIZE = ["ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic", "ResizeArea"]
RESIZE_GRAD = ["ResizeBilinearGrad", "ResizeBicubicGrad"]


def register(registry):
    """Add this family's converters to the pack's registrar."""
    # Sizes, scales, translations and k must be invariant: a stacked one would give the
    # iterations different output shapes (the fallback loop takes those).
    registry.add(RESIZE, convert_resize, inputs="SU")
    registry.add("ScaleAndTranslate", convert_resize, inputs="SUUU")
    registry.add(RESIZE_GRAD, convert_resize_grad, inputs="S*")
    registry.add(RESIZE_GRAD, convert_resize_grad_invariant_grads, inputs="US")
    registry.add("ScaleAndTranslateGrad", convert_resize_grad, inputs="S*UU")
    registry.add("ScaleAndTranslateGrad", convert_resize_grad_invariant_grads, inputs="USUU")
    registry.add("ResizeNearestNeighborGrad", convert_resize_nearest_grad, inputs="SU")
    registry.add(list(ADJUST), convert_adjust_color, inputs="SU")
    registry.add(list(ADJUST), convert_adjust_color_stacked_factor, inputs="*S")
    registry.add(["DepthToSpace", "SpaceToDepth"], convert_depth_space, inputs="S")
    registry.add("DrawBoundingBoxes", convert_draw_boxes, inputs="**")
    registry.add("DrawBoundingBoxesV2", convert_draw_boxes, inputs="**U")
    registry.add("InTopK", convert_in_top_k, inputs="**")
    registry.add("InTopKV2", convert_in_top_k, inputs="**U")
