"""Colour-space conversions: RGBToHSV and HSVToRGB.

Both kernels map each pixel's last axis (3 channels) alone and take any leading
dimensions, so the iteration axis is one more leading dimension: stacked images run
as they are. Images of per-iteration sizes (ragged, the channel axis uniform) run on
the padded tensor: both maps send a zero pixel to a zero pixel, so the padding stays
zero without a mask. (The adjust_* ops are in image.py; rgb_to_yiq/yuv/grayscale are
matmuls and reductions, which the math pack converts.)
"""

from __future__ import annotations

from pfor_core.extend import elementwise

COLOUR_SPACES = ["RGBToHSV", "HSVToRGB"]


def convert_colour_ragged(ctx):
    """A ragged image (channels uniform): the op on the padded tensor."""
    (x,) = ctx.inputs
    if x.lengths[-1] is not None:
        return ctx.decline("channels that differ between iterations (the kernel needs 3)")
    return [x.with_padded(ctx.emit(x.padded)[0])]


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(COLOUR_SPACES, elementwise, inputs="S")
    registry.add(COLOUR_SPACES, convert_colour_ragged, inputs="R")
