"""Hypothesis strategies for converter tests: the loop length, the layout of every input
(invariant or stacked), shapes, dtypes and values.

A layout is drawn as a code per input: ``"S"`` stacked (the value fed to pfor has a
leading dimension of size n, row i going to iteration i), ``"U"`` invariant (shared
by all iterations) or ``"R"`` ragged (a ``RaggedArg``: iteration i gets the first
``lengths[i]`` rows of its value, lengths drawn from 0 to the shape's first
dimension). ``LAYOUTS`` lists the codes drawn by default, ``WITH_RAGGED`` adds ``R``
(pass it as ``layouts(count, choices=WITH_RAGGED)`` for converters that take ragged
values), and ``VALUE_MAKERS`` makes a value of each.

>>> from hypothesis import given
>>> from pfor_core.testing import strategies
>>> @given(strategies.inputs([[2], [2]], "float32", n=3))
... def test_shapes(drawn):
...     assert len(drawn.values) == 2 and "S" in drawn.layouts
...     for value, code in zip(drawn.values, drawn.layouts):
...         assert value.shape == ((3, 2) if code == "S" else (2,))
>>> test_shapes()
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf
from hypothesis import strategies as st

from pfor_core.testing.loop import DRAWN_MODES, RaggedArg

STACKED, INVARIANT, RAGGED = "S", "U", "R"
LAYOUTS = (STACKED, INVARIANT)
WITH_RAGGED = (STACKED, INVARIANT, RAGGED)


def iters(max_n: int = 4, *, min_n: int = 0):
    """Loop lengths from ``min_n`` to ``max_n``; 0 (no iteration) is included by
    default, since every converter must handle it."""
    return st.integers(min_n, max_n)


def modes(*, unknown_shapes: bool = True):
    """How ``check_op`` runs pfor (``loop.MODES``): eagerly, in a ``tf.function`` with a
    run-time loop length, and (unless ``unknown_shapes=False``) with inputs of unknown
    dimensions, which exercises converters' dynamic paths."""
    return st.sampled_from(DRAWN_MODES if unknown_shapes else DRAWN_MODES[:2])


def layouts(count: int, *, choices=LAYOUTS, require_stacked: bool = True, fixed=None):
    """Tuples of ``count`` layout codes. At least one input is stacked unless
    ``require_stacked=False`` (all-invariant ops are not converted at all). ``fixed``
    maps input positions to the code they must have (an axis that must be invariant)."""
    fixed = dict(fixed or {})
    free = [k for k in range(count) if k not in fixed]

    def build(drawn):
        out = [fixed.get(k) for k in range(count)]
        for k, code in zip(free, drawn):
            out[k] = code
        return tuple(out)

    codes = st.tuples(*[st.sampled_from(choices) for _ in free]).map(build)
    if require_stacked:
        codes = codes.filter(lambda c: STACKED in c or RAGGED in c)
    return codes


def shapes(*, rank=None, min_rank: int = 0, max_rank: int = 3, min_side: int = 0,
           max_side: int = 4):
    """Per-iteration shapes (lists of ints); sides of 0 are drawn unless ``min_side``
    excludes them."""
    if rank is not None:
        min_rank = max_rank = rank
    return st.lists(st.integers(min_side, max_side), min_size=min_rank, max_size=max_rank)


def dtypes(*names):
    """TensorFlow dtypes among ``names`` (default: float32 and float64)."""
    return st.sampled_from([tf.as_dtype(n) for n in (names or ("float32", "float64"))])


def _values(rng, shape, dtype, low, high):
    dtype = tf.as_dtype(dtype)
    if dtype == tf.bool:
        return rng.random(shape) < 0.5
    if dtype.is_integer:
        return rng.integers(int(np.floor(low)), int(np.ceil(high)) + 1, shape).astype(
            dtype.as_numpy_dtype)
    value = rng.uniform(low, high, shape)
    if dtype.is_complex:
        value = value + 1j * rng.uniform(low, high, shape)
    return value.astype(dtype.as_numpy_dtype)


@st.composite
def arrays(draw, shape, dtype, *, low: float = -3.0, high: float = 3.0):
    """A numpy array of ``shape`` and ``dtype`` with values in ``[low, high]`` (from a
    drawn seed: cheap to draw, and shrinks to small seeds)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16), label="seed"))
    return _values(rng, list(shape), dtype, low, high)


def _stacked_value(draw, shape, dtype, n, low, high):
    return draw(arrays([n] + list(shape), dtype, low=low, high=high))


def _invariant_value(draw, shape, dtype, n, low, high):  # pylint: disable=unused-argument
    return draw(arrays(shape, dtype, low=low, high=high))


def _ragged_value(draw, shape, dtype, n, low, high):
    """Rows of lengths 0 to ``shape[0]`` (the padding beyond them holds values too, which
    no iteration may read)."""
    if not shape:
        raise ValueError("a ragged input needs a per-iteration shape of rank >= 1")
    lengths = draw(st.lists(st.integers(0, shape[0]), min_size=n, max_size=n), label="lengths")
    padded = draw(arrays([n] + list(shape), dtype, low=low, high=high))
    return RaggedArg(padded, np.asarray(lengths, np.int32))


# How a value of each layout code is made: maker(draw, shape, dtype, n, low, high).
VALUE_MAKERS = {STACKED: _stacked_value, INVARIANT: _invariant_value, RAGGED: _ragged_value}


@dataclasses.dataclass(frozen=True)
class Inputs:
    """Drawn inputs of one op: ``values`` in order (a stacked one with a leading ``n``),
    the layout code of each, and the loop length."""

    values: tuple
    layouts: tuple
    n: int

    @property
    def stacked(self) -> list[bool]:
        """Per input, whether it differs per iteration (``check_op``'s ``stacked``)."""
        return [code in (STACKED, RAGGED) for code in self.layouts]


@st.composite
def inputs(draw, shapes_, dtypes_, *, n=None, layouts_=None, low: float = -3.0,
           high: float = 3.0):
    """Values for an op's inputs: ``shapes_`` are the per-iteration shapes, ``dtypes_``
    one dtype or one per input; ``n`` a loop length (drawn with ``iters()`` when None);
    ``layouts_`` a tuple of codes or a strategy of them (default ``layouts(len(shapes_))``).
    """
    count = len(shapes_)
    kinds = dtypes_ if isinstance(dtypes_, (list, tuple)) else [dtypes_] * count
    n = draw(iters(), label="n") if n is None else n
    if layouts_ is None:
        layouts_ = layouts(count)
    codes = layouts_ if isinstance(layouts_, tuple) else draw(layouts_, label="layouts")
    values = tuple(VALUE_MAKERS[code](draw, shape, dtype, n, low, high)
                   for code, shape, dtype in zip(codes, shapes_, kinds))
    return Inputs(values=values, layouts=tuple(codes), n=n)
