"""Pooling and its gradients: fold the iteration axis into the batch axis.

Every pooling kernel treats batch entries independently and the batch is axis 0 in
every data format, so a stacked value [n, b, ...] becomes [n*b, ...], the op runs once,
and its result splits back into [n, b, ...]. Gradient kernels take several same-batch
tensors: all of them are folded; an invariant one is tiled only when it meets a stacked
one (the kernel needs one batch entry per example). AvgPoolGrad takes the forward
input's shape instead of the input: its batch entry is multiplied by n.

MaxPoolWithArgmax with include_batch_in_index flattens the batch entry into the index:
iteration j's entries sit j*size(input of one iteration) further in the folded batch,
so that offset is subtracted from the folded argmax (and added back for the gradient,
after checking each index lies inside its own iteration's input).
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Stacked, fold_into_batch, shapes, unfold_from_batch
from pfor_converters_nn.folding import batch_of, fold


def unless_empty(folded, run, empty):
    """``run()`` when the folded batch has entries, ``empty()`` (zeros of the same
    shapes) when it has none (no iterations, or an empty batch in each): for kernels
    that fail on an empty batch."""
    rows = folded.shape[0]
    if rows is not None:
        return run() if rows else empty()
    return tf.cond(tf.shape(folded)[0] > 0, run, empty)


def hold_until(outputs, tensor):
    """``outputs``, computed while ``tensor`` still has a consumer waiting.

    The CPU MaxPoolGradGrad kernels may write their output into the buffer of the
    gradient input (same shape: stride 1 with SAME padding) and zero it before reading
    it, so in a graph where the folded gradient has no other use the result is zeros.
    The waiting consumer is an Assert that always holds: a stateful op, which Grappler
    neither prunes nor folds away (an Identity or a reduction it does)."""
    with tf.control_dependencies(outputs):
        waiting = tf.raw_ops.Assert(condition=tf.constant(True), data=[tensor], summarize=0)
    with tf.control_dependencies([waiting]):
        return [tf.identity(t) for t in outputs]


def fold_batch(batch_inputs: int, empty_like: int | None = None, hold: int | None = None):
    """Converter for ops whose first ``batch_inputs`` inputs share the batch axis and
    whose other inputs (window sizes, strides) must be invariant.

    ``empty_like=k`` is for kernels that fail on an empty batch (MaxPool3DGradGrad
    rejects it; the oneDNN MaxPoolGrad kernels abort the process in a graph): when the
    folded batch is empty (no iterations, or each iteration's batch is empty) the
    result is zeros shaped like folded input ``k`` instead, which is what the kernel
    gives where it runs. ``hold=k`` keeps folded input ``k`` alive until the kernel has
    run (see ``hold_until``).
    """

    def convert_fold_batch(ctx):
        if any(v.is_stacked for v in ctx.inputs[batch_inputs:]):
            return ctx.decline("window sizes and strides must be loop-invariant")
        if any(v.shape.rank is None for v in ctx.inputs[:batch_inputs]):
            return ctx.decline("an input's rank is unknown")
        stacked = next(k for k in range(batch_inputs) if ctx.inputs[k].is_stacked)
        folded = [fold(ctx, k) for k in range(batch_inputs)]
        rest = [v.tensor for v in ctx.inputs[batch_inputs:]]
        if empty_like is None:
            out = ctx.emit(*folded, *rest)
        else:
            run = lambda: ctx.emit(*folded, *rest)  # noqa: E731
            if hold is not None:
                run = lambda: hold_until(ctx.emit(*folded, *rest), folded[hold])  # noqa: E731
            out = unless_empty(folded[0], run, lambda: [tf.zeros_like(folded[empty_like])])
        for t in out:
            # Kernels with window sizes as tensors (MaxPoolV2) infer no output rank;
            # every op here keeps its input's rank (and the gradients its shape).
            t.set_shape(folded[empty_like].shape if empty_like is not None
                        else [None] * folded[0].shape.rank)
        batch = batch_of(ctx, stacked)
        return [Stacked(tensor=unfold_from_batch(t, ctx.n_dim, batch)) for t in out]

    return convert_fold_batch


def convert_avg_pool_grad(ctx):
    """AvgPoolGrad(orig_input_shape, grad): the forward input had n times the batch."""
    shape, grad = ctx.inputs
    if shape.is_stacked:
        return ctx.decline("the forward input's shape differs between iterations")
    batch = grad.tensor.shape[1] if grad.tensor.shape.rank else None
    static = tf.get_static_value(shape.tensor)
    if static is not None and ctx.n_static is not None:
        folded_shape = tf.constant([static[0] * ctx.n_static] + list(static[1:]),
                                   shape.dtype)
    else:
        n = tf.cast(ctx.n, shape.dtype)
        folded_shape = tf.concat([shape.tensor[:1] * n, shape.tensor[1:]], 0)
    out = ctx.emit(folded_shape, fold_into_batch(grad.tensor, ctx.n))[0]
    if batch is None:
        batch = shape.tensor[0] if static is None else int(static[0])
    return Stacked(tensor=unfold_from_batch(out, ctx.n_dim, batch))


def argmax_offsets(ctx, argmax_dtype) -> tf.Tensor | None:
    """Per-iteration index offset of the folded batch, shaped [n, 1, 1, 1, 1], or None
    when the indices do not count the batch."""
    if not ctx.attr("include_batch_in_index"):
        return None
    x = ctx.inputs[0]
    size = shapes.product(ctx.dims(x)[1:] if x.is_stacked else shapes.dims(x.tensor))
    rows = tf.range(tf.cast(ctx.n, argmax_dtype), dtype=argmax_dtype)
    n = ctx.n_dim
    return shapes.reshape(rows * tf.cast(size, argmax_dtype), [n, 1, 1, 1, 1])


def convert_max_pool_with_argmax(ctx):
    x = fold(ctx, 0)

    def empty():
        # The kernel rejects an empty batch: pool one zero image, keep none of it.
        one = tf.zeros(shapes.shape_tensor([1] + shapes.dims(x)[1:]), x.dtype)
        return [t[:0] for t in ctx.emit(one)]

    out, argmax = unless_empty(x, lambda: ctx.emit(x), empty)
    batch = batch_of(ctx, 0)
    out, argmax = (unfold_from_batch(t, ctx.n_dim, batch) for t in (out, argmax))
    offsets = argmax_offsets(ctx, argmax.dtype)
    if offsets is not None:
        argmax = argmax - offsets
    return [Stacked(tensor=out), Stacked(tensor=argmax)]


def _check_argmax(ctx, argmax):
    """The kernel requires every argmax inside the input (of one iteration when the
    batch counts, else of one image) and aborts the process otherwise; folded with an
    offset, a bad index of one iteration would land in another's input."""
    x = ctx.inputs[0]
    d = ctx.dims(x)[1:] if x.is_stacked else shapes.dims(x.tensor)
    size = tf.cast(shapes.product(d if ctx.attr("include_batch_in_index") else d[1:]),
                   argmax.dtype)
    inside = tf.logical_and(tf.reduce_min(argmax) >= 0, tf.reduce_max(argmax) < size)
    return ctx.check(tf.logical_or(inside, tf.equal(tf.size(argmax), 0)),
                     "argmax holds an index outside the input (input size):", [size],
                     tensor=argmax)


def convert_max_pool_grad_with_argmax(ctx):
    argmax = _check_argmax(ctx, ctx.stacked(2))
    offsets = argmax_offsets(ctx, argmax.dtype)
    if offsets is not None:
        argmax = argmax + offsets
    folded = [fold(ctx, 0), fold(ctx, 1), fold_into_batch(argmax, ctx.n)]
    out = unless_empty(folded[0], lambda: ctx.emit(*folded), lambda: [tf.zeros_like(folded[0])])[0]
    out.set_shape(folded[0].shape)
    return Stacked(tensor=unfold_from_batch(out, ctx.n_dim, batch_of(ctx, 0)))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(["MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D"], fold_batch(1),
                 inputs="S")
    registry.add("MaxPoolV2", fold_batch(1), inputs="SUU")
    registry.add(["MaxPoolGrad", "MaxPool3DGrad"], fold_batch(3, empty_like=0),
                 inputs="***")
    registry.add(["MaxPoolGradGrad", "MaxPool3DGradGrad"], fold_batch(3, empty_like=1, hold=2),
                 inputs="***")
    registry.add("MaxPoolGradV2", fold_batch(3, empty_like=0), inputs="***UU")
    registry.add("MaxPoolGradGradV2", fold_batch(3, empty_like=1, hold=2), inputs="***UU")
    registry.add(["AvgPoolGrad", "AvgPool3DGrad"], convert_avg_pool_grad, inputs="US")
    registry.add("MaxPoolWithArgmax", convert_max_pool_with_argmax, inputs="S")
    registry.add("MaxPoolGradWithArgmax", convert_max_pool_grad_with_argmax, inputs="***")
