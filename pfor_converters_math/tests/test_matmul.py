"""Property tests for the matmul family: MatMul, BatchMatMulV2/V3, Einsum.

Ragged values (x[:n_i]) against the sequential loop: R x U as one matmul, R x R
contracting over the varying dimension (attention), einsum, gradients.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing

# Tests that sample among many op types or attrs get more examples (each is cheap).
MANY = 35


DTYPES = [tf.float32, tf.float64, tf.complex64, tf.int32]


def values(rng, shape, dtype):
    dtype = tf.as_dtype(dtype)
    if dtype.is_integer:
        return tf.constant(rng.integers(-3, 4, size=shape), dtype)
    real = rng.standard_normal(shape)
    if dtype.is_complex:
        real = real + 1j * rng.standard_normal(shape)
    return tf.constant(real, dtype)


def assert_converted(loop_fn, n, op_types, **kwargs):
    """Our op types convert (no fallback); other packs' ops may still fall back here,
    so results are compared with fallback allowed only when something else needs it."""
    report = pf.explain(loop_fn, n)
    ours = [r for r in report.rows if r.op_type in op_types]
    assert ours, f"none of {op_types} in the body"
    assert all(r.how in ("converter", "invariant") for r in ours), str(report)
    fallback = "loop" if report.fallbacks else "error"
    return testing.assert_matches_loop(loop_fn, n, fallback=fallback, **kwargs)


dims = st.sampled_from([0, 1, 2, 3, 4, 2, 3])
stacked_pair = st.tuples(st.booleans(), st.booleans()).filter(any)
iters = st.sampled_from([0, 1, 2, 3, 4, 3])


@settings(max_examples=MANY)
@given(st.data())
def test_matmul(data):
    m, k, p = data.draw(dims), data.draw(dims), data.draw(dims)
    ta, tb = data.draw(st.booleans()), data.draw(st.booleans())
    dtype = data.draw(st.sampled_from(DTYPES))
    stacked = data.draw(stacked_pair)
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    a = values(rng, [n] * stacked[0] + ([k, m] if ta else [m, k]), dtype)
    b = values(rng, [n] * stacked[1] + ([p, k] if tb else [k, p]), dtype)
    testing.check(data, lambda x, y: tf.linalg.matmul(x, y, transpose_a=ta, transpose_b=tb),
                  [a, b], stacked=stacked, n=n)


def batch_shapes(data, max_rank=2):
    """Two broadcast-compatible batch shapes (each a suffix of a common one, some
    dimensions replaced by 1)."""
    common = data.draw(st.lists(st.integers(1, 3), max_size=max_rank))
    out = []
    for _ in range(2):
        rank = data.draw(st.integers(0, len(common)))
        shape = common[len(common) - rank:]
        out.append([1 if data.draw(st.booleans()) else d for d in shape])
    return out


@settings(max_examples=MANY)
@given(st.data())
def test_batch_matmul(data):
    op = data.draw(st.sampled_from(["BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"]))
    bx, by = batch_shapes(data)
    if op == "BatchMatMul":  # equal batch shapes, no broadcasting
        by = bx
    m, k, p = data.draw(dims), data.draw(dims), data.draw(dims)
    adj_x, adj_y = data.draw(st.booleans()), data.draw(st.booleans())
    dtype = data.draw(st.sampled_from(DTYPES))
    stacked = data.draw(stacked_pair)
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = values(rng, [n] * stacked[0] + bx + ([k, m] if adj_x else [m, k]), dtype)
    y = values(rng, [n] * stacked[1] + by + ([p, k] if adj_y else [k, p]), dtype)

    def body(a, b):
        if op == "BatchMatMulV3":
            return tf.raw_ops.BatchMatMulV3(x=a, y=b, Tout=dtype, adj_x=adj_x, adj_y=adj_y)
        return getattr(tf.raw_ops, op)(x=a, y=b, adj_x=adj_x, adj_y=adj_y)

    testing.check(data, body, [x, y], stacked=stacked, n=n)


# (equation, whether it has an ellipsis)
EQUATIONS = ["ij,jk->ik", "bij,bjk->bik", "...ij,...jk->...ik", "...ij,jk->...ik",
             "i,i->", "ij->ji", "ij,kj->ik", "bi,bj->bij", "...i,i->...", "ij,jk,kl->il",
             "ii->i", "ij->", "b...i,b...i->b...", "ab,b->a"]


@settings(max_examples=MANY)
@given(st.data())
def test_einsum(data):
    equation = data.draw(st.sampled_from(EQUATIONS))
    operands = equation.split("->")[0].split(",")
    labels = sorted({c for c in equation if c.isalpha()})
    sizes = {c: data.draw(st.integers(1, 3)) for c in labels}
    ellipsis = data.draw(st.lists(st.integers(1, 3), max_size=2))
    dtype = data.draw(st.sampled_from([tf.float32, tf.float64]))
    stacked = data.draw(st.lists(st.booleans(), min_size=len(operands),
                                 max_size=len(operands)).filter(any))
    n = data.draw(iters)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    args = []
    for subscripts, s in zip(operands, stacked):
        shape = []
        for part in subscripts.split("..."):
            shape += [sizes[c] for c in part] + ellipsis
        shape = shape[:len(shape) - len(ellipsis)]
        args.append(values(rng, [n] * s + shape, dtype))
    testing.check(data, lambda *xs: tf.einsum(equation, *xs), args, stacked=stacked, n=n)


def test_einsum_label_goes_before_ellipsis():
    rng = np.random.default_rng(1)
    x = values(rng, [3, 2, 4, 5], tf.float32)
    w = values(rng, [2, 5, 6], tf.float32)
    testing.check_op(lambda a, b: tf.einsum("...ij,...jk->...ik", a, b), [x, w],
                     stacked=[True, False], n=3, rtol=1e-5)


@pytest.mark.parametrize("w_shape", [[16, 16], [1, 16, 16]])
def test_onednn_rank4_against_rank2(w_shape):
    """a_i [1, 8, 16] stacked over 4 iterations is [4, 1, 8, 16]: a batch matmul of that
    against a rank-2 w is wrong in TF 2.21's oneDNN kernel, so it must be folded (also
    when w's batch dims are all 1, or unknown until run time)."""
    rng = np.random.default_rng(0)
    a = values(rng, [4, 1, 8, 16], tf.float32)
    w = values(rng, w_shape, tf.float32)
    loop_fn = testing.loop_fn_for(tf.linalg.matmul, [a, w], [True, False])
    testing.assert_matches_loop(loop_fn, 4, rtol=1e-5, atol=1e-5, graph=True)
    report = pf.explain(loop_fn, 4)
    assert [r.how for r in report.rows if r.op_type == "BatchMatMulV2"] == ["converter"]
    unknown = tf.function(
        lambda x, y: pf.pfor(testing.loop_fn_for(tf.linalg.matmul, [x, y], [True, False]),
                             4, fallback="error"),
        input_signature=[tf.TensorSpec([None] * 4), tf.TensorSpec([None] * len(w_shape))],
        autograph=False)
    testing.assert_allclose(unknown(a, w), testing.sequential(loop_fn, 4), rtol=1e-5,
                            atol=1e-5)


def test_keras_dense_on_one_example_batch():
    rng = np.random.default_rng(0)
    x = values(rng, [4, 8, 16], tf.float32)
    dense = keras.layers.Dense(16)
    dense(x[0][None])  # build the variables outside the loop

    def loop_fn(i):
        return dense(tf.gather(x, i)[None])

    assert_converted(loop_fn, 4, {"MatMul", "BatchMatMulV2", "ReadVariableOp"},
                     rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [tf.float32, tf.complex64])
@pytest.mark.parametrize("op", ["matvec", "matvec_adjoint", "batch_column"])
def test_matrix_times_stacked_column_vectors(op, dtype):
    """The column-vector fast path (one product on the vectors' rows, no transpose)."""
    rng = np.random.default_rng(3)
    a, v = values(rng, [5, 4], dtype), values(rng, [3, 4], dtype)
    if op == "matvec":
        fn, args = (lambda m, x: tf.linalg.matvec(m, x)), [a, v]
    elif op == "matvec_adjoint":
        fn, args = (lambda m, x: tf.linalg.matvec(m, x, adjoint_a=True)), [
            values(rng, [4, 5], dtype), values(rng, [3, 4], dtype)]
    else:
        fn, args = (lambda m, x: tf.matmul(m, x, adjoint_a=True)), [
            values(rng, [2, 4, 5], dtype), values(rng, [3, 2, 4, 1], dtype)]
    testing.check_op(fn, args, stacked=[False, True], n=3)


WIDTH, D = 5, 3


def _values(data, shape):
    size = int(np.prod(shape))
    return tf.constant(np.asarray(data.draw(st.lists(
        st.floats(-2, 2, width=32), min_size=size, max_size=size), label="values"),
        np.float32).reshape(shape))


def _draw(data):
    return testing.draw_rows(data, width=WIDTH, inner=(D,))


# Bodies of r = x[:n_i] ([L_i, D]), s = a stacked [D, 2], u = an invariant [D, 2].
MATMUL = {
    "r_u": lambda r, s, u: r @ u,
    "r_u_t": lambda r, s, u: tf.matmul(r, tf.transpose(u), transpose_b=True),
    "r_u_chain": lambda r, s, u: tf.nn.relu(tf.reshape(tf.transpose(
        tf.reshape(r @ u, [-1, 2, 1]), [0, 2, 1]), [-1, 2]) @ tf.transpose(u)) @ u,
    "u_r": lambda r, s, u: tf.matmul(u, r, transpose_a=True, transpose_b=True),
    "r_s": lambda r, s, u: tf.matmul(r, s),
    "s_r": lambda r, s, u: tf.matmul(s, r, transpose_a=True, transpose_b=True),
    "r_r": lambda r, s, u: tf.matmul(r, r, transpose_b=True),
    "r_r_contract": lambda r, s, u: tf.matmul(r, r, transpose_a=True),
    "attention": lambda r, s, u: tf.matmul(tf.nn.softmax(tf.matmul(r, r, transpose_b=True)), r),
    "batch_r_u": lambda r, s, u: tf.matmul(tf.stack([r, 2 * r]), u),
    "batch_u_r": lambda r, s, u: tf.matmul(tf.stack([u, u]), tf.stack([r, r]),
                                           adjoint_a=True, adjoint_b=True),
    "batch_r_s": lambda r, s, u: tf.matmul(tf.stack([r, r]), tf.stack([s, s])),
    "batch_s_r": lambda r, s, u: tf.matmul(tf.stack([s, s]), tf.stack([r, r]),
                                           adjoint_a=True, adjoint_b=True),
    "batch_r_r": lambda r, s, u: tf.matmul(tf.stack([r, r]), tf.stack([r, -r]), adjoint_b=True),
    "einsum_r_u": lambda r, s, u: tf.einsum("ld,de->le", r, u),
    "einsum_u_r": lambda r, s, u: tf.einsum("de,ld->el", u, r),
    "einsum_s_r": lambda r, s, u: tf.einsum("de,ld->le", s, r),
    "einsum_r_s": lambda r, s, u: tf.einsum("ld,de->el", r, s),
    "einsum_r_r": lambda r, s, u: tf.einsum("ld,kd->lk", r, r),
    "einsum_contract": lambda r, s, u: tf.einsum("ld,le->de", r, r),
    "einsum_one": lambda r, s, u: tf.einsum("ld->dl", r),
}


FIXED = {"r_r_contract", "einsum_contract"}  # no varying dimension left


@pytest.mark.parametrize("name", sorted(MATMUL))
@settings(max_examples=3)
@given(data=st.data())
def test_ragged_matmul(name, data):
    n, lengths, x = _draw(data)
    s, u = _values(data, [n, D, 2]), _values(data, [D, 2])
    testing.assert_matches_loop(
             lambda i: MATMUL[name](testing.rows(x, lengths, i), tf.gather(s, i), u), n,
             ragged=name not in FIXED, modes=testing.draw_modes(data))


def test_ragged_rows_times_invariant_under_xla():
    # Packing the rows needs their run-time count; under XLA the padded product runs.
    x, u = tf.reshape(tf.range(2 * WIDTH * D, dtype=tf.float32), [2, WIDTH, D]), tf.ones([D, 2])
    lengths = tf.constant([3, 0])
    body = lambda i: tf.reduce_sum(testing.rows(x, lengths, i) @ u, 0)  # noqa: E731
    got = tf.function(lambda: pf.pfor(body, 2, fallback="error"), jit_compile=True)()
    testing.assert_rows_match(got, [body(0), body(1)])


def test_matmul_of_a_varying_dimension_against_a_fixed_one_falls_back():
    x, y = tf.ones([2, WIDTH, D]), tf.ones([2, D, WIDTH])
    n = tf.constant([WIDTH, WIDTH])
    report = pf.explain(lambda i: tf.matmul(tf.gather(y, i), testing.rows(x, n, i)), 2)
    assert [r.op_type for r in report.fallbacks] == ["MatMul"]


def test_contraction_over_other_sizes_fails_like_the_loop():
    x = tf.ones([3, WIDTH, D])
    a, b = tf.constant([2, 3, 0]), tf.constant([2, 4, 0])
    testing.assert_fails_like_loop(
        lambda i: tf.matmul(testing.rows(x, a, i), testing.rows(x, b, i), transpose_a=True), 3,
        match="differ")


@settings(max_examples=10)
@given(data=st.data())
def test_matmul_gradients(data):
    n, lengths, x = _draw(data)
    u = _values(data, [D, 2])
    name = data.draw(st.sampled_from(["r_u", "r_u_chain", "attention", "einsum_r_r",
                                      "r_r_contract"]))
    testing.assert_gradients_match(
             lambda i: tf.reduce_sum(MATMUL[name](testing.rows(x, lengths, i), None, u) ** 2),
             [x, u], n, chunked=data.draw(st.booleans(), label="chunked"))
