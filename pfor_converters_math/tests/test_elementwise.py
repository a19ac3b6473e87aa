"""Property tests for the elementwise converters: pfor against the sequential loop.

Each example draws per-iteration shapes (broadcast-compatible, of different ranks for
n-ary ops), a dtype, values inside each op's domain, which inputs are stacked, the loop
length (0 included) and several op types of one family, all checked in one pfor call.
Every check runs with fallback="error", so passing means no op fell back.
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
       stacked=st.sampled_from(testing.invariance_combinations(3)), dtype=st.sampled_from(NUMERIC), n=n_st, seed=seeds)
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
