"""Fast Fourier transforms: FFT, IFFT, RFFT, IRFFT in 1, 2 and 3 dimensions.

Each transforms the innermost 1, 2 or 3 axes and treats every axis before them as a
batch, so the iteration axis is one more batch axis and a stacked input converts as it
is. The real transforms take ``fft_length`` (the transform size, which fixes the
output's inner dimensions): it must be invariant, since iterations with different
lengths would have outputs of different shapes.
"""

from __future__ import annotations

from pfor_core.extend import elementwise

COMPLEX = ("FFT", "IFFT", "FFT2D", "IFFT2D", "FFT3D", "IFFT3D")
REAL = ("RFFT", "IRFFT", "RFFT2D", "IRFFT2D", "RFFT3D", "IRFFT3D")


def convert_real_fft(ctx):
    x, fft_length = ctx.inputs
    if fft_length.is_stacked:
        return ctx.decline("fft_length differs between iterations (stacked); it must be "
                           "loop-invariant")
    return ctx.emit_stacked(x.tensor, fft_length.tensor)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(COMPLEX, elementwise, inputs="S")
    registry.add(REAL, convert_real_fft, inputs="**")
