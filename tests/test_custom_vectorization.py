"""``@pf.custom_vectorization``: user batched rules for functions pfor cannot see into.

The originals below compute with ``tf.numpy_function`` or ``tf.py_function``, which
have no converter: a test that passes with ``fallback="error"`` therefore ran the
batched implementation. References are plain loops (or the same maths in TF ops).
"""

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing

N = 4


def _np(fn, *args, dtype=tf.float32):
    return tf.numpy_function(fn, list(args), dtype, stateful=False)


# -- a three-argument function: x [3], y [3], s [] -----------------------------------
@pf.custom_vectorization
def axpy(x, y, s):
    out = _np(lambda a, b, c: (a * b + c).astype(np.float32), x, y, s)
    out.set_shape([3])
    return out


SEEN = []  # the ``stacked`` flags the batched implementation received, per test


@axpy.def_vectorized
def axpy_batched(stacked, x, y, s):
    SEEN.append(stacked)
    if stacked[2]:
        s = s[:, None]  # one scalar per iteration, against [n, 3]
    return x * y + s


def _args(combo, seed=0):
    rng = np.random.default_rng(seed)
    shapes = ([3], [3], [])
    return [tf.constant(rng.standard_normal(([N] if st else []) + s).astype(np.float32))
            for s, st in zip(shapes, combo)]


@pytest.mark.parametrize("combo", testing.invariance_combinations(3))
def test_every_stacked_invariant_combination_matches_the_loop(combo):
    args = _args(combo)
    SEEN.clear()
    testing.assert_matches_loop(testing.loop_fn_for(axpy, args, combo), N, graph=True)
    assert SEEN and all(seen == combo for seen in SEEN)


def test_no_stacked_argument_runs_the_original_once():
    x, y, s = _args((False, False, False))
    SEEN.clear()
    got = pf.pfor(lambda i: axpy(x, y, s), N, fallback="error")
    testing.assert_allclose(got, tf.stack([x * y + s] * N))
    assert not SEEN


@pytest.mark.parametrize("where", ["eager", "function", "jit"])
def test_compiled_and_graph_runs(where):
    combo = (True, False, True)
    args = _args(combo, seed=1)
    loop_fn = testing.loop_fn_for(axpy, args, combo)
    run = lambda: pf.pfor(loop_fn, N, fallback="error")  # noqa: E731
    if where != "eager":
        run = tf.function(run, jit_compile=where == "jit", autograph=False)
    testing.assert_same_results(run(), testing.sequential(loop_fn, N))


def test_outside_pfor_the_original_runs():
    x, y, s = _args((True, True, True), seed=2)
    want = x * y + s[:, None]
    SEEN.clear()
    eager = tf.stack([axpy(x[k], y[k], s[k]) for k in range(N)])
    in_function = tf.function(lambda: tf.stack([axpy(x[k], y[k], s[k]) for k in range(N)]))()
    mapped = tf.map_fn(lambda e: axpy(*e), (x, y, s), fn_output_signature=tf.float32)

    def body(k, acc):
        return k + 1, acc.write(k, axpy(x[k], y[k], s[k]))

    _, acc = tf.while_loop(lambda k, _: k < N, body,
                           (0, tf.TensorArray(tf.float32, size=N)))
    looped = tf.function(lambda: tf.while_loop(
        lambda k, _: k < N, body, (0, tf.TensorArray(tf.float32, size=N)))[1].stack())()
    for got in (eager, in_function, mapped, acc.stack(), looped):
        testing.assert_allclose(got, want)
    assert not SEEN, "the batched implementation ran outside pfor"


def test_the_call_is_a_named_function_call_outside_pfor():
    x, y, s = _args((False, False, False))
    graph = tf.function(lambda: axpy(x, y, s)).get_concrete_function().graph
    calls = [op for op in graph.get_operations() if op.type.endswith("PartitionedCall")]
    assert [op.get_attr("f").name.startswith("__inference_pfor_custom_axpy") for op in calls] \
        == [True]


def test_vectorized_map_and_vmap():
    combo = (True, False, True)
    x, y, s = _args(combo, seed=3)
    want = x * y + s[:, None]
    got = pf.vectorized_map(lambda e: axpy(e[0], y, e[1]), (x, s), fallback="error")
    testing.assert_allclose(got, want)
    testing.assert_allclose(pf.vmap(axpy, in_axes=(0, None, 0), fallback="error")(x, y, s),
                            want)


def test_explain_shows_the_custom_rule():
    x, y, s = _args((True, False, False))
    report = pf.explain(lambda i: axpy(tf.gather(x, i), y, s), N)
    custom = [r for r in report.rows if r.how == "custom"]
    assert [r.converter for r in custom] == ["custom_vectorization(axpy)"]
    assert custom[0].stacked and not report.fallbacks
    assert "custom_vectorization(axpy)" in str(report)


# -- nested arguments and outputs -----------------------------------------------------
@pf.custom_vectorization
def stats(pair, scale):
    a, b = pair
    total = _np(lambda u, v, k: ((u + v) * k).astype(np.float32), a, b, scale["k"])
    total.set_shape([2])
    count = tf.size(a)
    return {"total": total, "parts": (a * 2.0, [count])}


@stats.def_vectorized
def stats_batched(stacked, pair, scale):
    (sa, sb), ss = stacked
    a, b = pair
    k = scale["k"][:, None] if ss["k"] else scale["k"]
    n = tf.shape(next(t for t, st in ((a, sa), (b, sb), (scale["k"], ss["k"])) if st))[0]
    twice = a * 2.0 if sa else tf.broadcast_to(a * 2.0, tf.concat([[n], tf.shape(a)], 0))
    count = tf.fill([n], tf.shape(a)[-1])
    return {"total": (a + b) * k, "parts": (twice, [count])}


@pytest.mark.parametrize("combo", testing.invariance_combinations(3))
def test_nested_arguments_and_outputs(combo):
    rng = np.random.default_rng(5)
    a, b, k = [tf.constant(rng.standard_normal(([N] if st else []) + s).astype(np.float32))
               for s, st in zip(([2], [2], []), combo)]
    pick = lambda t, st, i: tf.gather(t, i) if st else t  # noqa: E731

    def body(i):
        return stats((pick(a, combo[0], i), pick(b, combo[1], i)), {"k": pick(k, combo[2], i)})

    testing.assert_matches_loop(body, N, graph=True)


# -- gradients ------------------------------------------------------------------------
def _reference(x, w):
    return tf.sin(x) * w


@pf.custom_vectorization
def wave(x, w):
    out = tf.py_function(lambda a, b: tf.sin(a) * b, [x, w], tf.float32)
    out.set_shape(x.shape)
    return out


@wave.def_vectorized
def wave_batched(stacked, x, w):
    return tf.sin(x) * w  # w broadcasts whether it is [3] or [n, 3]


def _xw(seed=7):
    rng = np.random.default_rng(seed)
    return (tf.constant(rng.standard_normal([3]).astype(np.float32)),
            tf.constant(rng.standard_normal([3]).astype(np.float32)))


def test_gradient_outside_pfor_is_the_originals():
    x, w = _xw()
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, w])
        y = wave(x, w)
        z = _reference(x, w)
    for got, want in zip(tape.gradient(y, [x, w]), tape.gradient(z, [x, w])):
        testing.assert_allclose(got, want)

    @tf.function
    def in_function(x, w):
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.reduce_sum(wave(x, w) ** 2)
        return t.gradient(y, x)

    with tf.GradientTape() as t:
        t.watch(x)
        z = tf.reduce_sum(_reference(x, w) ** 2)
    testing.assert_allclose(in_function(x, w), t.gradient(z, x))


@pf.custom_vectorization
def smooth(x, w):
    return tf.sin(x) * w  # stateless and twice differentiable: forward mode, hessians


@smooth.def_vectorized
def smooth_batched(stacked, x, w):
    return tf.sin(x) * w


@pytest.mark.parametrize("fn, mode", [(wave, "reverse"), (smooth, "reverse"), (smooth, "auto")])
def test_jacobian_through_the_batched_implementation(fn, mode):
    x, w = _xw()
    for k, source in enumerate((x, w)):
        def call(fn, s):
            return fn(s, w) if k == 0 else fn(x, s)

        with tf.GradientTape(persistent=True) as tape:
            tape.watch(source)
            want = tape.jacobian(call(_reference, source), source, experimental_use_pfor=False)
        got = pf.jacobian(lambda s: call(fn, s), source, fallback="error", mode=mode)
        testing.assert_allclose(got, want)


def test_forward_mode_is_refused_not_zero():
    # TensorFlow's forward mode has no JVP through a custom gradient in a graph.
    x, w = _xw()
    with pytest.raises(ValueError, match="custom_vectorization function.*smooth.*reverse"):
        pf.jacobian(lambda x: smooth(x, w), x, fallback="error", mode="forward")


def test_hessian_through_the_batched_implementation():
    x, w = _xw()
    got = pf.hessian(lambda x: tf.reduce_sum(smooth(x, w) ** 2), x, fallback="error")
    want = pf.hessian(lambda x: tf.reduce_sum(_reference(x, w) ** 2), x, fallback="error")
    testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    rows = tf.stack([x, 2 * x])

    def body(i):
        with tf.GradientTape() as tape:
            xi = tf.gather(rows, i)
            tape.watch(xi)
            y = tf.reduce_sum(smooth(xi, w))
        return y, tape.gradient(y, xi)

    report = pf.explain(body, 2)
    assert [r.converter for r in report.rows if r.how == "custom"] == [
        "custom_vectorization(smooth)", "custom_vectorization(vjp_of_smooth)"]
    assert not report.fallbacks


def test_per_example_gradients_match_the_loop():
    rng = np.random.default_rng(8)
    batch = tf.constant(rng.standard_normal([N, 3]).astype(np.float32))
    v = tf.Variable(rng.standard_normal([3]).astype(np.float32))
    got = pf.per_example_gradients(lambda xi: tf.reduce_sum(wave(xi, v) ** 2), [v], batch,
                                   fallback="error")
    want = []
    for k in range(N):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(_reference(batch[k], v) ** 2)
        want.append(tape.gradient(loss, v))
    testing.assert_allclose(got[0], tf.stack(want))


def test_variables_read_inside_use_the_originals_gradient():
    rng = np.random.default_rng(9)
    batch = tf.constant(rng.standard_normal([N, 3]).astype(np.float32))
    v = tf.Variable(rng.standard_normal([3]).astype(np.float32))

    @pf.custom_vectorization
    def scaled(x):
        return tf.sin(x) * v

    @scaled.def_vectorized
    def scaled_batched(stacked, x):
        return tf.sin(x) * v

    got = pf.per_example_gradients(lambda xi: tf.reduce_sum(scaled(xi) ** 2), [v], batch,
                                   fallback="error")
    want = []
    for k in range(N):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(scaled(batch[k]) ** 2)
        want.append(tape.gradient(loss, v))
    testing.assert_allclose(got[0], tf.stack(want), rtol=1e-5)


# -- bad batched implementations ------------------------------------------------------
def _bad(batched):
    @pf.custom_vectorization
    def original(x):
        out = _np(lambda a: (a * 2).astype(np.float32), x)
        out.set_shape([3])
        return out

    if batched is not None:
        original.def_vectorized(batched)
    return original


X = tf.constant(np.arange(12, dtype=np.float32).reshape(N, 3))


@pytest.mark.parametrize("batched, match", [
    (lambda st, x: tf.cast(x, tf.float64), "dtype float64, the original returns float32"),
    (lambda st, x: x[:, :2], r"shape \(4, 2\).*per-iteration shape \(3,\)"),
    (lambda st, x: x[0], "shape"),
    (lambda st, x: x[:2], "2 rows; the loop has 4 iterations"),
    (lambda st, x: (x, x), "structure unlike the original's"),
    (lambda st, x: "nonsense", "dtype string"),
    (None, "no batched implementation.*def_vectorized"),
])
def test_bad_batched_results_are_clear_errors(batched, match):
    fn = _bad(batched)
    with pytest.raises(pf.ConversionError, match=match) as err:
        pf.pfor(lambda i: fn(tf.gather(X, i)), N, fallback="loop")
    assert "original" in str(err.value)  # names the function


def test_wrong_row_count_known_only_at_run_time():
    fn = _bad(lambda st, x: x[:-1])
    run = tf.function(lambda n: pf.pfor(lambda i: fn(tf.gather(X, i)), n), autograph=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match="one row per iteration"):
        run(tf.constant(N))


def test_closing_over_a_per_iteration_value_is_an_error():
    def body(i):
        row = tf.gather(X, i)

        @pf.custom_vectorization
        def shifted(x):
            return x + row

        shifted.def_vectorized(lambda st, x: x + row)
        return shifted(tf.ones([3]) * tf.cast(i, tf.float32))

    with pytest.raises(pf.ConversionError, match="shifted closes over a value that differs"):
        pf.pfor(body, N, fallback="loop")


def test_bad_arguments():
    with pytest.raises(TypeError, match="positionally"):
        axpy(x=tf.ones([3]), y=tf.ones([3]), s=1.0)
    with pytest.raises(TypeError, match="axpy .*was passed a object"):
        axpy(object(), tf.ones([3]), 1.0)
    with pytest.raises(TypeError, match="needs a callable"):
        pf.custom_vectorization(3)
    with pytest.raises(TypeError, match="def_vectorized needs a callable"):
        axpy.def_vectorized("nope")


@pytest.mark.parametrize("where", ["tf.function", "tf.cond", "tf.while_loop"])
def test_calls_nested_in_functions_and_control_flow(where):
    combo = (True, False, True)
    x, y, s = _args(combo, seed=11)
    inner = tf.function(lambda a, c: axpy(a, y, c))

    def body(i):
        a, c = tf.gather(x, i), tf.gather(s, i)
        if where == "tf.function":
            return inner(a, c)
        if where == "tf.cond":
            return tf.cond(c > 0, lambda: axpy(a, y, c), lambda: -axpy(a, y, c))
        return tf.while_loop(lambda k, v: k < 2, lambda k, v: (k + 1, axpy(v, y, c)),
                             (0, a))[1]

    SEEN.clear()
    testing.assert_matches_loop(body, N)
    assert SEEN
