"""Linear algebra: kernels that already take leading batch dimensions.

Most tf.linalg kernels work on the last two axes and treat the rest as a batch, so the
iteration axis is just one more batch axis (``registry.batch_polymorphic``). Inputs
that select diagonals or bands (k, num_rows, padding, num_lower, ...) have no batch
axes and must be invariant. Kernels that do not broadcast batch axes (MatrixSolve,
MatrixSolveLs, ...) get invariant batched inputs tiled; two cheaper special cases:

- MatrixTriangularSolve and BatchMatMul-style broadcasting: stacked inputs get size-1
  axes so that invariant batch axes line up with per-iteration ones; nothing is tiled.
- A solve of an invariant matrix against stacked right-hand sides factors the matrix
  once: the per-iteration right-hand sides become extra columns ``[M, n*K]``.

Cross (the cross product over the last axis) takes two equal shapes and does not
broadcast, so an invariant operand is tiled to the stacked shape, as for the elementwise
family's equal-shape kernels.

MatrixBandPart with per-iteration bounds (``band_part(x, k_i, k_i)``) has no kernel: the
band is a mask built from the row-minus-column offsets, one ``[M, N]`` mask per iteration
(``[n, 1, ..., M, N]``, broadcast over the batch axes and, for invariant matrices, the
matrices themselves: nothing is tiled), then a select. The kernel's bound checks
(``num_lower <= M``, ``num_upper <= N``) are kept at run time.

Diag / DiagPart (the rank-2k tensor diagonal) become MatrixDiag / MatrixDiagPart on a
flattened view: ``Diag(x) = reshape(MatrixDiag(flatten(x)), shape + shape)``.

Not registered: the BatchMatrix* ops, SelfAdjointEig and MatrixExponential, which TF
2.21 refuses to run (removed from GraphDefs long ago), and BandedTriangularSolve, whose
kernel rejects an empty batch (n = 0).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_core.extend import Invariant, Stacked, batch_polymorphic, shapes
from pfor_converters_math.elementwise import same_shape

# Ops whose every input carries the (same) leading batch axes.
_ALL_BATCHED = (
    "MatrixInverse", "MatrixDeterminant", "LogMatrixDeterminant", "Cholesky", "Qr", "Lu",
    "MatrixLogarithm", "MatrixSquareRoot", "MatrixSolve", "CholeskyGrad",
    "TridiagonalSolve", "TridiagonalMatMul", "MatrixDiag", "MatrixDiagPart", "MatrixSetDiag",
)
# Ops with trailing non-batch inputs (diagonal offsets, sizes, padding, bands, l2).
_SOME_BATCHED = {
    "MatrixDiagV2": [0], "MatrixDiagV3": [0],
    "MatrixDiagPartV2": [0], "MatrixDiagPartV3": [0],
    "MatrixBandPart": [0], "MatrixSolveLs": [0, 1],
}
# Decompositions whose vectors are optional: (flag attr, outputs that are then a
# placeholder of shape [0], whatever the batch).
_OPTIONAL_OUTPUTS = {"Svd": ("compute_uv", (1, 2)), "Eig": ("compute_v", (1,)),
                     "SelfAdjointEigV2": ("compute_v", (1,))}


def convert_optional_outputs(ctx):
    """Batch-polymorphic, but skipped vector outputs stay the (invariant) placeholder."""
    out = batch_polymorphic()(ctx)
    flag, skipped = _OPTIONAL_OUTPUTS[ctx.op_type]
    if ctx.attr(flag):
        return out
    return [Invariant(tensor=v.tensor) if k in skipped else v for k, v in enumerate(out)]


def convert_set_diag(ctx):
    """MatrixSetDiagV2/V3. TF's shape function rejects a band of diagonals when the
    input's shape is not fully known (as with a run-time loop length), so that case is
    composed instead: the diagonals laid out by MatrixDiagV3, picked by a band mask."""
    if ctx.inputs[2].is_stacked:
        return ctx.decline("the diagonal offsets k must be invariant")
    matrix, diagonal, k = ctx.stacked(0), ctx.stacked(1), ctx.inputs[2].tensor
    band = tf.get_static_value(k)
    if matrix.shape.is_fully_defined() or band is None or np.size(band) == 1 \
            or band[0] == band[1]:
        return ctx.emit_stacked(matrix, diagonal, k)
    rows, cols = ctx.dims(matrix)[-2:]
    align = ctx.attr("align").decode() if ctx.has_attr("align") else "LEFT_LEFT"
    laid = tf.raw_ops.MatrixDiagV3(diagonal=diagonal, k=k, num_rows=rows, num_cols=cols,
                                   padding_value=tf.zeros([], matrix.dtype), align=align)
    offset = tf.range(cols)[None, :] - tf.range(rows)[:, None]
    mask = tf.logical_and(offset >= int(band[0]), offset <= int(band[1]))
    return Stacked(tensor=tf.where(mask, laid, matrix))


def convert_broadcasting_solve(ctx):
    """MatrixTriangularSolve broadcasts batch axes: line stacked inputs up, tile nothing."""
    matrix, rhs = ctx.inputs
    if matrix.shape.rank is None or rhs.shape.rank is None:
        return ctx.decline("ranks must be known")
    rank = max(matrix.shape.rank, rhs.shape.rank)
    tensors = [shapes.insert_axes(v.tensor, rank, ctx.n) if v.is_stacked else v.tensor
               for v in (matrix, rhs)]
    return ctx.emit_stacked(*tensors)


def convert_solve_columns(ctx):
    """Invariant matrix, stacked right-hand sides: one solve on ``[..., M, n*K]``.

    Each column of a solve (also a regularized least-squares one) is independent, so
    the iterations' right-hand sides are solved as extra columns; the matrix is
    factored once instead of n times.
    """
    matrix, rhs = ctx.inputs[:2]
    if any(v.is_stacked for v in ctx.inputs[2:]):
        return ctx.decline("the regularizer must be invariant")
    if (matrix.shape.rank is None or rhs.shape.rank is None
            or matrix.shape[:-2] != rhs.shape[:-2]
            or not matrix.shape[:-2].is_fully_defined()):
        return ctx.decline("needs equal, static batch axes on matrix and rhs")
    y = rhs.tensor
    d = ctx.dims(y)  # [n, B..., M, K]
    rank = len(d)
    cols = tf.transpose(y, list(range(1, rank - 1)) + [0, rank - 1])  # [B..., M, n, K]
    cols = shapes.reshape(cols, d[1:-1] + [d[0] * d[-1]])
    extra = [v.tensor for v in ctx.inputs[2:]]
    out = ctx.emit(matrix.tensor, cols, *extra)[0]  # [B..., N, n*K]
    od = shapes.dims(out)
    out = shapes.reshape(out, od[:-1] + [d[0], d[-1]])
    out = tf.transpose(out, [rank - 2] + list(range(rank - 2)) + [rank - 1])
    return Stacked(tensor=out)


def convert_diag(ctx):
    """Diag of a rank-k value: MatrixDiag of its flattening, reshaped to rank 2k."""
    (x,) = ctx.inputs
    if x.shape.rank is None or x.shape.rank == 0:
        return ctx.decline("needs a known per-iteration rank of at least 1")
    d = ctx.dims(x)
    flat = x.tensor if len(d) == 2 else shapes.reshape(x.tensor, [d[0], shapes.product(d[1:])])
    out = tf.linalg.diag(flat)
    if len(d) == 2:
        return Stacked(tensor=out)
    return Stacked(tensor=shapes.reshape(out, d + d[1:]))


def convert_diag_part(ctx):
    """DiagPart of a rank-2k value: MatrixDiagPart of its ``[D, D]`` view."""
    (x,) = ctx.inputs
    rank = x.shape.rank
    if rank is None or rank == 0 or rank % 2:
        return ctx.decline("needs a known, even per-iteration rank")
    d = ctx.dims(x)
    half = d[1:1 + rank // 2]
    size = shapes.product(half)
    square = x.tensor if rank == 2 else shapes.reshape(x.tensor, [d[0], size, size])
    out = tf.linalg.diag_part(square)
    if rank == 2:
        return Stacked(tensor=out)
    return Stacked(tensor=shapes.reshape(out, [d[0]] + half))


def convert_band_part_stacked_bounds(ctx):
    """MatrixBandPart(input, num_lower, num_upper) with a per-iteration bound: a
    per-iteration band mask and a select (a negative bound keeps that whole triangle)."""
    x, lower, upper = ctx.inputs
    if x.shape.rank is None:
        return ctx.decline("the matrices' rank is unknown")
    rank = x.shape.rank
    rows, cols = shapes.dims(x.tensor)[-2:]
    # offset[r, c] = r - c: below the diagonal positive, above negative.
    offset = tf.range(rows)[:, None] - tf.range(cols)[None, :]

    def bound(value):  # [n, 1, 1] when stacked, a scalar when not
        b = tf.cast(value.tensor, tf.int32)
        return b[:, None, None] if value.is_stacked else b

    low, high = bound(lower), bound(upper)
    keep = ((low < 0) | (offset <= low)) & ((high < 0) | (-offset <= high))  # [n, M, N]
    keep = shapes.insert_axes(keep, rank, ctx.n)  # [n, 1.., M, N]
    valid = (tf.reduce_all(low <= tf.cast(rows, tf.int32))
             & tf.reduce_all(high <= tf.cast(cols, tf.int32)))
    keep = ctx.check(valid, "num_lower must be negative or less or equal to the number of "
                     "rows, and num_upper to the number of columns", tensor=keep)
    return Stacked(tensor=tf.where(keep, x.tensor, tf.zeros([], x.dtype)))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.batch_polymorphic(_ALL_BATCHED)
    for op_type, batched in _SOME_BATCHED.items():
        registry.batch_polymorphic(op_type, batched_inputs=batched)
    registry.add(["MatrixSetDiagV2", "MatrixSetDiagV3"], convert_set_diag, inputs="**U")
    registry.add(list(_OPTIONAL_OUTPUTS), convert_optional_outputs, inputs="S")
    registry.add("MatrixTriangularSolve", convert_broadcasting_solve, inputs="**")
    registry.add(["MatrixSolve", "MatrixTriangularSolve"], convert_solve_columns,
                 inputs="US")
    registry.add("MatrixSolveLs", convert_solve_columns, inputs="USU")
    registry.add("Diag", convert_diag, inputs="S")
    registry.add("DiagPart", convert_diag_part, inputs="S")
    registry.add("Cross", same_shape, inputs="**")
    registry.add("MatrixBandPart", convert_band_part_stacked_bounds, inputs="*S*")
    registry.add("MatrixBandPart", convert_band_part_stacked_bounds, inputs="*US")
