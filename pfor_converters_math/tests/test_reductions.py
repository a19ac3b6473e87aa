"""Property tests for the reduction and scan converters: pfor against the sequential loop.

Examples draw the per-iteration shape, dtype, values, axes (none, scalar, vector,
negative, empty, static or only known at run time), keepdims / exclusive / reverse /
output_type, and the loop length (0 included). Every check runs with fallback="error",
so passing means no op fell back.

Ragged values (x[:n_i]): reductions, arg-reductions and scans over the ragged axis and
others, keep_dims both ways, empty rows (what TensorFlow gives for an empty reduction),
gradients.
"""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing
from pfor_converters_math import reductions

F32, F64, I32, BOOL = tf.float32, tf.float64, tf.int32, tf.bool
FLOATS, NUMERIC = (F32, F64), (F32, F64, I32)

# Value ranges by kind: (float low, float high), (int low, int high).
DOMAINS = {"any": ((-3.0, 3.0), (-5, 5)), "near1": ((0.5, 1.5), (-1, 1))}


def make_values(rng, kind, shape, dtype):
    """Values of one input as a tensor (tensors, not numpy arrays: eager ops may infer
    float32 from 0-d float64 arrays)."""
    dtype = tf.as_dtype(dtype)
    shape = tuple(shape)
    if dtype == tf.bool:
        return tf.constant(rng.random(shape) < 0.5)
    (flo, fhi), (ilo, ihi) = DOMAINS[kind]
    v = rng.integers(ilo, ihi + 1, shape) if dtype.is_integer else rng.uniform(flo, fhi, shape)
    return tf.constant(v.astype(dtype.as_numpy_dtype))


# op type -> (fn, dtypes, value kind)
REDUCE = {
    "Sum": (tf.reduce_sum, NUMERIC, "any"), "Mean": (tf.reduce_mean, FLOATS, "any"),
    "Prod": (tf.reduce_prod, NUMERIC, "near1"), "Max": (tf.reduce_max, NUMERIC, "any"),
    "Min": (tf.reduce_min, NUMERIC, "any"), "All": (tf.reduce_all, (BOOL,), "any"),
    "Any": (tf.reduce_any, (BOOL,), "any"),
    "EuclideanNorm": (tf.math.reduce_euclidean_norm, FLOATS, "any"),
}
ARG = {"ArgMax": tf.argmax, "ArgMin": tf.argmin}
SCAN = {
    "Cumsum": (tf.math.cumsum, NUMERIC, "any"), "Cumprod": (tf.math.cumprod, NUMERIC, "near1"),
    "CumulativeLogsumexp": (tf.math.cumulative_logsumexp, FLOATS, "any"),
}

n_st = st.integers(0, 4)
seeds = st.integers(0, 2**31 - 1)


def per_iteration_shape(min_rank=0, min_dim=0):
    return st.lists(st.integers(min_dim, 3), min_size=min_rank, max_size=3)


@st.composite
def axes_for(draw, rank):
    """None (all axes), a scalar, or a vector (maybe empty) of distinct axes, each
    written as a non-negative or a negative number, in any order."""
    mode = draw(st.sampled_from(["none", "scalar", "vector"] if rank else ["none", "vector"]))
    if mode == "none":
        return None
    if mode == "scalar":
        axis = draw(st.integers(0, rank - 1))
        return axis - rank if draw(st.booleans()) else axis
    picked = draw(st.permutations(range(rank)))[:draw(st.integers(0, rank))]
    return [a - rank if draw(st.booleans()) else a for a in picked]


def stacked_input(rng, kind, shape, dtype, n):
    return make_values(rng, kind, [n] + list(shape), dtype)


# -- registration ---------------------------------------------------------------------


def _emitted_types(fn, *specs):
    """The op types a function's graph holds."""
    graph = tf.function(fn, autograph=False).get_concrete_function(*specs).graph
    return {op.type for op in graph.get_operations()}


def test_every_registered_op_is_tested_and_emitted_by_its_test_function():
    assert set(reductions.REDUCTIONS) == set(REDUCE)
    assert set(reductions.ARG_REDUCTIONS) == set(ARG)
    assert set(reductions.SCANS) == set(SCAN)
    for name, (fn, dtypes, _) in {**REDUCE, **SCAN}.items():
        assert name in _emitted_types(lambda x: fn(x, 0), tf.TensorSpec([2], dtypes[0])), name
    for name, fn in ARG.items():
        assert name in _emitted_types(lambda x: fn(x, 0), tf.TensorSpec([2], F32)), name


# -- reductions -----------------------------------------------------------------------


@settings(max_examples=40)
@given(data=st.data(), names=st.lists(st.sampled_from(sorted(REDUCE)), min_size=1,
                                     max_size=4, unique=True),
       shape=per_iteration_shape(), keepdims=st.booleans(), n=n_st, seed=seeds)
def test_reductions(data, names, shape, keepdims, n, seed):
    """Includes axis=None (tf.reduce_sum(x) emits Sum over all axes) and empty axes."""
    axes = data.draw(axes_for(len(shape)), label="axes")
    rng = np.random.default_rng(seed)
    fns, args = [], []
    for name in names:
        fn, dtypes, kind = REDUCE[name]
        dtype = data.draw(st.sampled_from(dtypes), label=f"{name} dtype")
        fns.append(fn)
        args.append(stacked_input(rng, kind, shape, dtype, n))
    testing.check_op(
        lambda *xs: tuple(f(x, axis=axes, keepdims=keepdims) for f, x in zip(fns, xs)),
        args, stacked=[True] * len(args), n=n)


@settings(max_examples=40)
@given(name=st.sampled_from(sorted(ARG)), shape=per_iteration_shape(min_rank=1, min_dim=1),
       data=st.data(), dtype=st.sampled_from(NUMERIC),
       output_type=st.sampled_from([tf.int32, tf.int64]), n=n_st, seed=seeds)
def test_arg_reductions(name, shape, data, dtype, output_type, n, seed):
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1), label="axis")
    x = stacked_input(np.random.default_rng(seed), "any", shape, dtype, n)
    testing.check_op(lambda v: ARG[name](v, axis=axis, output_type=output_type), [x],
                     stacked=[True], n=n)


@settings(max_examples=40)
@given(name=st.sampled_from(sorted(SCAN)), shape=per_iteration_shape(min_rank=1),
       data=st.data(), exclusive=st.booleans(), reverse=st.booleans(), n=n_st, seed=seeds)
def test_scans(name, shape, data, exclusive, reverse, n, seed):
    fn, dtypes, kind = SCAN[name]
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1), label="axis")
    dtype = data.draw(st.sampled_from(dtypes), label="dtype")
    x = stacked_input(np.random.default_rng(seed), kind, shape, dtype, n)
    testing.check_op(lambda v: fn(v, axis=axis, exclusive=exclusive, reverse=reverse), [x],
                     stacked=[True], n=n)


# -- axes known only at run time ------------------------------------------------------


def _run_time_axes_case(name, keepdims, exclusive):
    """A body ``op(x_i, axes)`` and the tf.function signature of ``axes``."""
    if name in REDUCE:
        return (lambda x, a: REDUCE[name][0](x, axis=a, keepdims=keepdims)), REDUCE[name][1]
    if name in ARG:
        return (lambda x, a: ARG[name](x, axis=a)), NUMERIC
    return (lambda x, a: SCAN[name][0](x, axis=a, exclusive=exclusive)), SCAN[name][1]


@settings(max_examples=40)
@given(name=st.sampled_from(sorted({**REDUCE, **ARG, **SCAN})), data=st.data(),
       shape=per_iteration_shape(min_rank=1, min_dim=1), keepdims=st.booleans(),
       exclusive=st.booleans(), n=n_st, seed=seeds)
def test_axes_known_only_at_run_time(name, data, shape, keepdims, exclusive, n, seed):
    """Axes fed to a tf.function as an argument: invariant but not static."""
    op, dtypes = _run_time_axes_case(name, keepdims, exclusive)
    dtype = data.draw(st.sampled_from(dtypes), label="dtype")
    rank = len(shape)
    if name in REDUCE:
        axes = data.draw(axes_for(rank).filter(lambda a: a is not None), label="axes")
    else:
        axes = data.draw(st.integers(-rank, rank - 1), label="axis")
    axes = tf.constant(axes, tf.int32)
    kind = "near1" if name in ("Prod", "Cumprod") else "any"
    x = stacked_input(np.random.default_rng(seed), kind, shape, dtype, n)

    run = tf.function(lambda x, a: pf.pfor(lambda i: op(tf.gather(x, i), a), n,
                                           fallback="error"), autograph=False)
    got = run.get_concrete_function(tf.TensorSpec(x.shape, x.dtype),
                                    tf.TensorSpec(axes.shape, axes.dtype))(x, axes)
    expected = testing.sequential(lambda i: op(tf.gather(x, i), axes), n)
    if expected is None:
        assert got.shape[0] == 0
    else:
        testing.assert_allclose(got, expected)


@settings(max_examples=40)
@given(name=st.sampled_from(sorted({**REDUCE, **ARG, **SCAN})), data=st.data(),
       shape=per_iteration_shape(min_rank=1, min_dim=1), keepdims=st.booleans(),
       exclusive=st.booleans(), n=n_st, seed=seeds)
def test_dimensions_known_only_at_run_time(name, data, shape, keepdims, exclusive, n, seed):
    """Inputs of unknown dimensions and iters known only at run time; static axes."""
    op, dtypes = _run_time_axes_case(name, keepdims, exclusive)
    dtype = data.draw(st.sampled_from(dtypes), label="dtype")
    rank = len(shape)
    if name in REDUCE:
        axes = data.draw(axes_for(rank), label="axes")
    else:
        axes = data.draw(st.integers(-rank, rank - 1), label="axis")
    kind = "near1" if name in ("Prod", "Cumprod") else "any"
    x = stacked_input(np.random.default_rng(seed), kind, shape, dtype, n)
    testing.check_op_unknown_shapes(lambda v: op(v, axes), [x], stacked=[True], n=n)


# -- declining, and the size of the converted graph -----------------------------------


def test_stacked_axis_has_no_converter_and_falls_back():
    x = tf.reshape(tf.range(12.0), [3, 4])

    def body(i):
        return tf.reduce_sum(x, axis=tf.math.floormod(i, 2), keepdims=True)

    report = pf.explain(body, 3)
    assert [r.op_type for r in report.fallbacks] == ["Sum"]
    # Reductions are registered for an invariant axis (and ragged axes, of gradients).
    assert "SU (pfor-converters-math), none these (US" in report.fallbacks[0].reason
    with pytest.raises(pf.ConversionError):
        pf.pfor(body, 3, fallback="error")


@pytest.mark.parametrize("static_n", [True, False])
def test_converted_graph_stays_small(static_n):
    """A reduction costs one op with static axes (two more with run-time ones)."""
    x = tf.random.normal([4, 3, 5])

    def row(i):
        return tf.gather(x, i)

    def body(i):
        r = row(i)
        return (tf.reduce_sum(r, axis=[-1, 0], keepdims=True), tf.argmax(r, axis=-1),
                tf.math.cumsum(r, axis=1, reverse=True))

    def count(fn, *specs):
        graph = tf.function(fn, autograph=False).get_concrete_function(*specs).graph
        return sum(op.type not in ("Placeholder", "Const", "Identity", "NoOp")
                   for op in graph.get_operations())

    def converted(loop_fn):
        if static_n:
            return count(lambda: pf.pfor(loop_fn, 4, fallback="error"))
        return count(lambda n: pf.pfor(loop_fn, n, fallback="error"),
                     tf.TensorSpec([], tf.int32))

    index = tf.TensorSpec([], tf.int32)
    body_ops = count(body, index) - count(row, index)
    assert converted(body) - converted(row) <= body_ops
    testing.assert_matches_loop(body, 4, graph=True)


WIDTH = 4


def _draw(data, n, dtype):
    lengths = tf.constant(data.draw(testing.lengths_strategy(n, WIDTH), label="lengths"), tf.int32)
    shape = [n, WIDTH, 3]
    size = int(np.prod(shape))
    if dtype == tf.bool:
        values = data.draw(st.lists(st.booleans(), min_size=size, max_size=size))
    elif dtype.is_integer:
        values = data.draw(st.lists(st.integers(-5, 5), min_size=size, max_size=size))
    else:
        values = data.draw(st.lists(st.floats(-2, 2, width=32), min_size=size, max_size=size))
    return tf.constant(np.asarray(values).reshape(shape), dtype), lengths


REDUCTIONS = {
    tf.float32: [tf.reduce_sum, tf.reduce_prod, tf.reduce_max, tf.reduce_min,
                 tf.reduce_mean, tf.math.reduce_euclidean_norm],
    tf.int32: [tf.reduce_sum, tf.reduce_max, tf.reduce_min, tf.reduce_mean],
    tf.bool: [tf.reduce_all, tf.reduce_any],
}


@pytest.mark.parametrize("dtype", [tf.float32, tf.int32, tf.bool], ids=str)
@settings(max_examples=20)
@given(data=st.data())
def test_ragged_reductions(dtype, data):
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _draw(data, n, dtype)
    op = data.draw(st.sampled_from(REDUCTIONS[dtype]), label="op")
    axis = data.draw(st.sampled_from([0, 1, -1, [0, 1], [], None, -2]), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    ragged = axis in (1, -1, [])  # the ragged axis is kept
    testing.assert_matches_loop(
        lambda i: op(testing.rows(x, lengths, i), axis=axis, keepdims=keepdims),
        n, ragged=ragged, modes=testing.draw_modes(data))


@settings(max_examples=12)
@given(data=st.data())
def test_ragged_arg_reductions(data):
    n = data.draw(st.integers(0, 4), label="n")
    dtype = data.draw(st.sampled_from([tf.float32, tf.int32]), label="dtype")
    x, lengths = _draw(data, n, dtype)
    op = data.draw(st.sampled_from([tf.argmax, tf.argmin]), label="op")
    axis = data.draw(st.sampled_from([0, 1, -1]), label="axis")
    if axis == 0:  # the loop fails on an empty axis: draw lengths from 1
        lengths = tf.maximum(lengths, 1)
    testing.assert_matches_loop(lambda i: op(testing.rows(x, lengths, i), axis=axis), n,
                                ragged=axis != 0, modes=testing.draw_modes(data))


def test_arg_reduction_over_an_empty_axis_fails_like_the_loop():
    x = tf.ones([3, WIDTH])
    lengths = tf.constant([2, 0, 1])
    testing.assert_fails_like_loop(lambda i: tf.argmax(testing.rows(x, lengths, i)), 3,
                                   match="empty")


@settings(max_examples=16)
@given(data=st.data())
def test_ragged_scans(data):
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _draw(data, n, tf.float32)
    op = data.draw(st.sampled_from([tf.cumsum, tf.math.cumprod,
                                    tf.math.cumulative_logsumexp]), label="op")
    axis = data.draw(st.sampled_from([0, 1, -2]), label="axis")
    exclusive, reverse = data.draw(st.booleans()), data.draw(st.booleans())
    testing.assert_matches_loop(
        lambda i: op(testing.rows(x, lengths, i), axis=axis, exclusive=exclusive,
                     reverse=reverse),
        n, ragged=True, modes=testing.draw_modes(data))


GRADIENT_BODIES = {
    "sum": lambda r: tf.reduce_sum(r * r, 0),
    "mean": lambda r: tf.reduce_mean(r, 0),
    "max": lambda r: tf.reduce_max(r, 0),
    "min_all": lambda r: tf.reduce_min(r),
    "prod": lambda r: tf.reduce_prod(r, 0),
    "norm": lambda r: tf.math.reduce_euclidean_norm(r, 0),
    "log_mean": lambda r: tf.math.log(tf.reduce_mean(tf.exp(r), 0)),
    "cumsum": lambda r: tf.reduce_sum(tf.cumsum(r, 0, reverse=True) ** 2, 0),
    "logsumexp": lambda r: tf.reduce_sum(tf.math.cumulative_logsumexp(r, 0), 0),
    "inner_mean": lambda r: tf.reduce_sum(tf.reduce_mean(tf.sqrt(tf.abs(r)), 1), 0),
}


@settings(max_examples=14)
@given(data=st.data())
def test_gradients(data):
    n = data.draw(st.integers(0, 4), label="n")
    x, lengths = _draw(data, n, tf.float32)
    name = data.draw(st.sampled_from(sorted(GRADIENT_BODIES)), label="body")
    body = GRADIENT_BODIES[name]
    chunked = data.draw(st.booleans(), label="chunked")
    testing.assert_gradients_match(lambda i: body(testing.rows(x, lengths, i)), [x], n,
                                   chunked=chunked)
