"""CropAndResize and its gradient ops, with per-iteration images, boxes or box indices.

Every box is cropped from the image its ``box_ind`` names, alone, so the iterations'
boxes are one list of ``n*nb`` boxes: iteration j's images become rows ``j*B ...
j*B + B - 1`` of the folded batch and its box indices are offset by ``j*B`` (an
invariant image is not folded and its indices are not offset). One kernel runs and
its result is split back per iteration. Because an offset index that is out of range
for its own iteration could land in another iteration's images, the indices are
checked against ``[0, B)`` first, as the kernel checks them.

CropAndResizeGradImage gives the gradient of the (folded) images: its ``image_size``
becomes ``[n*B, H, W, C]``; CropAndResizeGradBoxes gives one row per box. The crop size
and image size must be invariant (they are output shapes).
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Stacked, fold_into_batch, shapes, unfold_from_batch


def _merged(ctx, value):
    """A stacked or invariant per-iteration list (boxes, box indices, gradients) as
    ``[n*nb, ...]``."""
    return fold_into_batch(ctx.stack(value), ctx.n)


def _box_indices(ctx, box_ind, batch, offset: bool):
    """The box indices as ``[n*nb]``: checked against the per-iteration batch and offset
    by ``j*batch`` when the images are folded."""
    ind = ctx.stack(box_ind)  # [n, nb]
    if not offset:
        return fold_into_batch(ind, ctx.n)
    batch = tf.cast(batch, ind.dtype)
    inside = tf.reduce_all((ind >= 0) & (ind < batch))
    ind = ctx.check(inside, "box_ind has values outside [0, batch_size)", tensor=ind)
    ind = ind + tf.range(tf.cast(ctx.n, ind.dtype))[:, None] * batch
    return fold_into_batch(ind, ctx.n)


def _split(ctx, tensor, per_iteration):
    """``[n*k, ...]`` -> ``[n, k, ...]``."""
    return Stacked(tensor=unfold_from_batch(tensor, ctx.n_dim, per_iteration))


def _images(ctx, image):
    """The images, folded ``[n*B, H, W, C]`` when stacked, and the per-iteration B."""
    if image.is_stacked:
        return fold_into_batch(image.tensor, ctx.n), ctx.dims(image)[1]
    return image.tensor, shapes.dims(image.tensor)[0]


def _boxes_per_iteration(ctx, boxes):
    """The number of boxes of one iteration (every per-box input has that many)."""
    return ctx.dims(boxes)[1] if boxes.is_stacked else shapes.dims(boxes.tensor)[0]


def convert_crop_and_resize(ctx):
    """CropAndResize(image, boxes, box_ind, crop_size)."""
    image, boxes, box_ind, crop_size = ctx.inputs
    images, batch = _images(ctx, image)
    ind = _box_indices(ctx, box_ind, batch, image.is_stacked)
    out = ctx.emit(images, _merged(ctx, boxes), ind, crop_size.tensor)[0]
    return _split(ctx, out, _boxes_per_iteration(ctx, boxes))


def convert_crop_and_resize_grad_image(ctx):
    """CropAndResizeGradImage(grads, boxes, box_ind, image_size): the folded images'
    gradient, ``[n*B, H, W, C]``."""
    grads, boxes, box_ind, image_size = ctx.inputs
    static = tf.get_static_value(image_size.tensor)
    size = [int(v) for v in static] if static is not None else tf.unstack(image_size.tensor)
    batch = size[0]
    ind = _box_indices(ctx, box_ind, batch, True)
    folded = shapes.shape_tensor([ctx.n_dim * batch] + list(size[1:]))
    out = ctx.emit(_merged(ctx, grads), _merged(ctx, boxes), ind,
                   tf.cast(folded, image_size.dtype))[0]
    if static is not None:
        out.set_shape([ctx.n_static * batch if ctx.n_static is not None else None]
                      + size[1:])
    return _split(ctx, out, batch)


def convert_crop_and_resize_grad_boxes(ctx):
    """CropAndResizeGradBoxes(grads, image, boxes, box_ind): one row per box."""
    grads, image, boxes, box_ind = ctx.inputs
    images, batch = _images(ctx, image)
    ind = _box_indices(ctx, box_ind, batch, image.is_stacked)
    out = ctx.emit(_merged(ctx, grads), images, _merged(ctx, boxes), ind)[0]
    return _split(ctx, out, _boxes_per_iteration(ctx, boxes))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    for pattern in ("S**U", "US*U", "UUSU"):
        registry.add("CropAndResize", convert_crop_and_resize, inputs=pattern)
    for pattern in ("S**U", "US*U", "UUSU"):
        registry.add("CropAndResizeGradImage", convert_crop_and_resize_grad_image,
                     inputs=pattern)
    for pattern in ("S***", "US**", "UUS*", "UUUS"):
        registry.add("CropAndResizeGradBoxes", convert_crop_and_resize_grad_boxes,
                     inputs=pattern)
