"""Property tests for the linalg family (batch-polymorphic kernels, solves, diagonals)."""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing

IN_PROCESS = "<in-process>"  # how explain and pfor ops name in-process registrations

# Tests that sample among many op types or attrs get more examples (each is cheap).
MANY = 35


iters = st.sampled_from([0, 1, 2, 3, 3])
FLOATS = [tf.float32, tf.float64]


def well_conditioned(rng, shape, dtype=tf.float64):
    """A A^T + d I: symmetric positive definite, condition number small."""
    a = rng.standard_normal(shape)
    d = shape[-1]
    spd = a @ np.swapaxes(a, -1, -2) / max(d, 1) + np.eye(d)
    return tf.constant(spd, dtype)


def general(rng, shape, dtype):
    """A matrix with a dominant diagonal (invertible, well conditioned)."""
    a = rng.standard_normal(shape) * 0.3 + 2.0 * np.eye(shape[-1])
    return tf.constant(a, dtype)


def tol(dtype):
    return dict(rtol=2e-3, atol=2e-4) if dtype in (tf.float32, tf.complex64) else {}


# name -> (function of one matrix, input kind: "spd" / "general", dtypes)
SINGLE = {
    "MatrixInverse": (lambda a: tf.linalg.inv(a), "general"),
    "MatrixInverse(adjoint)": (lambda a: tf.raw_ops.MatrixInverse(input=a, adjoint=True),
                               "general"),
    "MatrixDeterminant": (tf.linalg.det, "general"),
    "LogMatrixDeterminant": (tf.linalg.slogdet, "general"),
    "Cholesky": (tf.linalg.cholesky, "spd"),
    "Qr": (lambda a: tf.linalg.qr(a), "general"),
    "Qr(full)": (lambda a: tf.linalg.qr(a, full_matrices=True), "general"),
    "Svd": (lambda a: tf.linalg.svd(a, compute_uv=False), "spd"),
    "Svd(uv)": (lambda a: tf.linalg.svd(a), "spd"),
    "Eig": (lambda a: tf.linalg.eigvals(a), "general"),
    "SelfAdjointEigV2": (tf.linalg.eigh, "spd"),
    "Lu": (tf.linalg.lu, "general"),
    "MatrixSquareRoot": (tf.linalg.sqrtm, "spd"),
    "MatrixLogarithm": (lambda a: tf.linalg.logm(tf.cast(a, tf.complex128)), "spd"),
}


@settings(max_examples=MANY)
@given(st.data())
def test_single_matrix_ops(data):
    name = data.draw(st.sampled_from(sorted(SINGLE)))
    fn, kind = SINGLE[name]
    dtype = data.draw(st.sampled_from(FLOATS))
    batch = data.draw(st.lists(st.integers(1, 2), max_size=1))
    d = data.draw(st.integers(1, 4))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    shape = [n] + batch + [d, d]
    a = well_conditioned(rng, shape, dtype) if kind == "spd" else general(rng, shape, dtype)
    testing.check(data, fn, [a], stacked=[True], n=n, **tol(dtype))


def _solve_args(data, rng, name, dtype, n, stacked):
    d = data.draw(st.integers(1, 4))
    k = data.draw(st.integers(1, 3))
    bm, br = [], []
    if data.draw(st.booleans()):
        b = data.draw(st.integers(1, 2))
        bm, br = [b], [b]
        if name == "MatrixTriangularSolve" and data.draw(st.booleans()):
            bm = data.draw(st.sampled_from([[], [1], [b]]))  # broadcasting batch axes
    matrix = general(rng, [n] * stacked[0] + bm + [d, d], dtype)
    rhs = tf.constant(rng.standard_normal([n] * stacked[1] + br + [d, k]), dtype)
    return matrix, rhs


@settings(max_examples=MANY)
@given(st.data())
def test_solves(data):
    name = data.draw(st.sampled_from(["MatrixSolve", "MatrixTriangularSolve",
                                      "MatrixSolveLs"]))
    dtype = data.draw(st.sampled_from(FLOATS))
    stacked = data.draw(st.tuples(st.booleans(), st.booleans()).filter(any))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    matrix, rhs = _solve_args(data, rng, name, dtype, n, stacked)
    adjoint = data.draw(st.booleans())
    if name == "MatrixSolve":
        fn = lambda a, b: tf.linalg.solve(a, b, adjoint=adjoint)  # noqa: E731
    elif name == "MatrixTriangularSolve":
        lower = data.draw(st.booleans())
        fn = lambda a, b: tf.raw_ops.MatrixTriangularSolve(  # noqa: E731
            matrix=a, rhs=b, lower=lower, adjoint=adjoint)
    else:
        l2 = data.draw(st.sampled_from([0.0, 0.5]))
        fast = data.draw(st.booleans())
        fn = lambda a, b: tf.raw_ops.MatrixSolveLs(  # noqa: E731
            matrix=a, rhs=b, l2_regularizer=tf.constant(l2, tf.float64), fast=fast)
    testing.check(data, fn, [matrix, rhs], stacked=stacked, n=n, **tol(dtype))


@settings(max_examples=MANY)
@given(st.data())
def test_cholesky_grad_and_tridiagonal(data):
    name = data.draw(st.sampled_from(["CholeskyGrad", "TridiagonalSolve",
                                      "TridiagonalMatMul"]))
    dtype = data.draw(st.sampled_from(FLOATS))
    d = data.draw(st.integers(1, 4))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    count = 4 if name == "TridiagonalMatMul" else 2
    stacked = data.draw(st.lists(st.booleans(), min_size=count, max_size=count).filter(any))
    lead = [[n] if s else [] for s in stacked]
    if name == "CholeskyGrad":
        chol = tf.linalg.cholesky(well_conditioned(rng, lead[0] + [d, d], dtype))
        args = [chol, tf.constant(rng.standard_normal(lead[1] + [d, d]), dtype)]
        fn = lambda l, g: tf.raw_ops.CholeskyGrad(l=l, grad=g)  # noqa: E731
    elif name == "TridiagonalSolve":
        diags = rng.standard_normal(lead[0] + [3, d]) * 0.3
        diags[..., 1, :] += 3.0
        args = [tf.constant(diags, dtype), tf.constant(rng.standard_normal(lead[1] + [d, 2]),
                                                        dtype)]
        fn = lambda a, b: tf.linalg.tridiagonal_solve(a, b)  # noqa: E731
    else:
        args = [tf.constant(rng.standard_normal(lead[j] + [1, d]), dtype) for j in range(3)]
        args.append(tf.constant(rng.standard_normal(lead[3] + [d, 2]), dtype))
        fn = lambda a, b, c, r: tf.raw_ops.TridiagonalMatMul(  # noqa: E731
            superdiag=a, maindiag=b, subdiag=c, rhs=r)
    testing.check(data, fn, args, stacked=stacked, n=n, **tol(dtype))


def _diag_case(data, rng, dtype, n, lead):
    """(fn, args, stacked, whether unknown dims are fine) for a matrix-diagonal op."""
    name = data.draw(st.sampled_from(["diag", "diag_part", "set_diag", "band_part",
                                      "MatrixDiag", "MatrixDiagPart", "MatrixSetDiag",
                                      "MatrixSetDiagV2"]))
    rows, cols = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    low = data.draw(st.integers(-min(rows, cols) + 1, 0))
    k = (low, data.draw(st.integers(low, min(rows, cols) - 1)))
    if k[0] == k[1] and data.draw(st.booleans()):
        k = k[0]
    align = data.draw(st.sampled_from(["RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT"]))
    s = data.draw(st.tuples(st.booleans(), st.booleans()).filter(any))
    shape = lambda stk, rest: [n] * stk + lead + rest  # noqa: E731
    matrix = tf.constant(rng.standard_normal(shape(True, [rows, cols])), dtype)
    if name == "diag":
        num = 1 if isinstance(k, int) else k[1] - k[0] + 1
        diag = tf.constant(rng.standard_normal(shape(True, [num] * (num > 1) + [3])), dtype)
        return (lambda x: tf.linalg.diag(x, k=k, padding_value=7, align=align),
                [diag], [True], num == 1)
    if name == "diag_part":
        return (lambda x: tf.linalg.diag_part(x, k=k, padding_value=-1, align=align),
                [matrix], [True], True)
    if name == "band_part":
        lower, upper = data.draw(st.integers(-1, rows)), data.draw(st.integers(-1, cols))
        return lambda x: tf.linalg.band_part(x, lower, upper), [matrix], [True], True
    if name == "MatrixDiag":
        return (lambda x: tf.raw_ops.MatrixDiag(diagonal=x),
                [tf.constant(rng.standard_normal(shape(True, [cols])), dtype)], [True], True)
    if name == "MatrixDiagPart":
        return lambda x: tf.raw_ops.MatrixDiagPart(input=x), [matrix], [True], True
    # set_diag: the matrix and the diagonals are stacked independently; the diagonal
    # length is that of the longest diagonal in the band.
    matrix = tf.constant(rng.standard_normal(shape(s[0], [rows, cols])), dtype)
    if name == "MatrixSetDiag":
        k = 0  # the V1 op sets the main diagonal only
    ks = (k, k) if isinstance(k, int) else k
    length = max(min(rows + min(j, 0), cols - max(j, 0)) for j in range(ks[0], ks[1] + 1))
    num = ks[1] - ks[0] + 1
    diag = tf.constant(rng.standard_normal(shape(s[1], [num] * (num > 1) + [length])), dtype)
    if name == "MatrixSetDiag":
        return (lambda x, v: tf.raw_ops.MatrixSetDiag(input=x, diagonal=v), [matrix, diag], s,
                True)
    if name == "MatrixSetDiagV2":
        return (lambda x, v: tf.raw_ops.MatrixSetDiagV2(input=x, diagonal=v, k=k),
                [matrix, diag], s, num == 1)
    return (lambda x, v: tf.linalg.set_diag(x, v, k=k, align=align), [matrix, diag], s,
            num == 1)


@settings(max_examples=MANY)
@given(st.data())
def test_matrix_diagonal_ops(data):
    dtype = data.draw(st.sampled_from(FLOATS + [tf.int32]))
    n = data.draw(iters)
    lead = data.draw(st.lists(st.integers(1, 2), max_size=1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    fn, args, stacked, unknown = _diag_case(data, rng, tf.float64, n, lead)
    args = [tf.cast(a, dtype) for a in args]
    # With unknown input dims TF's own shape functions reject a band of diagonals in
    # MatrixSetDiag and MatrixDiag (already in the loop body): static shapes there.
    testing.check(data, fn, args, stacked=stacked, n=n,
                  modes=testing.DRAWN_MODES if unknown else testing.DRAWN_MODES[:2])


@given(st.data())
def test_tensor_diag_and_diag_part(data):
    rank = data.draw(st.integers(1, 3))
    shape = data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    dtype = data.draw(st.sampled_from(FLOATS + [tf.int32]))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = tf.cast(rng.integers(-5, 6, size=[n] + shape), dtype)
    if data.draw(st.booleans()):
        testing.check(data, tf.linalg.tensor_diag, [x], stacked=[True], n=n)
    else:
        square = tf.cast(rng.integers(-5, 6, size=[n] + shape + shape), dtype)
        testing.check(data, tf.linalg.tensor_diag_part, [square], stacked=[True], n=n)


@settings(max_examples=30)
@given(st.data())
def test_cross_product(data):
    """Either operand may be invariant (it is then tiled: the kernel does not broadcast)."""
    lead = data.draw(st.lists(st.integers(0, 3), max_size=2))
    dtype = data.draw(st.sampled_from(FLOATS + [tf.int32]))
    stacked = data.draw(st.sampled_from(testing.invariance_combinations(2)))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    a, b = (tf.cast(rng.integers(-5, 6, size=[n] * s + lead + [3]), dtype) for s in stacked)
    testing.check(data, tf.linalg.cross, [a, b], stacked=list(stacked), n=n)


def test_register_batch_polymorphic_in_process():
    """A third party marks an op the core packs do not convert (BandedTriangularSolve)
    as batch-polymorphic; it converts with no fallback, and removing it restores the
    fallback."""
    rng = np.random.default_rng(3)
    bands = rng.standard_normal([3, 2, 4])
    bands[:, 0, :] += 3.0  # the main diagonal, well away from zero
    bands = tf.constant(bands)
    rhs = tf.constant(rng.standard_normal([3, 4, 2]))
    fn = lambda a, b: tf.linalg.banded_triangular_solve(a, b)  # noqa: E731
    loop_fn = testing.loop_fn_for(fn, [bands, rhs], [True, False])
    assert pf.explain(loop_fn, 3).fallbacks, "BandedTriangularSolve gained a converter"
    converter = pf.register_batch_polymorphic("BandedTriangularSolve")
    try:
        for stacked in testing.invariance_combinations(2):
            args = [bands if stacked[0] else bands[0], rhs if stacked[1] else rhs[0]]
            testing.check_op(fn, args, stacked=stacked, n=3)
        rows = [r for r in pf.explain(loop_fn, 3).rows if r.op_type == "BandedTriangularSolve"]
        assert [(r.how, r.pack) for r in rows] == [("converter", IN_PROCESS)]
    finally:
        pf.default_registry().remove("BandedTriangularSolve", converter)
    assert pf.explain(loop_fn, 3).fallbacks


def test_register_batch_polymorphic_overrides_by_priority():
    rng = np.random.default_rng(4)
    a = general(rng, [3, 3, 3], tf.float64)
    converter = pf.register_batch_polymorphic("MatrixInverse", priority=100)
    try:
        loop_fn = testing.loop_fn_for(tf.linalg.inv, [a], [True])
        testing.assert_matches_loop(loop_fn, 3)
        rows = [r for r in pf.explain(loop_fn, 3).rows if r.op_type == "MatrixInverse"]
        assert [r.pack for r in rows] == [IN_PROCESS]
    finally:
        pf.default_registry().remove("MatrixInverse", converter)
    rows = [r for r in pf.explain(loop_fn, 3).rows if r.op_type == "MatrixInverse"]
    assert [r.pack for r in rows] == ["pfor-converters-math"]
