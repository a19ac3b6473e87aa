"""Elementwise ops of ragged values (pattern letter R).

A unary op runs on the padded tensor; its padding is then zeroed by a select, except
for ops that map zero to zero (and False to False), whose padding stays zero by itself.
Broadcasting ops line their operands up (``ragged_common.broadcast``: ragged operands
padded to one width, per-iteration sizes checked to broadcast as the loop's shapes
would) and mask the result. Kernels that want equal shapes (TanhGrad, ...) and AddN
take operands whose sizes are checked equal per iteration, also where one varies in a
dimension in which another is fixed.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_core.extend import Ragged

from pfor_converters_math import elementwise, special
from pfor_converters_math.ragged_common import (broadcast, per_iteration_rank, result,
                                                 same_lengths, sized)

# Unary ops with f(0) == 0 (or False): the padding needs no mask after them.
_ZERO_PRESERVING = frozenset({
    "Abs", "Neg", "Sign", "Expm1", "Log1p", "Sqrt", "Square", "Sin", "Tan", "Asin",
    "Atan", "Sinh", "Tanh", "Asinh", "Atanh", "Floor", "Ceil", "Round", "Rint", "Erf",
    "Erfinv", "IsNan", "IsInf", "Cast", "Real", "Imag", "Conj", "ComplexAbs",
    "PopulationCount", "ZerosLike",
})


def convert_unary(ctx):
    """A unary elementwise op on the padded tensor, the padding zeroed again."""
    x = ctx.inputs[0]
    out = ctx.emit(x.padded)[0]
    return result(out, x.lengths, masked=ctx.op_type not in _ZERO_PRESERVING)


# Binary ops with f(0, 0) == 0: between ragged operands (padding zero in all of them,
# at the same places once joined) the padding stays zero without a mask, and a gradient
# reaching it goes to the operands' padding only (element by element).
_ZERO_PRESERVING_BINARY = frozenset({"AddV2", "Add", "Sub", "Mul", "Maximum", "Minimum",
                                     "BitwiseOr", "BitwiseXor", "LogicalOr"})


def convert_broadcasting(ctx):
    """An n-ary op with numpy broadcasting, at least one operand ragged."""
    clean = ((ctx.op_type in _ZERO_PRESERVING_BINARY and _same_lengths(ctx.inputs))
             or _scaled_by_a_finite_constant(ctx))
    tensors, lengths = broadcast(ctx, ctx.inputs)
    # (where an operand's size was not known statically but the op's is, the walk
    # fits the result to it: results.check)
    return result(ctx.emit(*tensors)[0], lengths, masked=not clean)


def _scaled_by_a_finite_constant(ctx) -> bool:
    """Whether the op is one ragged value times (or divided by) constants the body
    knows to be finite (and nonzero, as divisors): zero padding stays zero (an
    attention's ``scores * d ** -0.5``)."""
    if ctx.op_type not in ("Mul", "RealDiv", "Div") or len(ctx.inputs) != 2:
        return False
    ragged = [k for k, v in enumerate(ctx.inputs) if isinstance(v, Ragged)]
    if len(ragged) != 1 or (ctx.op_type != "Mul" and ragged != [0]):
        return False
    other = ctx.inputs[1 - ragged[0]]
    value = None if other.is_stacked else tf.get_static_value(other.tensor)
    if value is None:
        return False
    value = np.asarray(value)
    if value.dtype.kind in "fc" and not np.all(np.isfinite(value)):
        return False
    return ctx.op_type == "Mul" or bool(np.all(value != 0))


def _same_lengths(values) -> bool:
    """Whether all operands are ragged with the very same lengths tensors (so no row is
    broadcast from size 1 and their paddings coincide)."""
    first = values[0]
    return all(isinstance(v, Ragged) and v.padded.shape.rank == first.padded.shape.rank
               and len(v.lengths) == len(first.lengths)
               and all(a is b for a, b in zip(v.lengths, first.lengths)) for v in values)


def convert_equal_shapes(ctx):
    """Kernels without broadcasting (TanhGrad, ...) and AddN: operands of equal sizes in
    every iteration (checked: the loop's kernel fails otherwise). An operand fixed in a
    dimension where another varies (a stacked one, or a ragged one that varies
    elsewhere: a nested pfor's masked loop may mark a row count as varying) is checked
    there by its size, which is then the same in every iteration."""
    ranks = {per_iteration_rank(v) for v in ctx.inputs}
    if len(ranks) != 1:
        return ctx.decline("operands of different ranks")
    axes = sorted({d for v in ctx.inputs if isinstance(v, Ragged) for d in v.ragged_axes})
    inputs = [v if isinstance(v, Ragged) and set(axes) <= set(v.ragged_axes)
              else sized(ctx, v, [d for d in axes if not (isinstance(v, Ragged)
                                                          and v.lengths[d] is not None)])
              for v in ctx.inputs]
    first = inputs[0]
    for v in inputs[1:]:
        for d in axes:
            same_lengths(ctx, first.lengths[d], v.lengths[d], f"{ctx.op_type} dimension {d}")
    tensors, lengths = broadcast(ctx, inputs)  # pads them to one width
    if ctx.op_type == "AddN":
        return result(tf.math.add_n(tensors), lengths)
    return result(ctx.emit(*tensors)[0], lengths)


def convert_clip(ctx):
    """ClipByValue(t, lo, hi) of a ragged t: bounds are scalars per iteration, so it is
    Maximum(Minimum(t, hi), lo) with broadcasting."""
    (t, lo, hi), lengths = broadcast(ctx, ctx.inputs)
    return result(tf.maximum(tf.minimum(t, hi), lo), lengths)


UNARY = elementwise.UNARY + special.UNARY
BINARY = elementwise.BINARY + special.BINARY


def patterns(count: int) -> list[str]:
    """Every pattern of ``count`` inputs with at least one R, others S or U ("*")."""
    import itertools  # pylint: disable=import-outside-toplevel

    return ["".join(p) for p in itertools.product("R*", repeat=count) if "R" in p]


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(UNARY, convert_unary, inputs="R")
    for pattern in patterns(2):
        registry.add(BINARY, convert_broadcasting, inputs=pattern)
    for pattern in patterns(3):
        registry.add("SelectV2", convert_broadcasting, inputs=pattern)
    registry.add("ClipByValue", convert_clip, inputs="R**")
    # Equal shapes per iteration: a ragged operand against a fixed one could match only
    # by chance, so only all-ragged patterns.
    registry.add(elementwise.SAME_SHAPE, convert_equal_shapes, inputs="RR")
    # (a ragged operand against a fixed one: a value of no static size in a nested
    # pfor's body, as its gradients add them, or one of a static size)
    for pattern in ("R*", "*R"):
        registry.add(elementwise.SAME_SHAPE, convert_equal_shapes, inputs=pattern)
        registry.add("AddN", convert_equal_shapes, inputs=pattern)
    registry.add("AddN", convert_equal_shapes, inputs="R...")
