"""Property tests for the special functions: pfor against the sequential loop.

Each example draws a per-iteration shape, a dtype, values inside each function's domain,
the loop length (0 included) and several op types, all checked in one pfor call with
fallback="error". IgammaGradA also draws broadcast-compatible shapes and which operand
is stacked.
"""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from pfor_core import testing
from pfor_converters_math import special

FLOATS = (tf.float32, tf.float64)
SPECIAL = tf.math.special

# op type -> (fn, (low, high) of the values drawn).
UNARY = {
    "BesselI0": (SPECIAL.bessel_i0, (-3.0, 3.0)),
    "BesselI1": (SPECIAL.bessel_i1, (-3.0, 3.0)),
    "BesselJ0": (SPECIAL.bessel_j0, (-5.0, 5.0)),
    "BesselJ1": (SPECIAL.bessel_j1, (-5.0, 5.0)),
    "BesselK0": (SPECIAL.bessel_k0, (0.1, 4.0)),
    "BesselK0e": (SPECIAL.bessel_k0e, (0.1, 4.0)),
    "BesselK1": (SPECIAL.bessel_k1, (0.1, 4.0)),
    "BesselK1e": (SPECIAL.bessel_k1e, (0.1, 4.0)),
    "BesselY0": (SPECIAL.bessel_y0, (0.1, 5.0)),
    "BesselY1": (SPECIAL.bessel_y1, (0.1, 5.0)),
    "Dawsn": (SPECIAL.dawsn, (-4.0, 4.0)),
    "Expint": (SPECIAL.expint, (0.1, 3.0)),
    "FresnelCos": (SPECIAL.fresnel_cos, (-3.0, 3.0)),
    "FresnelSin": (SPECIAL.fresnel_sin, (-3.0, 3.0)),
    "Spence": (SPECIAL.spence, (0.0, 3.0)),
}

n_st = st.integers(0, 4)
seeds = st.integers(0, 2**31 - 1)
base_shapes = st.lists(st.integers(0, 3), max_size=3)


def values(rng, low_high, shape, dtype):
    return tf.constant(rng.uniform(*low_high, shape), dtype)


def _emitted_types(fn, *specs):
    graph = tf.function(fn, autograph=False).get_concrete_function(*specs).graph
    return {op.type for op in graph.get_operations()}


def test_every_registered_op_is_tested_and_emitted_by_its_test_function():
    assert set(special.UNARY) == set(UNARY)
    assert special.BINARY == ("IgammaGradA",)
    spec = tf.TensorSpec([2], tf.float32)
    for name, (fn, _) in UNARY.items():
        assert name in _emitted_types(fn, spec), name
    assert "IgammaGradA" in _emitted_types(_igamma_grad_a, spec, spec)


@settings(max_examples=40)
@given(data=st.data(), names=st.lists(st.sampled_from(sorted(UNARY)), min_size=1,
                                     max_size=6, unique=True),
       shape=base_shapes, n=n_st, seed=seeds)
def test_unary(data, names, shape, n, seed):
    rng = np.random.default_rng(seed)
    fns, args = [], []
    for name in names:
        fn, low_high = UNARY[name]
        dtype = data.draw(st.sampled_from(FLOATS), label=f"{name} dtype")
        fns.append(fn)
        args.append(values(rng, low_high, [n] + shape, dtype))
    mode = data.draw(st.sampled_from(testing.DRAWN_MODES), label="mode")
    testing.check_op(lambda *xs: tuple(f(x) for f, x in zip(fns, xs)), args,
                     stacked=[True] * len(args), n=n, mode=mode)


def _igamma_grad_a(a, x):
    return tf.raw_ops.IgammaGradA(a=a, x=x)


@st.composite
def broadcast_shapes(draw):
    """Two shapes that broadcast together: suffixes of one shape, some dims 1."""
    base = draw(base_shapes)
    out = []
    for _ in range(2):
        rank = draw(st.integers(0, len(base)))
        out.append([1 if draw(st.booleans()) else d for d in base[len(base) - rank:]])
    return out


@settings(max_examples=30)
@given(data=st.data(), shapes=broadcast_shapes(), dtype=st.sampled_from(FLOATS),
       stacked=st.sampled_from(testing.invariance_combinations(2)), n=n_st, seed=seeds)
def test_igamma_grad_a_broadcasts_an_invariant_operand(data, shapes, dtype, stacked, n,
                                                       seed):
    rng = np.random.default_rng(seed)
    args = [values(rng, (0.3, 4.0), [n] * s + sh, dtype) for sh, s in zip(shapes, stacked)]
    mode = data.draw(st.sampled_from(testing.DRAWN_MODES), label="mode")
    testing.check_op(_igamma_grad_a, args, stacked=list(stacked), n=n, mode=mode,
                     rtol=1e-3 if dtype == tf.float32 else None)
