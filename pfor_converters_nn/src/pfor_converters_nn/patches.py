"""ExtractImagePatches and ExtractVolumePatches of stacked images: fold n into the batch.

Each image's patches are cut from that image alone, so ``[n, b, ...]`` becomes
``[n*b, ...]``, one op runs and the result splits back. The gradient TensorFlow builds
for ExtractImagePatches (patches of an index image, a sparse matrix, a sparse-dense
matmul) needs nothing more: its patches and sparse matrix are invariant, only the
incoming gradient is stacked.

TF 2.21's shape function of ExtractVolumePatches gives an unknown shape of rank 4 (for
a rank-5 result) when the input's dimensions are unknown: the body itself then holds a
wrongly shaped value, and the converter declines (the fallback runs the op as is).
"""

from __future__ import annotations

from pfor_core.extend import Stacked, fold_into_batch, unfold_from_batch


def convert_extract_patches(ctx):
    """ExtractImagePatches / ExtractVolumePatches(images)."""
    (images,) = ctx.inputs
    if images.shape.rank is None:
        return ctx.decline("the images' rank is unknown")
    if ctx.output_shapes[0].rank not in (None, images.shape.rank):
        return ctx.decline("TensorFlow's shape function gave the op a result of the wrong "
                           "rank (input dimensions unknown)")
    out = ctx.emit(fold_into_batch(images.tensor, ctx.n))[0]
    return Stacked(tensor=unfold_from_batch(out, ctx.n_dim, ctx.dims(images)[1]))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(["ExtractImagePatches", "ExtractVolumePatches"], convert_extract_patches,
                 inputs="S")
