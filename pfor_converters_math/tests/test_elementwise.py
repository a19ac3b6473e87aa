"""Property tests for the elementwise converters: pfor against the sequential loop.

Each example draws per-iteration shapes (broadcast-compatible, of different ranks for
n-ary ops), a dtype, values inside each op's domain, which inputs are stacked, the loop
length (0 included) and several op types of one family, all checked in one pfor call.
Every check runs with fallback="error", so passing means no op fell back.

Ragged values (x[:n_i]) against the sequential loop: unary ops, broadcasting against
invariant, stacked and other ragged operands, run-time checks of the sizes, gradients free
of the padding's NaN.
"""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing
from pfor_converters_math import elementwise

F32, F64, I32, BOOL, C64 = tf.float32, tf.float64, tf.int32, tf.bool, tf.complex64
FLOATS, NUMERIC = (F32, F64), (F32, F64, I32)

# Value domains by kind: (float low, float high), (int low, int high).
DOMAINS = {
    "any": ((-3.0, 3.0), (-5, 5)),
    "pos": ((0.2, 3.0), (1, 5)),
    "unit": ((-0.9, 0.9), (-1, 1)),
    "nonzero": ((0.5, 3.0), (1, 5)),  # with a random sign
    "small": ((0.0, 3.0), (0, 3)),
    "gt1": ((1.1, 4.0), (2, 5)),
    "prob": ((0.05, 0.95), (0, 1)),
    "order": ((0.0, 2.0), (0, 2)),  # integer-valued
    "maybe0": ((-2.0, 2.0), (-2, 2)),  # integer-valued, zeros likely
    "shift": ((0.0, 8.0), (0, 8)),
    "special": ((-3.0, 3.0), (-5, 5)),  # with nan / inf sprinkled in
}


def make_values(rng, kind, shape, dtype):
    dtype = tf.as_dtype(dtype)
    shape = tuple(shape)
    if dtype == tf.bool:
        return rng.random(shape) < 0.5
    if dtype.is_complex:
        v = rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)
        return v.astype(dtype.as_numpy_dtype)
    (flo, fhi), (ilo, ihi) = DOMAINS[kind]
    if dtype.is_integer:
        v = rng.integers(ilo, ihi + 1, shape)
    else:
        v = rng.uniform(flo, fhi, shape)
        if kind in ("order", "maybe0"):
            v = np.round(v)
        if kind == "special":
            v = np.where(rng.random(shape) < 0.3, rng.choice([np.nan, np.inf, -np.inf], shape), v)
    if kind == "nonzero":
        v = v * rng.choice([-1, 1], shape)
    return v.astype(dtype.as_numpy_dtype)


def _cast(x):
    return tf.cast(x, tf.float64 if x.dtype.is_integer else tf.int32)


# Unary: op type -> (fn, dtypes, domain).
UNARY = {
    "Abs": (tf.abs, NUMERIC, "any"), "Neg": (tf.negative, NUMERIC, "any"),
    "Sign": (tf.sign, NUMERIC, "any"), "Exp": (tf.exp, FLOATS, "any"),
    "Expm1": (tf.math.expm1, FLOATS, "any"), "Log": (tf.math.log, FLOATS, "pos"),
    "Log1p": (tf.math.log1p, FLOATS, "unit"), "Sqrt": (tf.sqrt, FLOATS, "pos"),
    "Rsqrt": (tf.math.rsqrt, FLOATS, "pos"), "Square": (tf.square, NUMERIC, "any"),
    "Reciprocal": (tf.math.reciprocal, FLOATS, "nonzero"),
    "Inv": (lambda x: tf.raw_ops.Inv(x=x), FLOATS, "nonzero"),
    "Sin": (tf.sin, FLOATS, "any"), "Cos": (tf.cos, FLOATS, "any"),
    "Tan": (tf.tan, FLOATS, "unit"), "Asin": (tf.asin, FLOATS, "unit"),
    "Acos": (tf.acos, FLOATS, "unit"), "Atan": (tf.atan, FLOATS, "any"),
    "Sinh": (tf.sinh, FLOATS, "any"), "Cosh": (tf.cosh, FLOATS, "any"),
    "Tanh": (tf.tanh, FLOATS, "any"), "Asinh": (tf.asinh, FLOATS, "any"),
    "Acosh": (tf.acosh, FLOATS, "gt1"), "Atanh": (tf.atanh, FLOATS, "unit"),
    "Floor": (tf.floor, FLOATS, "any"), "Ceil": (tf.math.ceil, FLOATS, "any"),
    "Round": (tf.round, FLOATS, "any"), "Rint": (tf.math.rint, FLOATS, "any"),
    "Erf": (tf.math.erf, FLOATS, "any"), "Erfc": (tf.math.erfc, FLOATS, "any"),
    "Erfinv": (tf.math.erfinv, FLOATS, "unit"), "Ndtri": (tf.math.ndtri, FLOATS, "prob"),
    "Lgamma": (tf.math.lgamma, FLOATS, "pos"), "Digamma": (tf.math.digamma, FLOATS, "pos"),
    "Sigmoid": (tf.sigmoid, FLOATS, "any"), "IsNan": (tf.math.is_nan, FLOATS, "special"),
    "IsInf": (tf.math.is_inf, FLOATS, "special"),
    "IsFinite": (tf.math.is_finite, FLOATS, "special"),
    "LogicalNot": (tf.logical_not, (BOOL,), "any"), "Cast": (_cast, NUMERIC, "any"),
    "Real": (tf.math.real, (C64,), "any"), "Imag": (tf.math.imag, (C64,), "any"),
    "Conj": (tf.math.conj, (C64,), "any"), "ComplexAbs": (tf.abs, (C64,), "any"),
    "Angle": (tf.math.angle, (C64,), "any"), "Invert": (tf.bitwise.invert, (I32,), "any"),
    "PopulationCount": (lambda x: tf.raw_ops.PopulationCount(x=x), (I32,), "any"),
    "OnesLike": (lambda x: tf.raw_ops.OnesLike(x=x), NUMERIC, "any"),
    "ZerosLike": (lambda x: tf.raw_ops.ZerosLike(x=x), NUMERIC, "any"),
    "BesselI0e": (tf.math.special.bessel_i0e, FLOATS, "any"),
    "BesselI1e": (tf.math.special.bessel_i1e, FLOATS, "any"),
    "Bucketize": (lambda x: tf.raw_ops.Bucketize(input=x, boundaries=[-2.0, -0.5, 0.0, 1.5]),
                  NUMERIC, "any"),
}


def _raw(name, a="x", b="y"):
    op = getattr(tf.raw_ops, name)
    return lambda x, y: op(**{a: x, b: y})


# Binary, by family: family -> (dtypes, {op type: (fn, (domain of x, domain of y))}).
BINARY = {
    "arith": (NUMERIC, {
        "AddV2": (tf.add, ("any", "any")), "Add": (_raw("Add"), ("any", "any")),
        "Sub": (tf.subtract, ("any", "any")), "Mul": (tf.multiply, ("any", "any")),
        "Maximum": (tf.maximum, ("any", "any")), "Minimum": (tf.minimum, ("any", "any")),
        "SquaredDifference": (tf.math.squared_difference, ("any", "any")),
        "Pow": (tf.pow, ("pos", "small")),
        "Equal": (tf.equal, ("maybe0", "maybe0")),
        "NotEqual": (tf.not_equal, ("maybe0", "maybe0")),
        "Less": (tf.less, ("maybe0", "maybe0")),
        "LessEqual": (tf.less_equal, ("maybe0", "maybe0")),
        "Greater": (tf.greater, ("maybe0", "maybe0")),
        "GreaterEqual": (tf.greater_equal, ("maybe0", "maybe0")),
        "Div": (_raw("Div"), ("any", "nonzero")),
        "FloorDiv": (tf.math.floordiv, ("any", "nonzero")),
        "FloorMod": (tf.math.floormod, ("any", "nonzero")),
        "TruncateDiv": (tf.truncatediv, ("any", "nonzero")),
        "TruncateMod": (tf.truncatemod, ("any", "nonzero")),
        "Mod": (_raw("Mod"), ("any", "nonzero")),
    }),
    "float": (FLOATS, {
        "MulNoNan": (tf.math.multiply_no_nan, ("any", "maybe0")),
        "DivNoNan": (tf.math.divide_no_nan, ("any", "maybe0")),
        "RealDiv": (tf.divide, ("any", "nonzero")),
        "Atan2": (tf.atan2, ("any", "any")),
        "Xdivy": (tf.math.xdivy, ("maybe0", "nonzero")),
        "Xlogy": (tf.math.xlogy, ("maybe0", "pos")),
        "Xlog1py": (tf.math.xlog1py, ("maybe0", "pos")),
        "Igamma": (tf.math.igamma, ("pos", "pos")),
        "Igammac": (tf.math.igammac, ("pos", "pos")),
        "Zeta": (tf.math.zeta, ("gt1", "pos")),
        "Polygamma": (tf.math.polygamma, ("order", "pos")),
        "NextAfter": (tf.math.nextafter, ("any", "any")),
        "Complex": (tf.complex, ("any", "any")),
    }),
    "logical": ((BOOL,), {
        "LogicalAnd": (tf.logical_and, ("any", "any")),
        "LogicalOr": (tf.logical_or, ("any", "any")),
        "Equal": (tf.equal, ("any", "any")),
        "NotEqual": (tf.not_equal, ("any", "any")),
    }),
    "bitwise": ((I32,), {
        "BitwiseAnd": (tf.bitwise.bitwise_and, ("any", "any")),
        "BitwiseOr": (tf.bitwise.bitwise_or, ("any", "any")),
        "BitwiseXor": (tf.bitwise.bitwise_xor, ("any", "any")),
        "LeftShift": (tf.bitwise.left_shift, ("any", "shift")),
        "RightShift": (tf.bitwise.right_shift, ("any", "shift")),
    }),
}

# Kernels that need equal shapes: op type -> (fn, domains).
SAME_SHAPE = {
    "ApproximateEqual": (lambda x, y: tf.raw_ops.ApproximateEqual(x=x, y=y, tolerance=0.5),
                         ("any", "any")),
    "TanhGrad": (_raw("TanhGrad", "y", "dy"), ("unit", "any")),
    "SigmoidGrad": (_raw("SigmoidGrad", "y", "dy"), ("prob", "any")),
    "SqrtGrad": (_raw("SqrtGrad", "y", "dy"), ("pos", "any")),
    "RsqrtGrad": (_raw("RsqrtGrad", "y", "dy"), ("pos", "any")),
    "ReciprocalGrad": (_raw("ReciprocalGrad", "y", "dy"), ("nonzero", "any")),
    "InvGrad": (_raw("InvGrad", "y", "dy"), ("nonzero", "any")),
}

n_st = st.integers(0, 4)
seeds = st.integers(0, 2**31 - 1)
base_shapes = st.lists(st.integers(0, 3), max_size=3)


@st.composite
def broadcast_shapes(draw, count):
    """``count`` shapes that broadcast together: suffixes of one shape, some dims 1."""
    base = draw(base_shapes)
    out = []
    for _ in range(count):
        rank = draw(st.integers(0, len(base)))
        dims = base[len(base) - rank:]
        out.append([1 if draw(st.booleans()) else d for d in dims])
    return out


def arg(rng, kind, shape, dtype, stacked, n):
    """One op argument as a tensor (a stacked one has a leading dimension n).

    Tensors, not numpy arrays: eager ops may infer float32 from 0-d float64 arrays."""
    return tf.constant(make_values(rng, kind, ([n] if stacked else []) + list(shape), dtype))


# -- registration ---------------------------------------------------------------------


def _emitted_types(fn, *specs):
    """The op types a function's graph holds."""
    graph = tf.function(fn, autograph=False).get_concrete_function(*specs).graph
    return {op.type for op in graph.get_operations()}


def test_every_registered_op_is_tested_and_emitted_by_its_test_function():
    binary = {}
    for dtypes, ops in BINARY.values():
        binary.update({k: (fn, dtypes[0]) for k, (fn, _) in ops.items()})
    assert set(elementwise.UNARY) == set(UNARY)
    assert set(elementwise.BINARY) == set(binary)
    assert set(elementwise.SAME_SHAPE) == set(SAME_SHAPE)
    for name, (fn, dtypes, _) in UNARY.items():
        assert name in _emitted_types(fn, tf.TensorSpec([2], dtypes[0])), name
    for name, (fn, dtype) in binary.items():
        spec = tf.TensorSpec([2], dtype)
        assert name in _emitted_types(fn, spec, spec), name
    for name, (fn, _) in SAME_SHAPE.items():
        spec = tf.TensorSpec([2], F32)
        assert name in _emitted_types(fn, spec, spec), name


# -- unary ----------------------------------------------------------------------------


@settings(max_examples=40)
@given(data=st.data(), names=st.lists(st.sampled_from(sorted(UNARY)), min_size=1,
                                     max_size=8, unique=True),
       shape=base_shapes, n=n_st, seed=seeds)
def test_unary(data, names, shape, n, seed):
    rng = np.random.default_rng(seed)
    fns, args = [], []
    for name in names:
        fn, dtypes, kind = UNARY[name]
        dtype = data.draw(st.sampled_from(dtypes), label=f"{name} dtype")
        fns.append(fn)
        args.append(arg(rng, kind, shape, dtype, True, n))
    testing.check_op(lambda *xs: tuple(f(x) for f, x in zip(fns, xs)), args,
                     stacked=[True] * len(args), n=n)


# -- binary ---------------------------------------------------------------------------


@settings(max_examples=70)
@given(data=st.data(), family=st.sampled_from(sorted(BINARY)), shapes=broadcast_shapes(2),
       stacked=st.tuples(st.booleans(), st.booleans()), n=n_st, seed=seeds)
def test_binary_broadcasting(data, family, shapes, stacked, n, seed):
    """Includes the all-invariant case, which the walk re-emits unchanged."""
    dtypes, ops = BINARY[family]
    dtype = data.draw(st.sampled_from(dtypes), label="dtype")
    names = data.draw(st.lists(st.sampled_from(sorted(ops)), min_size=1, max_size=6,
                               unique=True), label="ops")
    rng = np.random.default_rng(seed)
    fns, args, flags = [], [], []
    for name in names:
        fn, kinds = ops[name]
        fns.append(fn)
        for kind, shape, s in zip(kinds, shapes, stacked):
            args.append(arg(rng, kind, shape, dtype, s, n))
            flags.append(s)
    testing.check_op(
        lambda *xs: tuple(f(xs[2 * k], xs[2 * k + 1]) for k, f in enumerate(fns)),
        args, stacked=flags, n=n)


@settings(max_examples=40)
@given(names=st.lists(st.sampled_from(sorted(SAME_SHAPE)), min_size=1, max_size=4,
                      unique=True),
       shape=base_shapes, dtype=st.sampled_from(FLOATS),
       stacked=st.sampled_from(testing.invariance_combinations(2)), n=n_st, seed=seeds)
def test_same_shape_kernels(names, shape, dtype, stacked, n, seed):
    rng = np.random.default_rng(seed)
    fns, args, flags = [], [], []
    for name in names:
        fn, kinds = SAME_SHAPE[name]
        fns.append(fn)
        for kind, s in zip(kinds, stacked):
            args.append(arg(rng, kind, shape, dtype, s, n))
            flags.append(s)
    testing.check_op(
        lambda *xs: tuple(f(xs[2 * k], xs[2 * k + 1]) for k, f in enumerate(fns)),
        args, stacked=flags, n=n)


# -- three inputs: SelectV2, Select (v1), ClipByValue, Betainc ---------------------------


@settings(max_examples=35)
@given(v1=st.booleans(), data=st.data(),
       stacked=st.sampled_from(testing.invariance_combinations(3)),
       dtype=st.sampled_from(NUMERIC), n=n_st, seed=seeds)
def test_selects(v1, data, stacked, dtype, n, seed):
    rng = np.random.default_rng(seed)
    if v1:
        # The condition is t's shape, a scalar, or a vector over t's first dimension.
        shape = data.draw(base_shapes, label="shape")
        cond = data.draw(st.sampled_from(
            ([shape[:1]] if len(shape) > 1 else []) + [[], shape]), label="cond shape")
        shapes = (cond, shape, shape)
    else:
        shapes = data.draw(broadcast_shapes(3), label="shapes")
    args = [arg(rng, "any", sh, dt, s, n)
            for sh, dt, s in zip(shapes, (BOOL, dtype, dtype), stacked)]
    testing.check_op(tf.compat.v1.where if v1 else tf.where, args, stacked=list(stacked), n=n)


def _clip(t, lo, hi):
    return tf.raw_ops.ClipByValue(t=t, clip_value_min=lo, clip_value_max=hi)


@settings(max_examples=40)
@given(betainc=st.booleans(), data=st.data(), shape=base_shapes,
       stacked=st.sampled_from(testing.invariance_combinations(3)),
       dtype=st.sampled_from(NUMERIC), n=n_st, seed=seeds)
def test_same_shape_or_scalar_kernels(betainc, data, shape, stacked, dtype, n, seed):
    """ClipByValue's bounds and Betainc's inputs are t's shape or scalars."""
    rng = np.random.default_rng(seed)
    scalar = st.sampled_from([shape, []])
    if betainc:
        shapes = [data.draw(scalar, label="shape") for _ in range(3)]
        kinds, dtype, fn = ("pos", "pos", "prob"), (F64 if dtype == F64 else F32), tf.math.betainc
    else:
        shapes = [shape] + [data.draw(scalar, label="bound shape") for _ in range(2)]
        kinds, fn = ("any", "any", "any"), _clip
    args = [arg(rng, k, sh, dtype, s, n) for k, sh, s in zip(kinds, shapes, stacked)]
    testing.check_op(fn, args, stacked=list(stacked), n=n)


def test_three_input_test_functions_emit_the_ops_they_test():
    spec, cond = tf.TensorSpec([2, 3], F32), tf.TensorSpec([2], BOOL)
    assert "Select" in _emitted_types(tf.compat.v1.where, cond, spec, spec)
    assert "SelectV2" in _emitted_types(tf.where, tf.TensorSpec([2, 3], BOOL), spec, spec)
    assert "ClipByValue" in _emitted_types(_clip, spec, spec, spec)
    assert "Betainc" in _emitted_types(tf.math.betainc, spec, spec, spec)
    assert "AddN" in _emitted_types(lambda a, b: tf.add_n([a, b]), spec, spec)


@settings(max_examples=40)
@given(count=st.integers(2, 4), data=st.data(), shape=base_shapes,
       dtype=st.sampled_from(NUMERIC), n=n_st, seed=seeds)
def test_add_n(count, data, shape, dtype, n, seed):
    stacked = data.draw(st.sampled_from(testing.invariance_combinations(count)), label="stacked")
    rng = np.random.default_rng(seed)
    args = [arg(rng, "any", shape, dtype, s, n) for s in stacked]
    testing.check_op(lambda *xs: tf.add_n(list(xs)), args, stacked=list(stacked), n=n)


# -- unknown dimensions -----------------------------------------------------------------


@st.composite
def dynamic_case(draw):
    """(op fn, [(domain, per-iteration shape, dtype), ...]) for one op of each kind."""
    case = draw(st.sampled_from(["binary", "select", "select_v1", "clip", "betainc",
                                 "same_shape", "add_n"]))
    shape = draw(base_shapes)
    same_or_scalar = st.sampled_from([shape, []])
    if case == "binary":
        a, b = draw(broadcast_shapes(2))
        return tf.math.squared_difference, [("any", a, F32), ("any", b, F32)]
    if case == "select":
        c, a, b = draw(broadcast_shapes(3))
        return tf.where, [("any", c, BOOL), ("any", a, F64), ("any", b, F64)]
    if case == "select_v1":
        cond = draw(st.sampled_from(([shape[:1]] if len(shape) > 1 else []) + [[], shape]))
        return tf.compat.v1.where, [("any", cond, BOOL), ("any", shape, I32),
                                    ("any", shape, I32)]
    if case == "clip":
        return _clip, [("any", shape, F32)] + [("any", draw(same_or_scalar), F32)] * 2
    if case == "betainc":
        return tf.math.betainc, [(k, draw(same_or_scalar), F32) for k in ("pos", "pos", "prob")]
    if case == "same_shape":
        return SAME_SHAPE["TanhGrad"][0], [("unit", shape, F32), ("any", shape, F32)]
    return (lambda *xs: tf.add_n(list(xs))), [("any", shape, F32)] * 3


@settings(max_examples=40)
@given(case=dynamic_case(), data=st.data(), n=n_st, seed=seeds)
def test_dimensions_known_only_at_run_time(case, data, n, seed):
    """Inputs of unknown dimensions and iters known only at run time (dynamic shapes)."""
    fn, inputs = case
    stacked = data.draw(st.sampled_from(testing.invariance_combinations(len(inputs))),
                        label="stacked")
    rng = np.random.default_rng(seed)
    args = [arg(rng, kind, shape, dtype, s, n)
            for (kind, shape, dtype), s in zip(inputs, stacked)]
    testing.check_op_unknown_shapes(fn, args, stacked=list(stacked), n=n)


# -- in a tf.function, and the size of the converted graph --------------------------------

CHAIN_UNARY = (tf.tanh, tf.sin, tf.abs, tf.square, tf.sigmoid)
CHAIN_BINARY = (tf.add, tf.multiply, tf.maximum, tf.subtract)


@settings(max_examples=30)
@given(steps=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.booleans()),
                      min_size=1, max_size=4),
       shapes=broadcast_shapes(2), n=n_st, seed=seeds)
def test_elementwise_chain_in_tf_function_with_unknown_iters(steps, shapes, n, seed):
    rng = np.random.default_rng(seed)
    x = tf.constant(make_values(rng, "any", [n] + shapes[0], F32))
    w = tf.constant(make_values(rng, "any", shapes[1], F32))

    def body(i):
        y = tf.gather(x, i)
        for u, b, unary in steps:
            y = CHAIN_UNARY[u](y) if unary else CHAIN_BINARY[b](y, w)
        return y

    testing.assert_matches_loop(body, n, graph=True)


def _count_ops(fn, *specs):
    graph = tf.function(fn, autograph=False).get_concrete_function(*specs).graph
    return sum(op.type not in ("Placeholder", "Const", "Identity", "NoOp")
               for op in graph.get_operations())


@pytest.mark.parametrize("static_n", [True, False])
def test_converted_graph_stays_small(static_n):
    """``x_i * w + b``: each elementwise body op costs at most the op plus a reshape
    (and the shape ops a reshape needs when n is known only at run time)."""
    x = tf.random.normal([4, 3, 5])
    w = tf.random.normal([2, 1, 5])
    b = tf.random.normal([5])

    def row(i):
        return tf.gather(x, i)

    def body(i):
        return row(i) * w + b

    def converted(loop_fn):
        if static_n:
            return _count_ops(lambda: pf.pfor(loop_fn, 4, fallback="error"))
        return _count_ops(lambda n: pf.pfor(loop_fn, n, fallback="error"),
                          tf.TensorSpec([], tf.int32))

    body_ops = _count_ops(body, tf.TensorSpec([], tf.int32))
    base_ops = _count_ops(row, tf.TensorSpec([], tf.int32))
    added = converted(body) - converted(row)
    assert added <= (2 if static_n else 3) * (body_ops - base_ops), (added, body_ops, base_ops)
    testing.assert_matches_loop(body, 4, graph=True)


@pytest.mark.parametrize("iters", [0, 3])
def test_invariant_input_of_higher_rank_than_stacked(iters):
    x = tf.random.normal([iters, 4])
    w = tf.random.normal([2, 3, 4])
    testing.check_op(tf.math.squared_difference, [x, w], stacked=[True, False], n=iters)
    testing.check_op(lambda a, b: tf.where(a > 0, b, a), [x, w], stacked=[True, False],
                     n=iters)


def test_gradient_of_an_invariant_output_broadcasts_it():
    """In a jacobian the forward tanh/sigmoid output is invariant and the incoming
    gradient stacked: the gradient is formed by broadcasting, no tiling of y."""
    import pfor_core as pf  # pylint: disable=import-outside-toplevel
    w = tf.constant(np.random.default_rng(0).normal(size=[5, 5]), tf.float32)
    x = tf.constant(np.linspace(-1.0, 1.0, 5), tf.float32)
    f = lambda v: tf.sigmoid(tf.tanh(tf.linalg.matvec(w, v)))  # noqa: E731
    fn = tf.function(lambda: pf.jacobian(f, x, fallback="error"))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = f(x)
    np.testing.assert_allclose(fn(), tape.jacobian(y, x, experimental_use_pfor=False),
                               rtol=1e-5, atol=1e-6)
    ops = {op.type for op in fn.get_concrete_function().graph.get_operations()}
    assert not ops & {"TanhGrad", "SigmoidGrad", "BroadcastTo", "Tile"}, ops


WIDTH = 5


def _values(data, shape, low=-2.0, high=2.0):
    return tf.constant(np.asarray(data.draw(st.lists(
        st.floats(low, high, width=32), min_size=int(np.prod(shape)),
        max_size=int(np.prod(shape))), label="values"), np.float32).reshape(shape))


def _ragged(data, n, inner=(), lengths=None):
    """A ragged operand: (x, lengths) for testing.rows(x, lengths, i)."""
    if lengths is None:
        lengths = tf.constant(data.draw(testing.lengths_strategy(n, WIDTH), label="lengths"),
                              tf.int32)
    return _values(data, [n, WIDTH, *inner]), lengths


RAGGED_UNARY = {
    "exp": tf.exp, "log": lambda r: tf.math.log(tf.abs(r) + 0.1), "log_raw": tf.math.log,
    "sqrt": lambda r: tf.sqrt(tf.abs(r)), "abs": tf.abs, "reciprocal": tf.math.reciprocal,
    "cast": lambda r: tf.cast(r * 3, tf.int32), "sigmoid": tf.sigmoid,
    "zeros_like": tf.zeros_like, "ones_like": tf.ones_like,
    "not": lambda r: tf.logical_not(r > 0), "floor": tf.floor,
}


@settings(max_examples=24)
@given(data=st.data())
def test_ragged_unary(data):
    name = data.draw(st.sampled_from(sorted(RAGGED_UNARY)), label="op")
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _ragged(data, n, inner=(2,))
    testing.assert_matches_loop(lambda i: RAGGED_UNARY[name](testing.rows(x, lengths, i)), n,
                                ragged=True, modes=testing.draw_modes(data))


# Per-iteration shapes of the other operand against a ragged [L_i, 3]; per-iteration
# rank-1 ragged [L_i] against [] and [1].
OTHER_SHAPES = {2: [(), (3,), (1, 3), (1, 1)], 1: [(), (1,)]}


RAGGED_BINARY = {"add": tf.add, "mul": tf.multiply, "sub": tf.subtract, "div": tf.math.divide,
          "maximum": tf.maximum, "less": tf.less, "equal": tf.equal, "pow": tf.pow}


@pytest.mark.parametrize("pattern", ["RS", "SR", "RU", "UR", "RR"])
@settings(max_examples=8)
@given(data=st.data())
def test_binary(pattern, data):
    name = data.draw(st.sampled_from(sorted(RAGGED_BINARY)), label="op")
    n = data.draw(st.integers(0, 4), label="n")
    rank = data.draw(st.sampled_from([1, 2]), label="rank")
    inner = (3,) if rank == 2 else ()
    x, lengths = _ragged(data, n, inner)
    y, _ = _ragged(data, n, inner, lengths=lengths)
    shape = data.draw(st.sampled_from(OTHER_SHAPES[rank]), label="other shape")
    other = {"S": _values(data, [n, *shape]), "U": _values(data, list(shape))}
    op = RAGGED_BINARY[name]

    def operand(code, i, first):
        if code == "R":
            return testing.rows(x if first else y, lengths, i)
        return tf.gather(other["S"], i) if code == "S" else other["U"]

    def body(i):
        a, b = operand(pattern[0], i, True), operand(pattern[1], i, False)
        if name == "pow":
            a = tf.abs(a) + 0.5
        return op(a, b)

    testing.assert_matches_loop(body, n, ragged=True,
                                modes=testing.draw_modes(data))


@settings(max_examples=8)
@given(data=st.data())
def test_ragged_operands_broadcast_a_size_of_one(data):
    """x[:a_i] + y[:b_i] with b_i equal to a_i or 1 (the loop broadcasts the 1), other
    lengths tensors than the same one, of other padded widths."""
    n = data.draw(st.integers(0, 4), label="n")
    a = data.draw(testing.lengths_strategy(n, WIDTH), label="a")
    ones = data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="ones")
    b = [1 if o else k for o, k in zip(ones, a)]
    if data.draw(st.booleans(), label="swap"):
        a, b = b, a
    x, y = _values(data, [n, WIDTH, 2]), _values(data, [n, WIDTH + 2, 2])
    a, b = tf.constant(a, tf.int32), tf.constant(b, tf.int32)
    testing.assert_matches_loop(lambda i: testing.rows(x, a, i) * testing.rows(y, b, i), n,
                                ragged=True, modes=testing.draw_modes(data))


def test_ragged_operands_of_other_sizes_fail_like_the_loop():
    x = tf.ones([3, WIDTH])
    a, b = tf.constant([2, 3, 0]), tf.constant([2, 4, 0])
    testing.assert_fails_like_loop(lambda i: testing.rows(x, a, i) + testing.rows(x, b, i), 3,
                                   match="do not broadcast")


def test_varying_dimension_against_a_stacked_fixed_size():
    """A ragged dimension against a stacked one of size 3: the loop's shapes agree when
    L_i is 1 or 3 (checked when it runs, the result is uniform), and fail otherwise."""
    x, s = tf.reshape(tf.range(2.0 * WIDTH), [2, WIDTH]), tf.reshape(tf.range(6.0), [2, 3])
    n = tf.constant([3, 1])
    testing.assert_matches_loop(lambda i: testing.rows(x, n, i) + tf.gather(s, i), 2,
                                modes=testing.RUN_MODES)
    testing.assert_fails_like_loop(
        lambda i: testing.rows(x, tf.constant([3, 2]), i) + tf.gather(s, i), 2, match="broadcast")


@pytest.mark.parametrize("pattern", ["R**", "*R*", "**R", "RR*", "R*R", "*RR", "RRR"])
@settings(max_examples=3)
@given(data=st.data())
def test_select(pattern, data):
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _ragged(data, n, (2,))
    y, _ = _ragged(data, n, (2,), lengths=lengths)
    s = _values(data, [n, 2])
    u = _values(data, [2])
    codes = ["S" if data.draw(st.booleans(), label=f"stacked {k}") else "U"
             for k in range(3)]

    def body(i):
        values = []
        for k, code in enumerate(pattern):
            if code == "R":
                values.append(testing.rows(x if k != 1 else y, lengths, i))
            else:
                values.append(tf.gather(s, i) if codes[k] == "S" else u)
        return tf.where(values[0] > 0, values[1], values[2])

    testing.assert_matches_loop(body, n, ragged=True,
                                modes=testing.draw_modes(data))


@settings(max_examples=6)
@given(data=st.data())
def test_add_n_clip_and_same_shape_kernels(data):
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _ragged(data, n, (2,))
    y, _ = _ragged(data, n, (2,), lengths=lengths)

    def body(i):
        a, b = testing.rows(x, lengths, i), testing.rows(y, lengths, i)
        total = tf.math.add_n([a, b, a])
        clipped = tf.raw_ops.ClipByValue(t=total, clip_value_min=-1.0,
                                         clip_value_max=tf.gather(y[:, 0, 0], i))
        grad = tf.raw_ops.TanhGrad(y=tf.tanh(a), dy=b)
        return clipped + grad

    testing.assert_matches_loop(body, n, ragged=True,
                                modes=testing.draw_modes(data))


def test_add_n_of_other_sizes_fails_like_the_loop():
    x = tf.ones([3, WIDTH])
    a, b = tf.constant([2, 3, 0]), tf.constant([2, 1, 0])
    testing.assert_fails_like_loop(
        lambda i: tf.math.add_n([testing.rows(x, a, i), testing.rows(x, b, i)]), 3,
        error=(tf.errors.InvalidArgumentError, ValueError))


@pytest.mark.parametrize("kind", ["ragged", "stacked", "invariant"])
@settings(max_examples=3)
@given(data=st.data())
def test_same_shape_kernels_of_operands_fixed_where_another_varies(kind, data):
    """Operands that must have equal shapes, one varying in a dimension where another
    is fixed (a row count per iteration that happens to be the same everywhere, a
    stacked or invariant operand of a static size): checked there by the fixed size."""
    n = data.draw(st.integers(1, 4), label="n")
    x, lengths = _ragged(data, n, (3,))
    fixed = _values(data, [n, 3])
    rows = tf.fill([n], 3) + tf.zeros([n], tf.int32)  # the same in every iteration
    y = _values(data, [n, 3, WIDTH])

    def body(i):
        a = tf.transpose(testing.rows(x, lengths, i))  # [3, L_i]: varies in dim 1
        b = tf.gather(y, i)[:tf.gather(rows, i), :tf.gather(lengths, i)]  # varies in both
        if kind != "ragged":  # [3] against [L_i] where every L_i is 3
            a = tf.gather(fixed, i) if kind == "stacked" else fixed[0]
            b = testing.rows(x, rows, i)[:, 0]
        return (tf.math.add_n([a, b]) + tf.raw_ops.TanhGrad(y=tf.tanh(b), dy=a)
                + tf.raw_ops.SigmoidGrad(y=tf.sigmoid(a), dy=b))

    testing.assert_matches_loop(body, n, ragged=True, modes=testing.draw_modes(data))


def test_a_fixed_operand_against_other_sizes_fails_like_the_loop():
    x, s = tf.ones([2, WIDTH]), tf.ones([2, 3])
    testing.assert_fails_like_loop(
        lambda i: tf.math.add_n([testing.rows(x, tf.constant([3, 2]), i), tf.gather(s, i)]), 2,
        error=(tf.errors.InvalidArgumentError, ValueError))


GRADIENT_BODIES = {
    "log": lambda r, w: tf.reduce_sum(tf.math.log(tf.abs(r)) * w, 0),
    "sqrt": lambda r, w: tf.reduce_sum(tf.sqrt(tf.abs(r)) * w, 0),
    "reciprocal": lambda r, w: tf.reduce_sum(1.0 / r + w, 0),
    "ratio": lambda r, w: tf.reduce_sum(r / (r * r + w * w), 0),
    "select": lambda r, w: tf.reduce_sum(tf.where(r > 0, tf.exp(r), r * w), 0),
}


@settings(max_examples=10)
@given(data=st.data())
def test_gradients(data):
    name = data.draw(st.sampled_from(sorted(GRADIENT_BODIES)), label="body")
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _ragged(data, n, (2,))
    w = _values(data, [2]) + 3.0
    chunked = data.draw(st.booleans(), label="chunked")
    testing.assert_gradients_match(lambda i: GRADIENT_BODIES[name](testing.rows(x, lengths, i), w),
                                   [x, w], n, chunked=chunked)


def _equal_sizes_body(kind, x, y, lengths):
    """A body from numpy inputs (constants made inside it, so it builds in any graph)."""

    def rows(values, i, dim=0):  # a fresh lengths tensor per call: equal, not the same
        count = tf.gather(tf.constant(lengths, tf.int32), i)
        row = tf.gather(tf.constant(values), i)
        return row[:count] if dim == 0 else row[:, :count]

    def body(i):
        if kind == "same rank":  # [L_i, 2] and [L_i, 2]
            return rows(x, i) * rows(y, i) - rows(y, i)
        if kind == "size one":  # [L_i, 1] against [L_i, 2]
            return rows(x, i)[:, :1] + rows(y, i)
        if kind == "other ranks":  # [L_i] against [2, L_i]
            return rows(x, i)[:, 0] - rows(np.swapaxes(y, 1, 2), i, dim=1)
        if kind == "fixed size":  # [L_i, 2] against a stacked [2, 2] (L_i is 1 or 2)
            return rows(x, i) + tf.gather(tf.constant(y), i)[:2]
        counts = tf.gather(tf.constant(lengths, tf.int32), i)  # "range and repeat"
        k = tf.cast(tf.range(counts), tf.float32)
        return k - tf.repeat(tf.gather(tf.constant(x[:, 0, :1]), i), tf.reshape(counts, [1]))

    return body


def _pfor_in_a_v1_graph(body, n):
    """``pf.pfor(body, n, fallback="error", ragged_outputs=True)`` built in a
    tf.compat.v1 graph and run in a session, as an eager tf.RaggedTensor."""
    import pfor_core as pf  # pylint: disable=import-outside-toplevel

    with tf.Graph().as_default():
        out = pf.pfor(body, n, fallback="error", ragged_outputs=True)
        with tf.compat.v1.Session() as session:
            value = session.run(out)
    if isinstance(value, np.ndarray):
        return tf.constant(value)
    return tf.RaggedTensor.from_nested_row_splits(value.flat_values,
                                                  value.nested_row_splits)


@pytest.mark.parametrize("kind", ["same rank", "size one", "other ranks", "fixed size",
                                  "range and repeat"])
@settings(max_examples=4)
@given(data=st.data())
def test_ragged_operands_of_equal_sizes_broadcast(kind, data):
    n = data.draw(st.integers(0, 4), label="n")
    sizes = st.sampled_from([1, 2]) if kind == "fixed size" else st.integers(0, WIDTH)
    lengths = data.draw(st.lists(sizes, min_size=n, max_size=n), label="lengths")
    x = _values(data, [n, WIDTH, 2]).numpy()
    y = _values(data, [n, WIDTH, 2]).numpy()
    body = _equal_sizes_body(kind, x, y, lengths)
    testing.assert_matches_loop(body, n, ragged=True, modes=testing.draw_modes(data))
    expected = [body(tf.constant(j)) for j in range(n)]
    testing.assert_rows_match(_pfor_in_a_v1_graph(body, n), expected, where=" (v1 graph)")


def test_bates_log_prob_in_a_v1_graph():
    """TFP's Bates.log_prob sums a segmented range (a tf.range of each value's number
    of terms against a tf.repeat by them): the same as tf.map_fn's, per-example total
    counts too, eagerly and in a tf.compat.v1 graph."""
    pytest.importorskip("tf_keras")
    tfd = pytest.importorskip("tensorflow_probability").distributions
    import pfor_core as pf  # pylint: disable=import-outside-toplevel

    values = np.array([[0.2, 0.45], [0.7, 0.1], [0.3, 0.95]], np.float32)
    counts = np.array([4.0, 7.0, 2.0], np.float32)

    def log_prob(args):
        value, count = args
        return tfd.Bates(total_count=count, low=0.0, high=1.0).log_prob(value)

    elems = (tf.constant(values), tf.constant(counts))
    want = tf.map_fn(log_prob, elems, fn_output_signature=tf.float32)
    testing.assert_allclose(pf.vectorized_map(log_prob, elems, fallback="error"), want,
                            atol=1e-5)
    with tf.Graph().as_default():
        got = pf.vectorized_map(log_prob, (tf.constant(values), tf.constant(counts)),
                                fallback="error")
        with tf.compat.v1.Session() as session:
            got = session.run(got)
    testing.assert_allclose(tf.constant(got), want, atol=1e-5)
