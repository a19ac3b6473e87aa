"""Matrix products in every layout: MatMul, BatchMatMul(V2/V3) and Einsum.

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

Ragged operands: the padding of a ragged operand is zero, so a product over its padded
tensor is right wherever the result is inside each iteration's extent, also when the
contraction runs over a dimension that varies (attention: ``q @ k^T`` is ``[L_i, L_i]``,
``p @ v`` contracts over ``L_i``). So a ragged operand is taken as its padded tensor, as a
stacked one, by the stacked converters above (a ragged ``[L_i, d]`` times an invariant
``[d, k]`` is ONE 2-D matmul on the padded rows, never the oneDNN trap), and the result
is masked. Dimensions that vary in both operands (a contraction, or an einsum label
shared by the output) must agree per iteration (checked at run time) and are padded to
one width; one that varies in one operand only and meets a fixed size in the other
would agree only by chance: declined (the fallback loop takes it). Batch dimensions that
vary, and einsum ellipses over ragged operands, are declined too.

A ragged ``[L_i, k]`` times an invariant ``[k, m]`` (every token times a weight, the
bulk of a transformer's work) multiplies only the rows inside some iteration's extent:
they are gathered into one ``[sum L_i, k]`` matrix and the products put back
into zero padding (by a gather that reads a zero row there), so padding costs no
arithmetic and needs no mask.
"""

from __future__ import annotations

import string

import tensorflow as tf

from pfor_core.extend import Decline, Stacked, padded_operands, shapes

from pfor_converters_math.ragged_common import is_ragged, join

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


def _as_stacked(value):
    return Stacked(tensor=value.padded) if is_ragged(value) else value


def _length(value, d):
    return value.lengths[d] if is_ragged(value) else None


def _with_padded(value, tensor):
    return value.with_padded(tensor) if tensor is not None else value


def _finish(out, lengths):
    if all(length is None for length in lengths):
        return out
    return padded_operands.result(out.tensor, lengths)


_STACKED = {
    "MatMul": {"SU": convert_matmul_stacked_invariant,
               "US": convert_matmul_invariant_stacked,
               "SS": convert_matmul_stacked_stacked},
    "batch": {"SU": convert_batch_matmul_stacked_invariant,
              "US": convert_batch_matmul_invariant_stacked,
              "SS": convert_batch_matmul_stacked_stacked},
}


def _single(out):
    if isinstance(out, Decline):
        raise out
    return out[0] if isinstance(out, (list, tuple)) else out


def convert_matmul(ctx):
    """MatMul / BatchMatMul with a ragged operand: the stacked product of the padded
    tensors, masked."""
    x, y = ctx.inputs
    rx = x.rank if is_ragged(x) else x.shape.rank
    ry = y.rank if is_ragged(y) else y.shape.rank
    if rx is None or ry is None or rx < 2 or ry < 2:
        return ctx.decline("operands of rank >= 2 expected")
    for v, r in ((x, rx), (y, ry)):
        if any(_length(v, d) is not None for d in range(r - 2)):
            return ctx.decline("a batch dimension varies per iteration")
    fx, fy = FLAGS[ctx.op_type]
    tx, ty = ctx.attr(fx), ctx.attr(fy)
    if _packs_rows(ctx, x, y, tx, rx, ry):
        return _packed_rows_product(x, y, ty)
    x_rows, x_inner = (rx - 1, rx - 2) if tx else (rx - 2, rx - 1)
    y_inner, y_cols = (ry - 1, ry - 2) if ty else (ry - 2, ry - 1)
    _, tensors = join(ctx, [x, y], [1 + x_inner, 1 + y_inner], "the contracted dimension")
    if tensors:
        x, y = _with_padded(x, tensors.get(0)), _with_padded(y, tensors.get(1))
    pattern = "".join("S" if v.is_stacked else "U" for v in (x, y))
    table = _STACKED["MatMul" if ctx.op_type == "MatMul" else "batch"]
    out = _single(table[pattern](ctx.with_inputs([_as_stacked(x), _as_stacked(y)])))
    rank = out.tensor.shape.rank - 1
    lengths = [None] * rank
    lengths[rank - 2] = _length(x, x_rows)
    lengths[rank - 1] = _length(y, y_cols)
    return _finish(out, lengths)


def _packs_rows(ctx, x, y, tx, rx, ry) -> bool:
    """Whether the product is ragged rows times an invariant matrix, which runs on the
    packed rows (not under XLA: their number is known only at run time)."""
    return (is_ragged(x) and not y.is_stacked and rx == 2 and ry == 2 and not tx
            and x.lengths[1] is None and not ctx.compiled)


def _packed_rows_product(x, y, ty):
    """``x @ y`` for ragged rows ``x`` (padded ``[n, T, k]``) and an invariant ``y``:
    one 2-D matmul of the rows inside the extents. The products go back by a gather
    that reads an appended zero row for the padding (a select-like read: no gradient
    reaches the padding); gathers, unlike a scatter, run on every core."""
    padded = x.padded
    dims = tf.shape(padded, out_type=tf.int32)
    inside = tf.reshape(tf.sequence_mask(x.lengths[0], dims[1]), [-1])  # [n * T]
    rows = tf.reshape(padded, tf.stack([dims[0] * dims[1], dims[2]]))
    product = tf.matmul(tf.gather(rows, tf.where(inside)[:, 0]), y.tensor, transpose_b=ty)
    slot = tf.cumsum(tf.cast(inside, tf.int32), exclusive=True)
    source = tf.where(inside, slot, tf.shape(product, out_type=tf.int32)[0])
    zero = tf.zeros(tf.stack([1, tf.shape(product)[1]]), product.dtype)
    out = tf.reshape(tf.gather(tf.concat([product, zero], 0), source),
                     tf.stack([dims[0], dims[1], tf.shape(product, out_type=tf.int32)[1]]))
    out.set_shape(padded.shape[:2].concatenate(product.shape[1:]))
    return x.with_padded(out)


def convert_ragged_einsum(ctx):
    """Einsum with ragged operands: labels that vary are joined across operands."""
    equation = ctx.attr("equation")
    equation = (equation.decode() if isinstance(equation, bytes) else equation).replace(" ", "")
    if "->" not in equation or "." in equation:
        return ctx.decline("an explicit output without ellipsis expected")
    lhs, out = equation.split("->")
    subscripts = lhs.split(",")
    if len(subscripts) != len(ctx.inputs):
        return ctx.decline("equation and inputs disagree")
    values = list(ctx.inputs)
    labels = {}
    for v, s in zip(values, subscripts):
        if is_ragged(v):
            if v.rank != len(s):
                return ctx.decline("subscripts and rank disagree")
            for d in v.ragged_axes:
                if s.count(s[d]) > 1:
                    return ctx.decline("a repeated label varies per iteration")
                labels[s[d]] = None
    for label in labels:
        axes = [1 + s.index(label) if label in s else None for s in subscripts]
        labels[label], tensors = join(ctx, values, axes, f"einsum label {label!r}")
        values = [_with_padded(v, tensors.get(k)) for k, v in enumerate(values)]
    result_ = _single(convert_einsum(ctx.with_inputs([_as_stacked(v) for v in values])))
    return _finish(result_, [labels.get(c) for c in out])


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
    for pattern in ("R*", "*R", "RR"):
        registry.add(["MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"],
                     convert_matmul, inputs=pattern)
    for pattern in ("R", "R*", "*R", "RR"):
        registry.add("Einsum", convert_ragged_einsum, inputs=pattern)
