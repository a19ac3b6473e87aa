"""Random ops under pfor: randomness="different" draws independent rows with the right
distribution, "same" one shared draw, "error" raises; stateless ops seeded per iteration
match the sequential loop, loop-free: exactly for uniforms and integers, within a few
ulps for normals (NORMAL_TOLERANCE); the kinds with no batched draw fall back exactly."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing

# Bodies drawing one random value per iteration: name -> (loop body, is integer-valued).
SHAPE = [3, 2]
BODIES = {
    "uniform": lambda i: tf.random.uniform(SHAPE),
    "uniform_int": lambda i: tf.random.uniform(SHAPE, maxval=2**30, dtype=tf.int32),
    "uniform_int64": lambda i: tf.random.uniform(SHAPE, maxval=2**40, dtype=tf.int64),
    "normal": lambda i: tf.random.normal(SHAPE, dtype=tf.float64),
    "truncated": lambda i: tf.random.truncated_normal(SHAPE),
    "gamma": lambda i: tf.random.gamma([3], tf.constant([1.0, 2.0])),
    "poisson": lambda i: tf.random.poisson([3], tf.constant([3.0, 50.0])),
    "multinomial": lambda i: tf.random.categorical(tf.zeros([3, 1000]), 2),
    "generator": lambda i: GENERATOR.uniform(SHAPE),
    "keras": lambda i: keras.random.normal(SHAPE, seed=SEEDS),
    "keras_categorical": lambda i: keras.random.categorical(tf.zeros([3, 1000]), 2, seed=SEEDS),
    "keras_gamma": lambda i: keras.random.gamma(SHAPE, 2.0, seed=SEEDS),
    "keras_binomial": lambda i: keras.random.binomial(SHAPE, 1000, 0.5, seed=SEEDS),
}
GENERATOR = tf.random.Generator.from_seed(7)
SEEDS = keras.random.SeedGenerator(7)
# Keras advances its seed with AssignVariableOp (invariant: the SIMD write), whose
# converter lives in another module of this pack; until it exists that op falls back.
_HAS_ASSIGN = bool(pf.default_registry().entries("AssignVariableOp"))


def _rows_differ(rows):
    flat = [np.ravel(row) for row in rows]
    return all(not np.array_equal(flat[a], flat[b])
               for a in range(len(flat)) for b in range(a))


@given(name=st.sampled_from(sorted(BODIES)), n=st.integers(0, 4),
       mode=st.sampled_from(["different", "same"]), graph=st.booleans())
def test_modes_shape_and_sharing(name, n, mode, graph):
    body = BODIES[name]
    expected = body(tf.constant(0))
    fallback = "loop" if name.startswith("keras") and not _HAS_ASSIGN else "error"
    run = lambda k: pf.pfor(body, k, randomness=mode, fallback=fallback)  # noqa: E731
    got = (tf.function(run, autograph=False)(tf.constant(n)) if graph else run(n)).numpy()
    assert got.shape == (n,) + tuple(expected.shape)
    assert got.dtype == expected.dtype.as_numpy_dtype
    if mode == "same":
        assert all(np.array_equal(row, got[0]) for row in got)
    else:
        assert _rows_differ(got)


@pytest.mark.parametrize("fallback", ["loop", "error"])
@pytest.mark.parametrize("name", sorted(BODIES))
def test_error_mode_raises_naming_op_and_option(name, fallback):
    with pytest.raises(pf.ConversionError, match="randomness='error'"):
        pf.pfor(BODIES[name], 3, randomness="error", fallback=fallback)


# Distributions, 100 iterations x 100 values, fixed seeds: (body, mean, std, tolerance).
MOMENTS = {
    "uniform": (lambda i: tf.random.uniform([100], seed=1), 0.5, 12 ** -0.5, 0.02),
    "normal": (lambda i: tf.random.normal([100], seed=2), 0.0, 1.0, 0.05),
    # A standard normal truncated at +-2 has std 0.8796.
    "truncated": (lambda i: tf.random.truncated_normal([100], seed=3), 0.0, 0.8796, 0.05),
    "uniform_int": (lambda i: tf.random.uniform([100], maxval=10, dtype=tf.int32, seed=4),
                    4.5, 99 ** 0.5 / 12 ** 0.5, 0.1),
    "generator": (lambda i: GENERATOR.normal([100]), 0.0, 1.0, 0.05),
}


@pytest.mark.parametrize("name", sorted(MOMENTS))
def test_different_draws_have_the_distribution(name):
    tf.random.set_seed(0)
    body, mean, std, tol = MOMENTS[name]
    got = pf.pfor(body, 100, fallback="error").numpy().astype(np.float64)
    assert abs(got.mean() - mean) < tol and abs(got.std() - std) < tol
    # Independent iterations: the per-iteration means vary like means of 100 draws.
    assert abs(got.mean(axis=1).std() - std / 10) < 0.3 * std / 10


small_dims = st.lists(st.integers(0, 3), max_size=2)


@given(data=st.data(), kind=st.sampled_from(["poisson", "gamma", "multinomial"]),
       n=st.integers(0, 4), stacked=st.booleans(), mode=st.sampled_from(["different", "same"]))
def test_parameters_belong_to_their_iterations(data, kind, n, stacked, mode):
    """Per-iteration (or shared) rates and logits: rates are 0 or 100 and logits put all
    mass on one class, so each sample shows which parameter it was drawn with."""
    if stacked and mode == "same":
        mode = "different"  # no shared draw exists for per-iteration parameters
    shape = data.draw(small_dims, "shape")
    if kind == "multinomial":
        batch, classes = data.draw(st.integers(0, 3)), data.draw(st.integers(1, 3))
        picks = data.draw(st.lists(st.integers(0, classes - 1), min_size=n * batch,
                                   max_size=n * batch))
        picked = np.reshape(np.array(picks, np.int64), [n, batch])
        param = tf.math.log(tf.one_hot(picked, classes) + 1e-30)
        draw = lambda p: tf.random.categorical(p, 3)  # noqa: E731
        expected = picked[:, :, None] * np.ones([1, 1, 3], np.int64)
    else:
        pshape = data.draw(small_dims, "param shape")
        zero = np.reshape(np.array(data.draw(st.lists(
            st.booleans(), min_size=n * int(np.prod(pshape)),
            max_size=n * int(np.prod(pshape)))), bool), [n] + pshape)
        param = tf.constant(np.where(zero, 0.0, 100.0), tf.float32)
        op = tf.random.poisson if kind == "poisson" else tf.random.gamma
        draw = lambda p: op(shape, p)  # noqa: E731
        # Rate 0 gives 0 (poisson) or the smallest positive float (gamma).
        expected = np.broadcast_to(zero.reshape([n] + [1] * len(shape) + pshape),
                                   [n] + shape + pshape)
    if not stacked:  # iteration 0's parameters for all
        if n == 0:
            return
        param, expected = param[0], np.broadcast_to(expected[:1], expected.shape)
    body = (lambda i: draw(tf.gather(param, i))) if stacked else (lambda i: draw(param))
    got = pf.pfor(body, n, randomness=mode, fallback="error").numpy()
    if kind != "multinomial":
        got = got < 1e-30
    np.testing.assert_array_equal(got, expected)


def test_shared_logits_keep_their_batch_rows():
    logits = tf.math.log(tf.one_hot([2, 0, 1], 3) + 1e-30)
    got = pf.pfor(lambda i: tf.random.categorical(logits, 5), 4, fallback="error").numpy()
    np.testing.assert_array_equal(got, np.broadcast_to(np.array([2, 0, 1])[None, :, None],
                                                       [4, 3, 5]))


def test_generator_skips_n_times_as_far():
    gen = tf.random.Generator.from_seed(3)
    reference = tf.random.Generator.from_seed(3)
    pf.pfor(lambda i: gen.uniform([5]), 4, fallback="error")
    for _ in range(4):
        reference.uniform([5])
    np.testing.assert_array_equal(gen.state.numpy(), reference.state.numpy())


def test_constant_seeded_stateless_stays_invariant():
    """A stateless draw with a constant seed is the same in every iteration, also in
    "different" mode (that is what each iteration draws alone)."""
    x = tf.random.stateless_normal([4, 3], seed=[1, 2])
    testing.assert_matches_loop(
        lambda i: tf.gather(x, i) + tf.random.stateless_uniform([3], seed=[5, 6]), 4,
        graph=True)


@pytest.mark.parametrize("fallback", [
    "loop", pytest.param("error", marks=pytest.mark.skipif(
        not _HAS_ASSIGN, reason="no AssignVariableOp converter yet (Keras seed update)"))])
def test_keras_dropout(fallback):
    """Keras 3 Dropout in training mode draws from a SeedGenerator (a variable the body
    reads and advances, feeding stateless ops)."""
    layer = keras.layers.Dropout(0.5)
    x = tf.ones([200, 50])
    body = lambda i: layer(tf.gather(x, i), training=True)  # noqa: E731
    fallbacks = {r.op_type for r in pf.explain(body, 3).fallbacks}
    assert fallbacks <= ({"AssignVariableOp"} if fallback == "loop" else set())
    masks = pf.pfor(body, 200, fallback=fallback).numpy() != 0
    assert abs(masks.mean() - 0.5) < 0.02
    assert _rows_differ(masks)
    same = pf.pfor(body, 5, randomness="same", fallback=fallback).numpy()
    assert all(np.array_equal(row, same[0]) for row in same)
    with pytest.raises(pf.ConversionError, match="randomness='error'"):
        pf.pfor(body, 3, randomness="error", fallback=fallback)


def _stateless(kind, dtype, shape, seed, lo, hi):
    shape = tf.constant(shape, tf.int32)
    if kind == "v2":
        if dtype.is_floating:
            return tf.random.stateless_uniform(shape, seed, dtype=dtype)
        if lo is None:
            return tf.random.stateless_uniform(shape, seed, minval=None, maxval=None,
                                               dtype=dtype)
        return tf.random.stateless_uniform(shape, seed, minval=lo, maxval=hi, dtype=dtype)
    if dtype.is_floating:
        return tf.raw_ops.StatelessRandomUniform(shape=shape, seed=seed, dtype=dtype)
    if lo is None:
        return tf.raw_ops.StatelessRandomUniformFullInt(shape=shape, seed=seed, dtype=dtype)
    return tf.raw_ops.StatelessRandomUniformInt(shape=shape, seed=seed, minval=lo, maxval=hi)


@settings(max_examples=20)  # each example converts and runs a loop (suite time)
@given(data=st.data(), kind=st.sampled_from(["v2", "v1"]),
       dtype=st.sampled_from([tf.float32, tf.float64, tf.int32, tf.int64, tf.uint32,
                              tf.uint64]),
       n=st.integers(0, 4), shape=small_dims, graph=st.booleans())
def test_stateless_per_iteration_seeds_are_exact(data, kind, dtype, n, shape, graph):
    """Per-iteration seeds or bounds: exactly each iteration's own draw, no fallback."""
    seed_stacked = data.draw(st.booleans(), "seed stacked")
    seed_dtype = data.draw(st.sampled_from([tf.int32, tf.int64]), "seed dtype")
    seeds = tf.constant(data.draw(st.lists(st.lists(st.integers(-2**31, 2**31 - 1),
                                                    min_size=2, max_size=2),
                                           min_size=max(n, 1), max_size=max(n, 1))),
                        seed_dtype)
    lo = hi = None
    bounded = dtype in (tf.int32, tf.int64) and data.draw(st.booleans(), "bounded")
    bounds_stacked = bounded and data.draw(st.booleans(), "bounds stacked")
    if bounded:
        big = 2**31 - 1 if dtype == tf.int32 else 2**62
        lo = tf.constant(data.draw(st.lists(st.integers(-big, 0), min_size=max(n, 1),
                                            max_size=max(n, 1))), dtype)
        hi = lo + tf.constant(data.draw(st.lists(st.integers(1, big), min_size=max(n, 1),
                                                 max_size=max(n, 1))), dtype)
    if not (seed_stacked or bounds_stacked):
        seed_stacked = True
    if kind == "v1" and dtype in (tf.uint32, tf.uint64):
        dtype = tf.int64  # the v1 full-range op has no unsigned kernels

    def body(i):
        seed = tf.gather(seeds, i) if seed_stacked else seeds[0]
        row = (lambda v: tf.gather(v, i)) if bounds_stacked else (lambda v: v[0])
        return _stateless(kind, dtype, shape, seed, None if lo is None else row(lo),
                          None if hi is None else row(hi))

    testing.assert_matches_loop(body, n, graph=graph, rtol=0, atol=0)


# Normals match the kernel within a few ulps (its libm logf/sincosf are not TensorFlow's
# ops; see pfor_converters_state.normal): relative tolerances by dtype, and for half one
# subnormal step absolute.
NORMAL_TOLERANCE = {tf.float32: (2e-6, 0.0), tf.float64: (1e-13, 0.0),
                    tf.float16: (2e-3, 6e-8), tf.bfloat16: (1.6e-2, 0.0)}
# Empty, odd and even sizes, partial and full Box-Muller pairs and Philox blocks.
NORMAL_SHAPES = [[], [0], [1], [3], [4, 0], [2, 3], [7], [5, 7], [3, 4]]


def _stateless_normal(kind, truncated, dtype, shape, seed, key, counter):
    if kind == "v2":
        draw = tf.random.stateless_truncated_normal if truncated else tf.random.stateless_normal
        return draw(shape, seed, dtype=dtype)
    if kind == "v1":
        op = tf.raw_ops.StatelessTruncatedNormal if truncated else tf.raw_ops.StatelessRandomNormal
        return op(shape=shape, seed=seed, dtype=dtype)
    op = tf.raw_ops.StatelessTruncatedNormalV2 if truncated else tf.raw_ops.StatelessRandomNormalV2
    return op(shape=shape, key=key, counter=counter, alg=1, dtype=dtype)


@settings(max_examples=15)  # each example converts and runs a loop (suite time)
@given(kind=st.sampled_from(["v2", "v1", "key_counter"]), truncated=st.booleans(),
       dtype=st.sampled_from([tf.float32, tf.float64, tf.float16, tf.bfloat16]),
       n=st.integers(0, 4), shape=st.sampled_from(NORMAL_SHAPES), graph=st.booleans(),
       seed=st.integers(0, 2**32 - 1), key_stacked=st.booleans(), counter_stacked=st.booleans(),
       wrap=st.booleans())
def test_stateless_normals_with_per_iteration_seeds(kind, truncated, dtype, n, shape, graph,
                                                      seed, key_stacked, counter_stacked, wrap):
    """Per-iteration seeds (or keys, counters): each iteration's own normal or truncated
    normal draw, loop-free, within the stated tolerance. ``wrap``: counters whose low
    half overflows after the first block, carrying into the high half."""
    rng = np.random.RandomState(seed)
    rows = max(n, 1)
    seeds = tf.constant(rng.randint(-2**31, 2**31, [rows, 2]), tf.int64)
    keys = tf.constant(rng.randint(0, 2**64 - 1, [rows, 1], np.uint64), tf.uint64)
    counters = rng.randint(0, 2**64 - 1, [rows, 2], np.uint64)
    if wrap:
        counters[:, 0] = np.uint64(2**64 - 1)
    counters = tf.constant(counters, tf.uint64)
    if kind != "key_counter":
        key_stacked = True  # the seed is stacked
    elif not key_stacked:
        counter_stacked = True

    def body(i):
        pick = lambda v, stacked: tf.gather(v, i) if stacked else v[0]  # noqa: E731
        return _stateless_normal(kind, truncated, dtype, tf.constant(shape, tf.int32),
                                 pick(seeds, True), pick(keys, key_stacked),
                                 pick(counters, counter_stacked))

    rtol, atol = NORMAL_TOLERANCE[dtype]
    testing.assert_matches_loop(body, n, graph=graph, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64, tf.float16, tf.bfloat16])
@pytest.mark.parametrize("truncated", [False, True])
@pytest.mark.parametrize("kind", ["v2", "key_counter"])
def test_stateless_normals_large_draws_mostly_bit_exact(dtype, truncated, kind):
    """Many elements per iteration (truncated groups see rejections; per-iteration
    counters carry into their high half midway): within the tolerance, and most elements
    bit-exact, so the tolerance is not hiding a wrong draw."""
    rng = np.random.RandomState(5)
    seeds = tf.constant(rng.randint(-2**31, 2**31, [4, 2]), tf.int64)
    keys = tf.constant(rng.randint(0, 2**64 - 1, [4, 1], np.uint64), tf.uint64)
    counters = rng.randint(0, 2**64 - 1, [4, 2], np.uint64)
    counters[:, 0] = np.uint64(2**64 - 100) - rng.randint(0, 1000, [4]).astype(np.uint64)
    counters = tf.constant(counters, tf.uint64)
    body = lambda i: _stateless_normal(  # noqa: E731
        kind, truncated, dtype, [3, 333], tf.gather(seeds, i), tf.gather(keys, i),
        tf.gather(counters, i))
    rtol, atol = NORMAL_TOLERANCE[dtype]
    got = testing.assert_matches_loop(body, 4, rtol=rtol, atol=atol).numpy()
    exact = got == testing.sequential(body, 4).numpy()
    assert exact.mean() > 0.75
    if truncated:
        assert np.abs(got.astype(np.float64)).max() <= 2.0


@settings(max_examples=15)  # each example converts and runs a loop (suite time)
@given(name=st.sampled_from(["half", "gamma", "parameterized"]),
       n=st.integers(0, 4), offset=st.integers(-5, 5))
def test_stateless_inexact_kinds_fall_back_exactly(name, n, offset):
    """Half-precision uniforms, gammas and parameterized truncated normals
    with per-iteration seeds decline: the fallback loop gives each iteration its own draw
    exactly; fallback="error" raises."""
    draw = {
        "half": lambda s: tf.random.stateless_uniform([3], seed=s, dtype=tf.float16),
        "gamma": lambda s: tf.random.stateless_gamma([3], seed=s, alpha=[1.0, 2.0, 3.0]),
        "parameterized": lambda s: tf.random.stateless_parameterized_truncated_normal(
            [3], s, minvals=-1.0, maxvals=0.5),
    }[name]
    body = lambda i: draw(tf.stack([i + offset, 2 * i]))  # noqa: E731
    got = pf.pfor(body, n, fallback="loop")
    testing.assert_same_results(got, testing.sequential(body, n), rtol=0, atol=0)
    with pytest.raises(pf.ConversionError, match="no bit-exact"):
        pf.pfor(body, 2, fallback="error")


def test_parallel_iterations():
    """Chunks draw independently under "different"."""
    got = pf.pfor(BODIES["normal"], 7, parallel_iterations=3, fallback="error").numpy()
    assert got.shape == (7, 3, 2) and _rows_differ(got)
    same = pf.pfor(BODIES["normal"], 3, parallel_iterations=3, randomness="same").numpy()
    assert all(np.array_equal(row, same[0]) for row in same)


@pytest.mark.parametrize("name", ["uniform", "uniform_int", "normal", "truncated", "gamma",
                                  "poisson", "multinomial"])
@pytest.mark.parametrize("graph", [False, True])
def test_same_across_chunks(name, graph):
    """randomness="same" with parallel_iterations: one draw shared by all chunks (the
    last chunk a smaller one), of the loop's shape and dtype."""
    body = BODIES[name]
    run = lambda: pf.pfor(body, 7, parallel_iterations=3, randomness="same",  # noqa: E731
                          fallback="error")
    got = (tf.function(run)() if graph else run()).numpy()
    expected = body(tf.constant(0))
    assert got.shape == (7,) + tuple(expected.shape)
    assert got.dtype == expected.dtype.as_numpy_dtype
    assert all(np.array_equal(row, got[0]) for row in got)


def test_same_across_chunks_of_a_stateless_draw_seeded_from_a_shared_draw():
    """A stateless draw seeded from a random op's shared draw: every chunk shares that
    draw, so the stateless one too (found by the fuzzer: it raised)."""
    def body(i):
        seed = tf.random.uniform([], minval=-5, maxval=5, dtype=tf.int32)
        return seed, tf.random.stateless_uniform([2], seed=tf.stack([2 * seed, 0]))

    seeds, got = pf.pfor(body, 7, parallel_iterations=3, randomness="same", fallback="error")
    assert got.shape == (7, 2) and seeds.shape == (7,)
    assert all(np.array_equal(row, got[0]) for row in got.numpy())
    want = tf.random.stateless_uniform([2], seed=tf.stack([2 * seeds[0], 0]))
    testing.assert_allclose(got[0], want, rtol=0, atol=0)


@pytest.mark.parametrize("body", [
    lambda i: tf.while_loop(lambda t, a: t < 2,
                            lambda t, a: (t + 1, a + tf.random.uniform([])), (0, 0.))[1],
    BODIES["generator"], BODIES["keras"]], ids=["in-while", "generator", "keras"])
def test_same_across_chunks_without_one_draw(body):
    """Draws with no one draw to share across chunks (in a loop of the body, from state
    the body advances) raise a clear error rather than differ between chunks."""
    with pytest.raises(pf.ConversionError, match="parallel_iterations"):
        pf.pfor(body, 7, parallel_iterations=3, randomness="same")


def test_error_mode_raises_before_declining():
    """A random op that would fall back (per-iteration bounds) still raises."""
    bounds = tf.constant([3, 5, 7])
    body = lambda i: tf.random.uniform([2], maxval=tf.gather(bounds, i),  # noqa: E731
                                       dtype=tf.int32)
    with pytest.raises(pf.ConversionError, match="randomness='error'"):
        pf.pfor(body, 3, randomness="error", fallback="loop")
    got = pf.pfor(body, 3, fallback="loop").numpy()
    assert got.shape == (3, 2) and (got < bounds.numpy()[:, None]).all()
