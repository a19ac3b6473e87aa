"""Elementwise ops (unary math, broadcasting n-ary ops, selects, AddN) in every layout.

A unary op on a stacked input runs as it is on the stacked tensor. Broadcasting ops get
size-1 axes after the stacked axis of each lower-rank stacked input, so every input
lines up from the right and invariant inputs are never tiled. The few kernels that
demand equal shapes instead of broadcasting (gradient ops, ApproximateEqual, Betainc)
get their inputs broadcast to the stacked output shape; ClipByValue and the v1 Select,
whose operands are "same shape or scalar/rows", are rewritten onto broadcasting ops
where they would otherwise need tiling.

Ragged values (pattern letter R): a unary op runs on the padded tensor; its padding is
then zeroed by a select, except for ops that map zero to zero (and False to False), whose
padding stays zero by itself. Broadcasting ops line their operands up
(``extend.padded_operands.broadcast``: ragged operands padded to one width,
per-iteration sizes checked to broadcast as the loop's shapes would) and mask the
result. Kernels that want
equal shapes (TanhGrad, ...) and AddN take operands whose sizes are checked equal per
iteration, also where one varies in a dimension in which another is fixed.

The gradient of a broadcasting op between values whose shapes differ between iterations
starts with ``BroadcastGradientArgs(s0, s1)`` of per-iteration shapes: for each operand,
the axes (of the shapes aligned from the right, padded with 1s) where that operand has
size 1, and nothing when the two shapes are equal. Per iteration these lists differ in
length: a ragged value (``reductions.SummedRows`` takes the Sum over them).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_core.extend import (Decline, Ragged, Stacked, broadcasting, elementwise,
                              padded_operands, shapes)

from pfor_converters_math import special
from pfor_converters_math.ragged_common import same_lengths

UNARY = (
    "Abs", "Neg", "Sign", "Exp", "Expm1", "Log", "Log1p", "Sqrt", "Rsqrt", "Square",
    "Reciprocal", "Inv", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
    "Tanh", "Asinh", "Acosh", "Atanh", "Floor", "Ceil", "Round", "Rint", "Erf", "Erfc",
    "Erfinv", "Ndtri", "Lgamma", "Digamma", "Sigmoid", "IsNan", "IsInf", "IsFinite",
    "LogicalNot", "Cast", "Real", "Imag", "Conj", "ComplexAbs", "Angle", "Invert",
    "PopulationCount", "OnesLike", "ZerosLike", "BesselI0e", "BesselI1e", "Bucketize",
)

BINARY = (
    "AddV2", "Add", "Sub", "Mul", "MulNoNan", "Div", "DivNoNan", "RealDiv", "FloorDiv",
    "FloorMod", "TruncateDiv", "TruncateMod", "Mod", "Pow", "Maximum", "Minimum",
    "SquaredDifference", "Atan2", "Xdivy", "Xlogy", "Xlog1py", "Equal", "NotEqual", "Less",
    "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "BitwiseAnd",
    "BitwiseOr", "BitwiseXor", "LeftShift", "RightShift", "Igamma", "Igammac", "Zeta",
    "Polygamma", "NextAfter", "Complex",
)

# Kernels that require all inputs to have one shape (no broadcasting, no scalars).
SAME_SHAPE = (
    "ApproximateEqual", "TanhGrad", "SigmoidGrad", "SqrtGrad", "RsqrtGrad",
    "ReciprocalGrad", "InvGrad",
)


def _out_shape(ctx) -> list:
    """The stacked output shape ``[n, ...]`` of an op whose inputs share one shape,
    taken from the highest-rank input (static where known)."""
    widest = max(ctx.inputs, key=lambda v: (v.shape.rank, v.is_stacked))
    d = shapes.dims(widest.tensor, ctx.n if widest.is_stacked else None)
    n = ctx.n_dim
    return d if widest.is_stacked else [n] + d


def _broadcast_all(ctx, keep_scalars: bool) -> list[tf.Tensor]:
    """Every input broadcast to the stacked output shape (the unavoidable tiling for
    kernels that do not broadcast); invariant scalars stay as they are if allowed."""
    if any(v.shape.rank is None for v in ctx.inputs):
        return None
    target = _out_shape(ctx)
    rank = len(target) - 1
    out = []
    for v in ctx.inputs:
        if v.is_stacked and v.shape.rank == rank:
            out.append(v.tensor)
        elif not v.is_stacked and keep_scalars and v.shape.rank == 0:
            out.append(v.tensor)
        else:
            t = shapes.insert_axes(v.tensor, rank, ctx.n) if v.is_stacked else v.tensor
            out.append(tf.broadcast_to(t, shapes.shape_tensor(target)))
    return out


def same_shape(ctx):
    """Ops whose kernel needs equal input shapes: broadcast invariant inputs."""
    tensors = _broadcast_all(ctx, keep_scalars=False)
    if tensors is None:
        return ctx.decline("an input's rank is unknown")
    return ctx.emit_stacked(*tensors)


# With the output y invariant (a forward pass computed once, as in a jacobian) and the
# incoming gradient stacked, the kernel's own formula broadcasts y instead of tiling it.
_FROM_OUTPUT = {
    "TanhGrad": lambda y, dy: dy * (1 - y * y),
    "SigmoidGrad": lambda y, dy: dy * (y * (1 - y)),
}


def convert_grad_of_invariant_output(ctx):
    y, dy = ctx.inputs
    return Stacked(tensor=_FROM_OUTPUT[ctx.op_type](y.tensor, dy.tensor))


def convert_betainc(ctx):
    """Betainc takes equal shapes or scalars: broadcast all but invariant scalars."""
    tensors = _broadcast_all(ctx, keep_scalars=True)
    if tensors is None:
        return ctx.decline("an input's rank is unknown")
    return ctx.emit_stacked(*tensors)


def convert_clip(ctx):
    """ClipByValue(t, lo, hi): lo and hi are scalars or t's shape per iteration.

    When the stacked operands already fit the kernel (t stacked, each bound stacked
    with t's rank or an invariant scalar) it runs as is; otherwise it becomes
    Maximum(Minimum(t, hi), lo) with broadcasting, which is what the kernel computes.
    """
    t, lo, hi = ctx.inputs
    if any(v.shape.rank is None for v in ctx.inputs):
        return ctx.decline("an input's rank is unknown")
    rank = t.shape.rank

    def fits(v):
        return (v.is_stacked and v.shape.rank == rank) or (not v.is_stacked and v.shape.rank == 0)

    if t.is_stacked and fits(lo) and fits(hi):
        return ctx.emit_stacked(t.tensor, lo.tensor, hi.tensor)
    t_, lo_, hi_ = (shapes.insert_axes(v.tensor, rank, ctx.n) if v.is_stacked else v.tensor
                    for v in ctx.inputs)
    return Stacked(tensor=tf.maximum(tf.minimum(t_, hi_), lo_))


def convert_select(ctx):
    """v1 Select: the condition is t's shape, a scalar, or a vector picking rows of t.

    A lower-rank condition gets trailing size-1 axes (an invariant scalar already
    broadcasts), which turns every case into the broadcasting SelectV2.
    """
    cond, t, e = ctx.inputs
    if any(v.shape.rank is None for v in ctx.inputs):
        return ctx.decline("an input's rank is unknown")
    rank = max(t.shape.rank, e.shape.rank)
    c = cond.tensor
    if cond.shape.rank < rank and (cond.is_stacked or cond.shape.rank):
        d = shapes.dims(c, ctx.n if cond.is_stacked else None)
        c = shapes.reshape(c, d + [1] * (rank - cond.shape.rank))
    tensors = [shapes.insert_axes(v, rank, ctx.n) if layout.is_stacked else v
               for v, layout in zip((c, t.tensor, e.tensor), ctx.inputs)]
    return ctx.emit_stacked(*tensors, op_type="SelectV2")


def convert_add_n(ctx):
    """AddN: sum the stacked inputs and the invariant inputs apart, then add once.

    AddN's inputs share one shape, so the invariant sum broadcasts against the stacked
    one without tiling.
    """
    if ctx.inputs[0].dtype == tf.variant:
        return ctx.decline("AddN of variants (tensor lists) is not elementwise")
    stacked = [v.tensor for v in ctx.inputs if v.is_stacked]
    invariant = [v.tensor for v in ctx.inputs if not v.is_stacked]
    total = stacked[0] if len(stacked) == 1 else tf.math.add_n(stacked)
    if invariant:
        shared = invariant[0] if len(invariant) == 1 else tf.math.add_n(invariant)
        total = tf.math.add(total, shapes.lift_contraction(shared, total.shape.rank))
    return Stacked(tensor=total)


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
    return padded_operands.result(out, x.lengths, masked=ctx.op_type not in _ZERO_PRESERVING)


# Binary ops with f(0, 0) == 0: between ragged operands (padding zero in all of them,
# at the same places once joined) the padding stays zero without a mask, and a gradient
# reaching it goes to the operands' padding only (element by element).
_ZERO_PRESERVING_BINARY = frozenset({"AddV2", "Add", "Sub", "Mul", "Maximum", "Minimum",
                                     "BitwiseOr", "BitwiseXor", "LogicalOr"})


def convert_broadcasting(ctx):
    """An n-ary op with numpy broadcasting, at least one operand ragged."""
    clean = ((ctx.op_type in _ZERO_PRESERVING_BINARY and _same_lengths(ctx.inputs))
             or _scaled_by_a_finite_constant(ctx))
    tensors, lengths = padded_operands.broadcast(ctx, ctx.inputs)
    # (where an operand's size was not known statically but the op's is, the walk
    # fits the result to it: results.check)
    return padded_operands.result(ctx.emit(*tensors)[0], lengths, masked=not clean)


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
    ranks = {padded_operands.per_iteration_rank(v) for v in ctx.inputs}
    if len(ranks) != 1:
        return ctx.decline("operands of different ranks")
    axes = sorted({d for v in ctx.inputs if isinstance(v, Ragged) for d in v.ragged_axes})
    def fixed_axes(v):
        return [d for d in axes if not (isinstance(v, Ragged) and v.lengths[d] is not None)]

    inputs = [v if isinstance(v, Ragged) and set(axes) <= set(v.ragged_axes)
              else padded_operands.sized(ctx, v, fixed_axes(v)) for v in ctx.inputs]
    first = inputs[0]
    for v in inputs[1:]:
        for d in axes:
            same_lengths(ctx, first.lengths[d], v.lengths[d], f"{ctx.op_type} dimension {d}")
    tensors, lengths = padded_operands.broadcast(ctx, inputs)  # pads them to one width
    if ctx.op_type == "AddN":
        return padded_operands.result(tf.math.add_n(tensors), lengths)
    return padded_operands.result(ctx.emit(*tensors)[0], lengths)


def convert_ragged_clip(ctx):
    """ClipByValue(t, lo, hi) of a ragged t: bounds are scalars per iteration, so it is
    Maximum(Minimum(t, hi), lo) with broadcasting."""
    (t, lo, hi), lengths = padded_operands.broadcast(ctx, ctx.inputs)
    return padded_operands.result(tf.maximum(tf.minimum(t, hi), lo), lengths)


RAGGED_UNARY = UNARY + special.UNARY
RAGGED_BINARY = BINARY + special.BINARY


def patterns(count: int) -> list[str]:
    """Every pattern of ``count`` inputs with at least one R, others S or U ("*")."""
    import itertools  # pylint: disable=import-outside-toplevel

    return ["".join(p) for p in itertools.product("R*", repeat=count) if "R" in p]


def convert_broadcast_gradient_args(ctx):
    """Per-iteration shapes (ranks static): the axes to sum, as ragged values."""
    s0, s1 = (tf.cast(ctx.stack(v), tf.int32) for v in ctx.inputs)
    r0, r1 = s0.shape[1], s1.shape[1]
    if r0 is None or r1 is None:
        raise Decline("shape ranks are not static")
    rank = max(r0, r1)
    n = tf.shape(s0, out_type=tf.int32)[0]
    a0 = tf.concat([tf.ones([n, rank - r0], tf.int32), s0], 1)
    a1 = tf.concat([tf.ones([n, rank - r1], tf.int32), s1], 1)
    fits = tf.reduce_all(tf.equal(a0, a1) | tf.equal(a0, 1) | tf.equal(a1, 1))
    same = (tf.reduce_all(tf.equal(s0, s1), axis=1) if r0 == r1
            else tf.zeros([n], tf.bool))
    outs = []
    for aligned in (a0, a1):
        summed = tf.logical_and(tf.equal(aligned, 1), tf.logical_not(same)[:, None])
        outs.append(_positions(ctx, summed, rank))
    outs[0] = Ragged(padded=ctx.check(fits, "incompatible shapes for broadcasting",
                                      tensor=outs[0].padded), lengths=outs[0].lengths)
    return outs


def _positions(ctx, mask, rank):
    """The positions of True in each row of ``mask`` ``[n, rank]``, front-packed."""
    dtype = ctx.output_dtypes[0]
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    # A stable sort of "not selected" brings the selected positions to the front.
    order = tf.argsort(tf.cast(tf.logical_not(mask), tf.int32), axis=1, stable=True)
    return Ragged.from_stacked(tf.cast(order, dtype), [lengths])


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(UNARY, elementwise, inputs="S")
    registry.add(BINARY, broadcasting, inputs="**")
    registry.add("SelectV2", broadcasting, inputs="***")
    registry.add("Select", convert_select, inputs="***")
    registry.add("ClipByValue", convert_clip, inputs="***")
    registry.add(SAME_SHAPE, same_shape, inputs="**")
    registry.add(list(_FROM_OUTPUT), convert_grad_of_invariant_output, inputs="US")
    registry.add("Betainc", convert_betainc, inputs="***")
    registry.add("AddN", convert_add_n, inputs="*...")
    registry.add(RAGGED_UNARY, convert_unary, inputs="R")
    for pattern in patterns(2):
        registry.add(RAGGED_BINARY, convert_broadcasting, inputs=pattern)
    for pattern in patterns(3):
        registry.add("SelectV2", convert_broadcasting, inputs=pattern)
    registry.add("ClipByValue", convert_ragged_clip, inputs="R**")
    # Equal shapes per iteration: a ragged operand against a fixed one could match only
    # by chance, so only all-ragged patterns.
    registry.add(SAME_SHAPE, convert_equal_shapes, inputs="RR")
    # (a ragged operand against a fixed one: a value of no static size in a nested
    # pfor's body, as its gradients add them, or one of a static size)
    for pattern in ("R*", "*R"):
        registry.add(SAME_SHAPE, convert_equal_shapes, inputs=pattern)
        registry.add("AddN", convert_equal_shapes, inputs=pattern)
    registry.add("AddN", convert_equal_shapes, inputs="R...")
    registry.add("BroadcastGradientArgs", convert_broadcast_gradient_args, inputs="SS")
    registry.add("BroadcastGradientArgs", convert_broadcast_gradient_args, inputs="SU")
    registry.add("BroadcastGradientArgs", convert_broadcast_gradient_args, inputs="US")
