"""Matrix products: MatMul, BatchMatMulV2/V3 and Einsum.

Stacked x invariant folds the iteration axis (and every batch axis of the stacked
operand) into the rows, so the whole loop is ONE 2-D matmul on a reshaped input.
Invariant x stacked does the same on the columns: ``a @ [b_0 | b_1 | ...]`` (or, when
the stacked operand is already transposed, ``(b_j @ a^T)^T`` with a single transpose).
Stacked x stacked is a batch matmul. Einsum gives stacked operands a fresh label in
front of their subscripts and of the output's.

A batch matmul is never emitted with an operand whose batch dimensions are all 1 (or
absent) against a stacked one of rank 4 or more: TF 2.21's oneDNN CPU kernel computes
that wrongly (``[4,1,8,16] @ [16,16]`` is off by ~1e31 or corrupts memory), so such
invariant operands are folded as 2-D instead. When an invariant operand's batch dims
are unknown until run time, the iteration axis is merged into the stacked operand's
rows, so the kernel sees only the batch dims the body op itself had.
"""

from __future__ import annotations

import string

import tensorflow as tf

from pfor_core.extend import Decline, Stacked, shapes

# Attr names of the two "transpose this operand" flags, per op type. MatMul transposes;
# the batch matmuls take the adjoint (which conjugates complex operands).
FLAGS = {"MatMul": ("transpose_a", "transpose_b"), "BatchMatMul": ("adj_x", "adj_y"),
          "BatchMatMulV2": ("adj_x", "adj_y"), "BatchMatMulV3": ("adj_x", "adj_y")}


def _conj(ctx, tensor):
    """Conjugate when the op's flags mean adjoint (tf.math.conj is free for reals)."""
    return tf.math.conj(tensor) if ctx.op_type != "MatMul" else tensor


def _flip(ctx, tensor):
    """What the op's flag does to an operand: swap the last two axes (and conjugate)."""
    return tf.linalg.matrix_transpose(tensor, conjugate=ctx.op_type != "MatMul")


def _as_matrix(value):
    """The invariant operand as a 2-D tensor when its batch dims are all 1, else None."""
    shape = value.shape
    if shape.rank is None or any(d != 1 for d in shape[:-2]):
        return None
    if shape.rank == 2:
        return value.tensor
    return shapes.reshape(value.tensor, shapes.dims(value.tensor)[-2:])


def _out_rank(ctx) -> int | None:
    return ctx.output_shapes[0].rank


def _pad_rank(ctx, tensor):
    """Give a stacked result the body op's per-iteration rank (size-1 batch axes)."""
    rank = _out_rank(ctx)
    return shapes.insert_axes(tensor, rank, ctx.n) if rank is not None else tensor


def _stacked_times_matrix(ctx, x, y):
    """x stacked ``[n, B..., m, k]`` (flag applied by the op), y an invariant matrix:
    fold every leading axis of x into the rows of one 2-D product."""
    fx, _ = FLAGS[ctx.op_type]
    if ctx.attr(fx):
        x = _flip(ctx, x)
    d = ctx.dims(x)
    rows = shapes.reshape(x, [shapes.product(d[:-1])] + d[-1:])
    out = ctx.emit(rows, y, attrs={fx: False})[0]
    return _pad_rank(ctx, shapes.reshape(out, d[:-1] + shapes.dims(out)[-1:]))


def _matrix_times_stacked(ctx, x, y):
    """x an invariant matrix, y stacked ``[n, B..., k, p]`` (or ``[..., p, k]`` when
    flagged): fold every leading axis of y into the columns of one 2-D product."""
    fx, fy = FLAGS[ctx.op_type]
    d = ctx.dims(y)
    rank = len(d)
    if ctx.attr(fy):
        # out_j^T = y_j-rows times op(x)^T: one product on y's rows, one transpose.
        rows = shapes.reshape(_conj(ctx, y), [shapes.product(d[:-1])] + d[-1:])
        out = ctx.emit(rows, _conj(ctx, x), attrs={fx: False, fy: not ctx.attr(fx)})[0]
        out = shapes.reshape(out, d[:-1] + shapes.dims(out)[-1:])
        return _pad_rank(ctx, tf.linalg.matrix_transpose(out))
    if isinstance(d[-1], int) and d[-1] == 1:
        # Column vectors (matvec): y_j^T is a reshape, so out_j^T = y_j^T op(x)^T for
        # all j is one product on y's rows, with no transpose at all.
        rows = shapes.reshape(y, [shapes.product(d[:-2]), d[-2]])
        out = ctx.emit(rows, _conj(ctx, x), attrs={fx: False, fy: not ctx.attr(fx)})[0]
        return _pad_rank(ctx, shapes.reshape(out, d[:-2] + shapes.dims(out)[-1:] + [1]))
    # x @ [y_0 | y_1 | ...]: the columns of every y_j side by side.
    cols = tf.transpose(y, [rank - 2] + list(range(rank - 2)) + [rank - 1])
    cols = shapes.reshape(cols, [d[-2], shapes.product(d[:-2] + d[-1:])])
    out = ctx.emit(x, cols)[0]
    m = shapes.dims(out)[0]
    out = shapes.reshape(out, [m] + d[:-2] + d[-1:])
    out = tf.transpose(out, list(range(1, rank - 1)) + [0, rank - 1])
    return _pad_rank(ctx, out)


def _iterations_into_rows(ctx, x, y):
    """x stacked, y invariant with batch dims unknown until run time (they might all be
    1: the oneDNN trap). The iteration axis moves next to x's rows and merges with them,
    so the batch matmul broadcasts only the body op's own batch dims."""
    fx, _ = FLAGS[ctx.op_type]
    if ctx.attr(fx):
        x = _flip(ctx, x)
    rank = max(x.shape.rank - 1, y.shape.rank)  # per-iteration rank of the result
    x = shapes.insert_axes(x, rank, ctx.n)
    d = ctx.dims(x)  # [n, B..., m, k]
    x = tf.transpose(x, list(range(1, rank - 1)) + [0, rank - 1, rank])
    x = shapes.reshape(x, d[1:-2] + [d[0] * d[-2], d[-1]])
    out = ctx.emit(x, y, attrs={fx: False})[0]  # [B..., n*m, p]
    od = shapes.dims(out)
    out = shapes.reshape(out, od[:-2] + [d[0], d[-2], od[-1]])
    return tf.transpose(out, [rank - 2] + list(range(rank - 2)) + [rank - 1, rank])


def _of_rank_two(value):
    """MatMul's operands are matrices; one of unknown rank (e.g. popped from a tensor
    list) is declared one, checked at run time."""
    if value.shape.rank is not None:
        return value
    return type(value)(tensor=tf.ensure_shape(value.tensor, [None] * (2 + value.is_stacked)))


def _matrices(ctx):
    """MatMul's operands, each declared a matrix when its rank is unknown."""
    a, b = (_of_rank_two(v) for v in ctx.inputs)
    if a.shape.rank != 2 or b.shape.rank != 2:
        raise Decline("MatMul operands must have rank 2")
    return a, b


def convert_matmul_stacked_invariant(ctx):
    """Stacked x invariant: one 2-D matmul with the iterations folded into the rows."""
    a, b = _matrices(ctx)
    return Stacked(tensor=_stacked_times_matrix(ctx, a.tensor, b.tensor))


def convert_matmul_invariant_stacked(ctx):
    """Invariant x stacked: one 2-D matmul with the iterations folded into the columns."""
    a, b = _matrices(ctx)
    return Stacked(tensor=_matrix_times_stacked(ctx, a.tensor, b.tensor))


def convert_matmul_stacked_stacked(ctx):
    """Stacked x stacked: a batch matmul; tf.linalg.matmul transposes complex operands
    without conjugating, as MatMul does."""
    a, b = _matrices(ctx)
    return Stacked(tensor=tf.linalg.matmul(
        a.tensor, b.tensor, transpose_a=ctx.attr("transpose_a"),
        transpose_b=ctx.attr("transpose_b")))


def _known_ranks(ctx):
    x, y = ctx.inputs
    if x.shape.rank is None or y.shape.rank is None:
        raise Decline("operand ranks must be known")
    return x, y


def _broadcast_batch(ctx):
    """Batch dims broadcast: stacked operands get size-1 axes after the iteration axis so
    that invariant batch dims line up with per-iteration ones, never with the loop. The
    first BatchMatMul does not broadcast: its invariant operand is tiled."""
    x, y = ctx.inputs
    if ctx.op_type == "BatchMatMul":
        return ctx.emit_stacked(ctx.stacked(0), ctx.stacked(1))
    rank = max(x.shape.rank, y.shape.rank)
    tensors = [shapes.insert_axes(v.tensor, rank, ctx.n) if v.is_stacked else v.tensor
               for v in (x, y)]
    return ctx.emit_stacked(*tensors)


def convert_batch_matmul_stacked_invariant(ctx):
    """Stacked x invariant: a 2-D product when the invariant operand is one matrix;
    the iterations merged into the rows when its batch dims are unknown until run time
    (they might all be 1: the oneDNN trap); else a broadcasting batch matmul."""
    x, y = _known_ranks(ctx)
    matrix = _as_matrix(y)
    if matrix is not None:
        return Stacked(tensor=_stacked_times_matrix(ctx, x.tensor, matrix))
    if ctx.op_type != "BatchMatMul" and not y.shape[:-2].is_fully_defined():
        return Stacked(tensor=_iterations_into_rows(ctx, x.tensor, y.tensor))
    return _broadcast_batch(ctx)


def convert_batch_matmul_invariant_stacked(ctx):
    """Invariant x stacked: a 2-D product when the invariant operand is one matrix,
    else a broadcasting batch matmul."""
    x, _ = _known_ranks(ctx)
    matrix = _as_matrix(x)
    if matrix is not None:
        return Stacked(tensor=_matrix_times_stacked(ctx, matrix, ctx.inputs[1].tensor))
    return _broadcast_batch(ctx)


def convert_batch_matmul_stacked_stacked(ctx):
    """Stacked x stacked: one batch matmul with the iteration axis as a batch axis."""
    _known_ranks(ctx)
    return _broadcast_batch(ctx)


def _fresh_label(equation: str) -> str:
    for c in string.ascii_letters:
        if c not in equation:
            return c
    raise ValueError("no unused einsum label left")


def convert_einsum(ctx):
    equation = ctx.attr("equation")
    equation = equation.decode() if isinstance(equation, bytes) else equation
    equation = equation.replace(" ", "")
    if "->" not in equation:
        return ctx.decline("implicit-output einsum equations are not handled")
    lhs, out = equation.split("->")
    operands = lhs.split(",")
    if len(operands) != len(ctx.inputs):
        return ctx.decline("equation and inputs disagree")
    label = _fresh_label(equation)
    # The new label goes first, so before any ellipsis: broadcasting of '...' among
    # operands is untouched and the iteration axis stays in front.
    operands = [label + s if v.is_stacked else s for s, v in zip(operands, ctx.inputs)]
    new = ",".join(operands) + "->" + label + out
    return ctx.emit_stacked(*[v.tensor for v in ctx.inputs],
                            attrs={"equation": new})


def register(registry):
    """Add this family's converters to the pack's registrar: one per input pattern."""
    registry.add("MatMul", convert_matmul_stacked_invariant, inputs="SU")
    registry.add("MatMul", convert_matmul_invariant_stacked, inputs="US")
    registry.add("MatMul", convert_matmul_stacked_stacked, inputs="SS")
    batch = ["BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"]
    registry.add(batch, convert_batch_matmul_stacked_invariant, inputs="SU")
    registry.add(batch, convert_batch_matmul_invariant_stacked, inputs="US")
    registry.add(batch, convert_batch_matmul_stacked_stacked, inputs="SS")
    registry.add("Einsum", convert_einsum, inputs="*...")
