"""Grammar elements for math: elementwise ops, casts, reductions, sorting,
contractions (matmul, einsum, tensordot) and linear algebra.

Operand domains are kept where results are well conditioned (``tf.exp`` of a clipped
value, ``tf.linalg.inv`` of a diagonally dominant matrix), and the text says so, so the
reproducer is the code that ran.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from hypothesis import strategies as st

from fuzz_grammar import FLOATS, INTS, NUMERIC, Op


def dt(dtype) -> str:
    return f"tf.{tf.as_dtype(dtype).name}"


def unary(feature, template, dtypes=FLOATS, *, exact=False, needs_exact=False,
          converted=True, min_dim=0, min_rank=0):
    """``template`` has {0} for the operand; ``exact``: exact in, exact out."""
    def make(b):
        a = b.operand(dtypes, exact=needs_exact, min_dim=min_dim, min_rank=min_rank,
                      dynamic=True)
        if a is None:
            return None
        return b.emit(feature, template, [a], exact=exact, converted=converted)
    return Op(feature, make, converted)


def broadcastable(s1, s2) -> bool:
    try:
        np.broadcast_shapes(s1, s2)
    except ValueError:
        return False
    return True


def broadcast_partner(b, shape):
    """A shape that broadcasts with ``shape``: a suffix of it with some dims set to 1,
    or rarely with one more leading dim."""
    k = b.draw(st.integers(0, len(shape)))
    out = [1 if b.draw(st.booleans()) else d for d in shape[len(shape) - k:]]
    if k == len(shape) and len(shape) < 4 and b.draw(st.integers(0, 7)) == 7:
        out.insert(0, b.draw(st.integers(1, 3)))
    return tuple(out)


def binary(feature, template, dtypes=FLOATS, *, exact=False, needs_exact=False,
           converted=True):
    """``template`` has {0} and {1}; operands broadcast against each other."""
    def make(b):
        a = b.operand(dtypes, exact=needs_exact, min_dim=0, dynamic=True)
        if a is None:
            return None
        other = b.operand((a.dtype,), exact=needs_exact, min_dim=0, dynamic=True,
                          where=lambda v: broadcastable(v.shape, a.shape),
                          fresh_shape=lambda: broadcast_partner(b, a.shape))
        if other is None:
            return None
        args = [other, a] if b.draw(st.booleans()) else [a, other]
        return b.emit(feature, template, args, exact=exact, converted=converted)
    return Op(feature, make, converted)


def cast(b):
    a = b.operand(NUMERIC, min_dim=0, dynamic=True)
    if a is None:
        return None
    if a.dtype.is_floating and a.exact and b.draw(st.booleans()):
        return b.emit("cast", f"tf.cast(tf.clip_by_value({{0}}, -1000, 1000), {dt(tf.int32)})",
                      [a], exact=True)
    target = b.draw(st.sampled_from(FLOATS))
    return b.emit("cast", f"tf.cast({{0}}, {dt(target)})", [a], exact=True)


ELEMENTWISE = [
    binary("add", "{0} + {1}", NUMERIC, exact=True),
    unary("neg", "-{0}", NUMERIC, exact=True),
    binary("sub", "{0} - {1}", NUMERIC, exact=True),
    binary("mul", "{0} * {1}", NUMERIC, exact=True),
    binary("div", "{0} / (tf.abs({1}) + 1)", exact=True),
    binary("maximum", "tf.maximum({0}, {1})", NUMERIC, exact=True),
    binary("minimum", "tf.minimum({0}, {1})", NUMERIC, exact=True),
    binary("squared_difference", "tf.math.squared_difference({0}, {1})", NUMERIC),
    binary("atan2", "tf.math.atan2({0}, {1})"),
    binary("pow", "tf.pow(tf.abs({0}) + 0.5, tf.clip_by_value({1}, -2, 2))"),
    binary("floordiv", "tf.math.floordiv({0}, tf.abs({1}) + 1)", INTS, exact=True),
    binary("floormod", "tf.math.floormod({0}, tf.abs({1}) + 1)", INTS, exact=True),
    binary("truncatediv", "tf.truncatediv({0}, tf.abs({1}) + 1)", INTS, exact=True),
    binary("bitwise", "tf.bitwise.bitwise_xor({0}, {1})", INTS, exact=True),
    binary("where", "tf.where({0} > {1}, {0}, {1} * 2)", NUMERIC, exact=True, needs_exact=True),
    binary("logical", "tf.cast(tf.logical_and({0} > 0, {1} < 1), {0}.dtype)", NUMERIC,
           exact=True, needs_exact=True),
    binary("logical_xor", "tf.cast(tf.math.logical_xor({0} > 0, {1} > 0), {0}.dtype)",
           NUMERIC, exact=True, needs_exact=True),
    unary("abs", "tf.abs({0})", NUMERIC, exact=True),
    unary("square", "tf.square({0})", NUMERIC, exact=True),
    unary("sign", "tf.sign({0})", NUMERIC, exact=True, needs_exact=True),
    unary("exp", "tf.exp(tf.clip_by_value({0}, -8, 8))"),
    unary("log", "tf.math.log(tf.abs({0}) + 1)"),
    unary("sqrt", "tf.sqrt(tf.abs({0}))"),
    unary("rsqrt", "tf.math.rsqrt(tf.abs({0}) + 1)"),
    unary("tanh", "tf.tanh({0})"),
    unary("sigmoid", "tf.sigmoid({0})"),
    unary("sin", "tf.sin({0})"),
    unary("cos", "tf.cos({0})"),
    unary("erf", "tf.math.erf({0})"),
    unary("lgamma", "tf.math.lgamma(tf.abs({0}) + 0.5)"),
    unary("expm1", "tf.math.expm1(tf.clip_by_value({0}, -8, 8))"),
    unary("reciprocal", "tf.math.reciprocal(tf.abs({0}) + 1)"),
    unary("floor", "tf.floor({0})", exact=True, needs_exact=True),
    unary("round", "tf.round({0})", exact=True, needs_exact=True),
    unary("clip", "tf.clip_by_value({0}, -1, 1)", NUMERIC, exact=True),
    unary("is_nan", "tf.cast(tf.math.is_nan({0}), {0}.dtype)", exact=True),
    unary("floormod_const", "tf.math.floormod({0}, 3)", INTS, exact=True),
    unary("invert", "tf.bitwise.invert({0})", INTS, exact=True),
    unary("dawsn", "tf.math.special.dawsn({0})"),
    Op("cast", cast),
]


# -- reductions, scans, sorting -------------------------------------------------------
def _axis(b, rank):
    """None, one axis (maybe negative) or a list of distinct axes."""
    kind = b.draw(st.integers(0, 2)) if rank else 0
    if kind == 0:
        return None
    if kind == 1:
        return b.draw(st.integers(-rank, rank - 1))
    axes = b.draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    return sorted(axes)


def reduction(feature, fn, dtypes, exact_kinds=NUMERIC):
    def make(b):
        a = b.operand(dtypes, min_dim=0, dynamic=True)
        if a is None:
            return None
        keep = b.draw(st.booleans())
        text = f"tf.{fn}({{0}}, axis={_axis(b, a.rank)}, keepdims={keep})"
        return b.emit(feature, text, [a], exact=a.dtype in exact_kinds)
    return Op(feature, make)


def arg_reduction(feature, fn):
    def make(b):
        a = b.operand(NUMERIC, exact=True, min_rank=1)
        if a is None:
            return None
        axis = b.draw(st.integers(-a.rank, a.rank - 1))
        return b.emit(feature, f"tf.math.{fn}({{0}}, axis={axis}, output_type=tf.int32)",
                      [a], exact=True)
    return Op(feature, make)


def scan(feature, fn, dtypes, exact_kinds=INTS):
    def make(b):
        a = b.operand(dtypes, min_rank=1, min_dim=0, dynamic=True)
        if a is None:
            return None
        axis = b.draw(st.integers(-a.rank, a.rank - 1))
        extra = "" if fn == "cumulative_logsumexp" else f", exclusive={b.draw(st.booleans())}"
        text = f"tf.math.{fn}({{0}}, axis={axis}{extra}, reverse={b.draw(st.booleans())})"
        return b.emit(feature, text, [a], exact=a.dtype in exact_kinds)
    return Op(feature, make)


def top_k(b):
    a = b.operand(NUMERIC, min_rank=1)
    if a is None:
        return None
    k = b.draw(st.integers(0, a.shape[-1]))
    if a.exact and b.draw(st.booleans()):
        return b.emit("top_k", f"tf.math.top_k({{0}}, k={k}).indices", [a], exact=True)
    return b.emit("top_k", f"tf.math.top_k({{0}}, k={k}).values", [a], exact=True)


def sort(b):
    a = b.operand(NUMERIC, min_rank=1, min_dim=0)
    if a is None:
        return None
    axis = b.draw(st.integers(-a.rank, a.rank - 1))
    direction = b.draw(st.sampled_from(["ASCENDING", "DESCENDING"]))
    if a.exact and b.draw(st.booleans()):
        return b.emit("sort", f"tf.argsort({{0}}, axis={axis}, direction={direction!r}, "
                      "stable=True)", [a], exact=True)
    return b.emit("sort", f"tf.sort({{0}}, axis={axis}, direction={direction!r})", [a],
                  exact=True)


def searchsorted(b):
    a = b.operand(NUMERIC, exact=True, rank=1)
    if a is None:
        return None
    v = b.operand((a.dtype,), exact=True, max_rank=1, min_rank=1)
    if v is None:
        return None
    side = b.draw(st.sampled_from(["left", "right"]))
    return b.emit("searchsorted", f"tf.searchsorted(tf.sort({{0}}), {{1}}, side={side!r})",
                  [a, v], exact=True)


REDUCTIONS = [
    reduction("reduce_sum", "reduce_sum", NUMERIC, INTS),
    reduction("reduce_mean", "reduce_mean", NUMERIC, INTS),
    reduction("reduce_max", "reduce_max", NUMERIC),
    reduction("reduce_min", "reduce_min", NUMERIC),
    reduction("reduce_prod", "reduce_prod", NUMERIC, INTS),
    reduction("reduce_logsumexp", "reduce_logsumexp", FLOATS, ()),
    reduction("euclidean_norm", "math.reduce_euclidean_norm", FLOATS, ()),
    arg_reduction("argmax", "argmax"),
    arg_reduction("argmin", "argmin"),
    scan("cumsum", "cumsum", NUMERIC),
    scan("cumprod", "cumprod", NUMERIC),
    scan("cumulative_logsumexp", "cumulative_logsumexp", FLOATS, ()),
    Op("top_k", top_k),
    Op("sort", sort),
    Op("searchsorted", searchsorted),
]


# -- contractions ---------------------------------------------------------------------
def matmul(b):
    a = b.operand(FLOATS, min_rank=2, max_rank=3)
    if a is None:
        return None
    ta, tb = b.draw(st.booleans()), b.draw(st.booleans())
    k = a.shape[-2] if ta else a.shape[-1]
    p = b.draw(st.integers(1, 4))
    mat = (p, k) if tb else (k, p)
    batch = () if a.rank == 2 or b.draw(st.booleans()) else (b.draw(st.sampled_from(
        [1, a.shape[0]])),)
    shape = batch + mat  # never a rank-4 by rank-2 product (the oneDNN trap)
    w = b.operand((a.dtype,), where=lambda v: v.shape == shape, fresh_shape=lambda: shape)
    if w is None:
        return None
    return b.emit("matmul", f"tf.linalg.matmul({{0}}, {{1}}, transpose_a={ta}, "
                  f"transpose_b={tb})", [a, w])


def matvec(b):
    a = b.operand(FLOATS, min_rank=2, max_rank=3)
    if a is None:
        return None
    shape = (a.shape[-1],)
    v = b.operand((a.dtype,), where=lambda v: v.shape == shape, fresh_shape=lambda: shape)
    if v is None:
        return None
    return b.emit("matvec", "tf.linalg.matvec({0}, {1})", [a, v])


def tensordot(b):
    a = b.operand(FLOATS, min_rank=1, max_rank=2)
    if a is None:
        return None
    k = a.shape[-1]
    w = b.operand((a.dtype,), min_rank=1, max_rank=2, where=lambda v: v.shape[0] == k,
                  fresh_shape=lambda: (k,) + b.shape(max_rank=1))
    if w is None:
        return None
    return b.emit("tensordot", "tf.tensordot({0}, {1}, axes=1)", [a, w])


EINSUMS = {  # rank of the first operand -> (equation, shape of the second from the first)
    1: [("i,j->ij", lambda s, d: (d,)), ("i,i->", lambda s, d: s), ("i->", None)],
    2: [("ij,jk->ik", lambda s, d: (s[1], d)), ("ij,kj->ik", lambda s, d: (d, s[1])),
        ("ij,ij->i", lambda s, d: s), ("ij->ji", None), ("ij,j->i", lambda s, d: (s[1],))],
    3: [("bij,bjk->bik", lambda s, d: (s[0], s[2], d)), ("bij,jk->bik", lambda s, d: (s[2], d)),
        ("bij->bji", None), ("bij,bij->b", lambda s, d: s), ("bij->j", None)],
}


def einsum(b):
    a = b.operand(FLOATS, min_rank=1, max_rank=3)
    if a is None:
        return None
    equation, other = b.draw(st.sampled_from(EINSUMS[a.rank]))
    if other is None:
        return b.emit("einsum", f"tf.einsum({equation!r}, {{0}})", [a])
    shape = other(a.shape, b.draw(st.integers(1, 4)))
    w = b.operand((a.dtype,), where=lambda v: v.shape == shape, fresh_shape=lambda: shape)
    if w is None:
        return None
    return b.emit("einsum", f"tf.einsum({equation!r}, {{0}}, {{1}})", [a, w])


CONTRACTIONS = [Op("matmul", matmul), Op("matvec", matvec), Op("tensordot", tensordot),
                Op("einsum", einsum)]


# -- linear algebra -------------------------------------------------------------------
def _square(b):
    def fresh_shape():
        m = b.draw(st.integers(1, 4))
        return b.shape(max_rank=1) + (m, m)
    return b.operand(FLOATS, min_rank=2, max_rank=3, where=lambda v: v.shape[-1] == v.shape[-2],
                     fresh_shape=fresh_shape, finite=True)


def linalg_unary(feature, template):
    def make(b):
        a = _square(b)
        return None if a is None else b.emit(feature, template, [a])
    return Op(feature, make)


def linalg_solve(feature, template):
    def make(b):
        a = _square(b)
        if a is None:
            return None
        shape = a.shape[:-1] + (b.draw(st.integers(1, 3)),)
        rhs = b.operand((a.dtype,), where=lambda v: v.shape == shape, fresh_shape=lambda: shape,
                        finite=True)
        return None if rhs is None else b.emit(feature, template, [a, rhs])
    return Op(feature, make)


def matrix_op(feature, template, *, exact=True, dtypes=NUMERIC):
    def make(b):
        a = b.operand(dtypes, min_rank=2, max_rank=3, min_dim=0)
        return None if a is None else b.emit(feature, template(b, a), [a], exact=exact)
    return Op(feature, make)


def set_diag(b):
    a = b.operand(NUMERIC, min_rank=2, max_rank=3)
    if a is None:
        return None
    shape = a.shape[:-2] + (min(a.shape[-2:]),)
    d = b.operand((a.dtype,), where=lambda v: v.shape == shape, fresh_shape=lambda: shape)
    return None if d is None else b.emit("set_diag", "tf.linalg.set_diag({0}, {1})", [a, d],
                                         exact=True)


def cross(b):
    a = b.operand(FLOATS, min_rank=1, max_rank=2, where=lambda v: v.shape[-1] == 3,
                  fresh_shape=lambda: b.shape(max_rank=1) + (3,))
    if a is None:
        return None
    c = b.operand((a.dtype,), where=lambda v: v.shape == a.shape, fresh_shape=lambda: a.shape)
    return None if c is None else b.emit("cross", "tf.linalg.cross({0}, {1})", [a, c])


def svd(b):
    a = b.operand(FLOATS, min_rank=2, max_rank=3, finite=True)
    return None if a is None else b.emit("svd", "tf.linalg.svd({0}, compute_uv=False)", [a])


LINALG = [
    linalg_unary("inv", "tf.linalg.inv(wellcond({0}))"),
    linalg_unary("det", "tf.linalg.det(wellcond({0}))"),
    linalg_unary("logdet", "tf.linalg.logdet(spd({0}))"),
    linalg_unary("cholesky", "tf.linalg.cholesky(spd({0}))"),
    linalg_unary("qr", "tf.linalg.qr(wellcond({0}))[1]"),
    linalg_unary("eigvalsh", "tf.linalg.eigvalsh(spd({0}))"),
    linalg_solve("solve", "tf.linalg.solve(wellcond({0}), {1})"),
    linalg_solve("triangular_solve", "tf.linalg.triangular_solve("
                 "tf.linalg.band_part(wellcond({0}), -1, 0), {1}, lower=True)"),
    linalg_solve("lstsq", "tf.linalg.lstsq(wellcond({0}), {1})"),
    Op("svd", svd),
    matrix_op("band_part", lambda b, a: f"tf.linalg.band_part({{0}}, "
              f"{b.draw(st.integers(-1, min(2, a.shape[-2])))}, "
              f"{b.draw(st.integers(-1, min(2, a.shape[-1])))})"),
    matrix_op("diag_part", lambda b, a: "tf.linalg.diag_part({0})"),
    matrix_op("matrix_transpose", lambda b, a: "tf.linalg.matrix_transpose({0})"),
    matrix_op("trace", lambda b, a: "tf.linalg.trace({0})", exact=False),
    Op("set_diag", set_diag),
    unary("diag", "tf.linalg.diag({0})", NUMERIC, exact=True, min_rank=1),
    Op("cross", cross),
]

MATH = ELEMENTWISE + REDUCTIONS + CONTRACTIONS + LINALG
