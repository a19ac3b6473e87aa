"""Matrix products with ragged operands: MatMul, BatchMatMul(V2/V3), Einsum.

The padding of a ragged operand is zero, so a product over its padded tensor is right
wherever the result is inside each iteration's extent, also when the contraction runs
over a dimension that varies (attention: ``q @ k^T`` is ``[L_i, L_i]``, ``p @ v``
contracts over ``L_i``). So a ragged operand is taken as its padded tensor, as a
stacked one, by this pack's stacked converters (``matmul``: a ragged ``[L_i, d]`` times
an invariant ``[d, k]`` is ONE 2-D matmul on the padded rows, never the oneDNN trap),
and the result is masked. Dimensions that vary in both operands (a contraction, or an
einsum label shared by the output) must agree per iteration (checked at run time) and
are padded to one width; one that varies in one operand only and meets a fixed size
in the other would agree only by chance: declined (the fallback loop takes it). Batch
dimensions that vary, and einsum ellipses over ragged operands, are declined too.

A ragged ``[L_i, k]`` times an invariant ``[k, m]`` (every token times a weight, the
bulk of a transformer's work) multiplies only the rows inside some iteration's extent:
they are gathered into one ``[sum L_i, k]`` matrix and the products put back
into zero padding (by a gather that reads a zero row there), so padding costs no
arithmetic and needs no mask.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_converters_math import matmul
from pfor_converters_math.ragged_common import is_ragged, join, result
from pfor_core.extend import Decline, Stacked


def _as_stacked(value):
    return Stacked(tensor=value.padded) if is_ragged(value) else value


def _length(value, d):
    return value.lengths[d] if is_ragged(value) else None


def _with_padded(value, tensor):
    return value.with_padded(tensor) if tensor is not None else value


def _finish(out, lengths):
    if all(length is None for length in lengths):
        return out
    return result(out.tensor, lengths)


_STACKED = {
    "MatMul": {"SU": matmul.convert_matmul_stacked_invariant,
               "US": matmul.convert_matmul_invariant_stacked,
               "SS": matmul.convert_matmul_stacked_stacked},
    "batch": {"SU": matmul.convert_batch_matmul_stacked_invariant,
              "US": matmul.convert_batch_matmul_invariant_stacked,
              "SS": matmul.convert_batch_matmul_stacked_stacked},
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
    fx, fy = matmul.FLAGS[ctx.op_type]
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


def convert_einsum(ctx):
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
    result_ = _single(matmul.convert_einsum(ctx.with_inputs([_as_stacked(v) for v in values])))
    return _finish(result_, [labels.get(c) for c in out])


def register(registry):
    """Add this family's converters to the pack's registrar."""
    for pattern in ("R*", "*R", "RR"):
        registry.add(["MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"],
                     convert_matmul, inputs=pattern)
    for pattern in ("R", "R*", "*R", "RR"):
        registry.add("Einsum", convert_einsum, inputs=pattern)
