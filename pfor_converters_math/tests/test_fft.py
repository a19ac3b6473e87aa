"""Property tests for the FFT family: pfor against the sequential loop.

Each example draws a transform (complex or real, forward or inverse, 1 to 3 dims), a
per-iteration shape with batch axes before the transformed ones, a dtype, for the real
transforms an (invariant) fft_length that may crop or pad, and the loop length (0
included). A stacked fft_length is declined with a reason.
"""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing
from pfor_converters_math import fft

SIGNAL = tf.signal
# (dims, inverse) -> function, for complex and for real transforms.
COMPLEX = {(1, False): SIGNAL.fft, (1, True): SIGNAL.ifft, (2, False): SIGNAL.fft2d,
           (2, True): SIGNAL.ifft2d, (3, False): SIGNAL.fft3d, (3, True): SIGNAL.ifft3d}
REAL = {(1, False): SIGNAL.rfft, (1, True): SIGNAL.irfft, (2, False): SIGNAL.rfft2d,
        (2, True): SIGNAL.irfft2d, (3, False): SIGNAL.rfft3d, (3, True): SIGNAL.irfft3d}
OP_TYPES = {"FFT": (1, False), "IFFT": (1, True), "FFT2D": (2, False),
            "IFFT2D": (2, True), "FFT3D": (3, False), "IFFT3D": (3, True)}
# complex dtype -> the real dtype of the real transforms' real side.
REAL_OF = {tf.complex64: tf.float32, tf.complex128: tf.float64}


def complex_values(rng, shape, dtype):
    return tf.constant((rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape))
                       .astype(dtype.as_numpy_dtype))


def tolerance(dtype):
    # Sums of up to 4**3 terms of size ~2: float32 rounding reaches ~1e-5.
    return dict(rtol=1e-4, atol=1e-4) if dtype == tf.complex64 else {}


def test_every_registered_op_is_tested_and_emitted_by_its_test_function():
    assert set(fft.COMPLEX) == set(OP_TYPES)
    assert set(fft.REAL) == {f"{'I' if inv else ''}RFFT{'' if d == 1 else f'{d}D'}"
                             for d, inv in OP_TYPES.values()}
    for name, key in OP_TYPES.items():
        for family, prefix in ((COMPLEX, ""), (REAL, "R")):
            op_type = name.replace("FFT", prefix + "FFT")
            real_in = family is REAL and not key[1]
            spec = tf.TensorSpec([4] * 3, tf.float32 if real_in else tf.complex64)
            graph = tf.function(family[key], autograph=False).get_concrete_function(spec).graph
            assert op_type in {op.type for op in graph.get_operations()}, op_type


@settings(max_examples=35)
@given(data=st.data(), real=st.booleans(), dims=st.integers(1, 3), inverse=st.booleans(),
       lead=st.lists(st.integers(0, 2), max_size=2), dtype=st.sampled_from(list(REAL_OF)),
       n=st.integers(0, 3), seed=st.integers(0, 2**31 - 1))
def test_transforms(data, real, dims, inverse, lead, dtype, n, seed):
    inner = data.draw(st.lists(st.integers(1, 4), min_size=dims, max_size=dims),
                      label="inner")
    if real:
        # tf.signal skips padding an empty input up to fft_length, which the kernel then
        # rejects in every iteration (an error even pfor over 0 iterations reports).
        lead = [max(d, 1) for d in lead]
    shape = [n] + lead + inner
    rng = np.random.default_rng(seed)
    mode = data.draw(st.sampled_from(testing.DRAWN_MODES), label="mode")
    if not real:
        testing.check_op(COMPLEX[dims, inverse], [complex_values(rng, shape, dtype)],
                         stacked=[True], n=n, mode=mode, **tolerance(dtype))
        return
    # fft_length crops or zero-pads each transformed axis.
    length = data.draw(st.lists(st.integers(1, 5), min_size=dims, max_size=dims),
                       label="fft_length")
    if inverse:
        x = complex_values(rng, shape, dtype)
    else:
        x = tf.constant(rng.uniform(-2, 2, shape), REAL_OF[dtype])
    testing.check_op(lambda t: REAL[dims, inverse](t, fft_length=length), [x],
                     stacked=[True], n=n, mode=mode, **tolerance(dtype))


@pytest.mark.parametrize("op", [tf.raw_ops.RFFT, tf.raw_ops.IRFFT])
def test_stacked_fft_length_is_declined_with_a_reason(op):
    """(tf.signal would pad the input to a stacked length first: use the raw ops.)"""
    x = tf.random.uniform([3, 6])
    if op is tf.raw_ops.IRFFT:
        x = tf.complex(x, x)
    lengths = tf.constant([[4], [4], [4]])

    def body(i):
        return op(input=tf.gather(x, i), fft_length=tf.gather(lengths, i))

    with pytest.raises(pf.ConversionError, match="fft_length differs between iterations"):
        pf.pfor(body, 3, fallback="error")
    # The fallback still gives the loop's result.
    testing.assert_matches_loop(body, 3, fallback="loop")
