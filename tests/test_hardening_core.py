"""The core at its edges (issue 17): loops of no iterations, broken converters, packs
that misbehave while loading, the autoload switch, collectives inside control flow."""

import os
import re
import subprocess
import sys
import textwrap
import types
import warnings

import numpy as np
import pluggy
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import hookspecs, plugins, testing
from pfor_core.registry import Registry

X = tf.constant(np.random.RandomState(0).randn(4, 3).astype(np.float32))
B = tf.constant([1.0, 2.0, 3.0])
LENS = tf.constant([2, 3, 4, 5])


def _run_script(source: str) -> subprocess.CompletedProcess:
    """Run ``source`` in a fresh interpreter: a crash (a signal) fails the test instead
    of killing pytest."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-c", source], env=env,
                          capture_output=True, text=True, timeout=300)


# -- iters == 0 ------------------------------------------------------------------------
# A while loop with per-iteration trip counts, its result broadcast against a value
# grappler folds to a constant when iters is a static 0: grappler's arithmetic optimizer
# then divides by a dimension of size 0 (SIGFPE), unless no such graph is built.
CRASH_BODY = """
import tensorflow as tf
import pfor_core as pf

LENS = tf.constant([2, 3, 4, 5])

def body(i):
    _, a = tf.while_loop(lambda t, a: t < tf.gather(LENS, i),
                         lambda t, a: (t + 1, a + 1.0), (0, 0.0))
    return a * tf.one_hot(i, 3)
"""


def test_static_and_runtime_zero_do_not_crash_the_process():
    result = _run_script(CRASH_BODY + textwrap.dedent("""
    runs = {
        "eager": lambda: pf.pfor(body, 0, fallback="error"),
        "python 0 in tf.function": tf.function(lambda: pf.pfor(body, 0, fallback="error")),
        "chunked": lambda: pf.pfor(body, 0, fallback="error", parallel_iterations=2),
        "run-time": lambda: tf.function(lambda n: pf.pfor(body, n, fallback="error"))(
            tf.constant(0)),
        # Not static to Python, but grappler folds it to a constant 0.
        "run-time grappler folds": tf.function(lambda: pf.pfor(
            body, tf.reduce_sum(tf.zeros([2], tf.int32)), fallback="error")),
        "run-time chunked": lambda: tf.function(lambda n: pf.pfor(
            body, n, fallback="error", parallel_iterations=2))(tf.constant(0)),
    }
    for name, run in runs.items():
        out = run()
        assert out.shape == (0, 3) and out.dtype == tf.float32, (name, out)
        print("ok", name)
    two = pf.pfor(body, 2, fallback="error").numpy().tolist()
    assert two == [[2.0, 0.0, 0.0], [0.0, 3.0, 0.0]], two
    print("ok", "two")
    """))
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr[-3000:])
    assert result.stdout.count("ok ") == 7, result.stdout


def _graph_of(fn):
    return tf.function(fn, autograph=False).get_concrete_function().graph


def test_static_zero_builds_no_converted_body():
    namespace = {}
    exec(CRASH_BODY, namespace)  # pylint: disable=exec-used
    graph = _graph_of(lambda: pf.pfor(namespace["body"], 0, fallback="error"))
    types = {op.type for op in graph.get_operations()}
    assert not types & {"While", "StatelessWhile", "Mul", "OneHot", "GatherV2"}, types


def test_static_zero_runs_nothing_but_explain_reports_the_conversion():
    def body(i):
        return tf.numpy_function(lambda a: a * 2, [tf.gather(X, i)], tf.float32)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = pf.pfor(body, 0, fallback="error")  # as the loop: nothing runs, nothing fails
    assert out.shape == (0,) and out.dtype == tf.float32
    report = pf.explain(body, 0)
    assert [r.op_type for r in report.fallbacks] == ["PyFunc"]
    assert any(r.op_type == "GatherV2" and r.how == "converter" for r in report.rows)


def _fallback_row(i):
    """A row through an op with no converter whose output has no static shape."""
    y = tf.numpy_function(lambda a: a * 2, [tf.gather(X, i)], tf.float32)
    return tf.ensure_shape(y, [None])


def falls_back_then_adds(i):
    return _fallback_row(i) + B  # [0, 0] + [3] would not broadcast


def falls_back_unknown_dim(i):
    return _fallback_row(i) * 2.0


K = tf.Variable(2)


def unknown_dims(i):  # top_k with a k read from a variable: shape [?]
    return tf.math.top_k(tf.gather(X, i), k=K.read_value()).values


BODIES = [falls_back_then_adds, falls_back_unknown_dim, unknown_dims]


def _expect_empty(out, per_iteration):
    assert out.shape == (0, *per_iteration), out.shape
    assert out.dtype == tf.float32


@pytest.mark.parametrize("body", BODIES, ids=lambda b: b.__name__)
@pytest.mark.parametrize("chunk", [None, 2])
def test_zero_iterations_with_fallbacks_and_unknown_shapes(body, chunk):
    kwargs = dict(fallback="loop", parallel_iterations=chunk)
    per_iteration = {"falls_back_then_adds": (3,), "falls_back_unknown_dim": (0,),
                     "unknown_dims": (0,)}[body.__name__]
    _expect_empty(pf.pfor(body, 0, **kwargs), per_iteration)
    _expect_empty(tf.function(lambda: pf.pfor(body, 0, **kwargs))(), per_iteration)
    runtime = tf.function(lambda n: pf.pfor(body, n, **kwargs))
    _expect_empty(runtime(tf.constant(0)), per_iteration)
    # The same function, on iterations: the loop's values.
    testing.assert_allclose(runtime(tf.constant(3)), testing.sequential(body, 3))


def test_vectorized_map_over_zero_rows():
    def fn(row):
        y = tf.ensure_shape(tf.numpy_function(lambda a: a * 2, [row], tf.float32), [None])
        return y + 1.0

    @tf.function(input_signature=[tf.TensorSpec([None, None])])
    def unknown(x):
        return pf.vectorized_map(fn, x, fallback="loop")

    assert unknown(tf.ones([0, 3])).shape == (0, 0)
    testing.assert_allclose(unknown(X), tf.stack([fn(r) for r in X]))
    assert pf.vectorized_map(fn, tf.ones([0, 3]), fallback="loop").shape == (0, 0)


def test_zero_iterations_of_a_loop_with_per_iteration_trip_counts_and_unknown_shapes():
    def body(x, i):
        xi = tf.gather(x, i)
        _, h = tf.while_loop(lambda t, h: t < tf.gather(LENS, i),
                             lambda t, h: (t + 1, tf.tanh(h + xi) * 2.0 + tf.sin(h)), (0, xi))
        return h

    @tf.function(input_signature=[tf.TensorSpec([None, None])])
    def run(x):
        return pf.pfor(lambda i: body(x, i), tf.shape(x)[0], fallback="error")

    # With no iterations, what the body does not know statically is 0.
    assert run(tf.ones([0, 3])).shape == (0, 0)
    testing.assert_allclose(run(X), testing.sequential(lambda i: body(X, i), 4))


def test_runtime_iters_under_xla_and_in_a_nested_pfor():
    f = tf.function(lambda n: pf.pfor(lambda i: tf.gather(X, i) * 2.0, n, fallback="error"),
                    jit_compile=True)
    testing.assert_allclose(f(tf.constant(4)), X * 2.0)

    @tf.function
    def nested(m):
        return pf.pfor(lambda i: pf.pfor(lambda j: i * j, m, fallback="error"), 3,
                       fallback="error")

    np.testing.assert_array_equal(nested(tf.constant(4)), np.outer(range(3), range(4)))
    assert nested(tf.constant(0)).shape == (3, 0)


# -- broken converters -----------------------------------------------------------------
def exp_rows(i):
    return tf.exp(tf.gather(X, i))


def unconverted(x):
    """An elementwise op no installed pack converts (an identity for debugging gradients)."""
    return tf.raw_ops.DebugGradientIdentity(input=x, name="debug")


def unconverted_rows(i):
    return unconverted(tf.gather(X, i))


@pytest.fixture
def third_party():
    """``add(op_type, fn)`` registers ``fn`` as pack thirdpack 2.0, ahead of every other
    converter; removed afterwards."""
    registry = pf.default_registry()

    def add(op_type, fn, priority=1000):
        registry.add(op_type, fn, priority=priority, pack="thirdpack", version="2.0")

    yield add
    registry.remove_pack("thirdpack")


def _raises(ctx):
    raise ZeroDivisionError("bug in the pack")


BROKEN = {
    "raises": (_raises, "raised ZeroDivisionError: bug in the pack"),
    "dtype": (lambda ctx: pf.Stacked(tensor=tf.cast(ctx.stacked(0), tf.float64)),
              "dtype float64 where the op's output is float32"),
    "shape": (lambda ctx: pf.Stacked(tensor=ctx.stacked(0)[:, :1]),
              r"per-iteration shape \(1,\) where the op's output has shape \(3,\)"),
    "rows": (lambda ctx: pf.Stacked(tensor=tf.concat([ctx.stacked(0)] * 2, 0)),
             "with 8 rows for 4 iterations"),
    "invariant shape": (lambda ctx: pf.Invariant(tensor=ctx.stacked(0)),
                        r"invariant value of per-iteration shape \(4, 3\)"),
    "rank 0": (lambda ctx: pf.Stacked(tensor=tf.reduce_sum(ctx.stacked(0))),
               "rank 0: it has no axis of iterations"),
    "count": (lambda ctx: [pf.Stacked(tensor=ctx.stacked(0))] * 2, "expected 1 layout"),
    "not a list": (lambda ctx: "oops", "returned 'oops' instead of a list"),
    "not a tensor": (lambda ctx: pf.Stacked(tensor=np.zeros([4, 3], np.float32)),
                     "holding a ndarray, not a tensor"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_broken_converter_with_no_other_raises_naming_it(third_party, kind):
    fn, what = BROKEN[kind]
    third_party("DebugGradientIdentity", fn)
    with pytest.raises(pf.ConversionError) as caught:
        pf.pfor(unconverted_rows, 4, fallback="error")
    message = str(caught.value)
    assert "thirdpack 2.0" in message and "DebugGradientIdentity 'debug'" in message, message
    assert getattr(fn, "__qualname__", "") in message
    assert re.search(what, message), message
    assert "falling back" not in message


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_broken_converter_is_reported_once_and_the_op_falls_back(third_party, kind):
    fn, what = BROKEN[kind]
    third_party("DebugGradientIdentity", fn)

    def twice(i):  # two such ops, one in a branch: one report
        row = unconverted_rows(i)
        return tf.cond(tf.constant(True), lambda: unconverted(row), lambda: row)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = pf.pfor(twice, 4, fallback="loop")
    testing.assert_allclose(out, testing.sequential(twice, 4))
    reports = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(reports) == 1, [str(w.message) for w in caught]
    text = str(reports[0].message)
    assert "thirdpack 2.0" in text and "DebugGradientIdentity" in text and re.search(what, text), text
    with pytest.warns(RuntimeWarning, match="thirdpack"):
        rows = [r for r in pf.explain(twice, 4).rows if r.op_type == "DebugGradientIdentity"]
    assert [r.how for r in rows] == ["fallback", "fallback"]


@pytest.mark.parametrize("kind", ["raises", "dtype", "rows"])
@pytest.mark.parametrize("mode", ["error", "loop", "warn"])
def test_broken_converter_yields_to_the_next_one(third_party, kind, mode):
    """A broken third-party converter ahead of the first-party one: the first-party one
    takes the op, in every fallback mode, and the broken one is reported."""
    third_party("Exp", BROKEN[kind][0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = pf.pfor(exp_rows, 4, fallback=mode)
    testing.assert_allclose(out, testing.sequential(exp_rows, 4))
    assert not [w for w in caught if issubclass(w.category, pf.FallbackWarning)]
    (report,) = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert "thirdpack 2.0" in str(report.message)
    with pytest.warns(RuntimeWarning, match="thirdpack"):
        (row,) = [r for r in pf.explain(exp_rows, 4).rows if r.op_type == "Exp"]
    assert row.how == "converter" and row.pack == "pfor-converters-math"


def test_a_declining_converter_is_not_reported(third_party):
    third_party("Exp", lambda ctx: ctx.decline("not mine"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        testing.assert_matches_loop(exp_rows, 4)


# -- packs that misbehave while loading --------------------------------------------------
def _info(name="badpack"):
    return plugins.PackInfo(name=name, version="0.1", entry_point="fake = badpack_hooks",
                            status="loading")


def _module(**hooks):
    return types.SimpleNamespace(**hooks)


def _exit(code=3):
    def hook(*_, **__):
        sys.exit(code)
    return hook


class _Custom(BaseException):
    pass


def _raise_custom(*_, **__):
    raise _Custom("not an Exception")


def _api():
    return pf.CONVERTER_API_VERSION


def _loader(module=None, error=None):
    def load():
        if error is not None:
            raise error
        return module
    return load


STAGES = {
    "import sys.exit": (_loader(error=SystemExit(3)), "import failed: SystemExit"),
    "import BaseException": (_loader(error=_Custom("boom")), "import failed: _Custom"),
    "version sys.exit": (_loader(_module(pfor_converter_api_version=_exit())),
                         "pfor_converter_api_version raised SystemExit"),
    "version BaseException": (_loader(_module(pfor_converter_api_version=_raise_custom)),
                              "pfor_converter_api_version raised _Custom"),
    "register sys.exit": (
        _loader(_module(pfor_converter_api_version=_api,
                        pfor_register_converters=pf.hookimpl(_exit()))),
        "pfor_register_converters raised SystemExit"),
    "register BaseException": (
        _loader(_module(pfor_converter_api_version=_api,
                        pfor_register_converters=pf.hookimpl(_raise_custom))),
        "pfor_register_converters raised _Custom"),
}


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_pack_that_exits_or_raises_a_base_exception_is_isolated(stage):
    load, reason = STAGES[stage]
    registry, info = Registry(), _info()
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    with pytest.warns(RuntimeWarning, match=f"badpack 0.1 was not loaded: {reason}"):
        plugins.load_one(manager, registry, load, info)
    assert info.status == "failed" and reason in info.reason
    assert registry.op_types() == []


def test_keyboard_interrupt_in_a_pack_is_not_swallowed():
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    with pytest.raises(KeyboardInterrupt):
        plugins.load_one(manager, Registry(), _loader(error=KeyboardInterrupt()), _info())


REENTRANT = """
import pfor_core as pf

SEEN = [pf.default_registry()]  # at import, while the packs are loading


@pf.register_converter("ReentrantAtImport")
def convert_at_import(ctx):
    return ctx.decline("test")


@pf.hookimpl
def pfor_converter_api_version():
    return pf.CONVERTER_API_VERSION


@pf.hookimpl
def pfor_register_converters(registry):
    SEEN.append(pf.default_registry())
    registry.add("ReentrantInHook", lambda ctx: ctx.decline("test"))
"""


def test_pack_using_the_registry_while_packs_load(tmp_path, monkeypatch):
    info = tmp_path / "reentrantpack-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: reentrantpack\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[pfor.converters]\nfake = reentrantpack_hooks\n")
    (tmp_path / "reentrantpack_hooks.py").write_text(REENTRANT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("PFOR_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.setattr(plugins, "_DEFAULT", [])  # as in a fresh process
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no pack fails, none is refused
            registry = pf.default_registry()
        module = sys.modules["reentrantpack_hooks"]
        assert plugins._DEFAULT == [registry]  # pylint: disable=protected-access
        assert all(seen is registry for seen in module.SEEN) and len(module.SEEN) == 2
        statuses = {p.name: p.status for p in registry.packs}
        assert set(statuses.values()) == {"loaded"}, statuses
        assert {"ReentrantAtImport", "ReentrantInHook", "MatMul"} <= set(registry.op_types())
    finally:
        sys.modules.pop("reentrantpack_hooks", None)


# -- PFOR_DISABLE_PLUGIN_AUTOLOAD ----------------------------------------------------------
@pytest.mark.parametrize("value, disabled", [
    ("1", True), ("true", True), ("TRUE", True), (" Yes ", True), ("on", True),
    ("0", False), ("false", False), ("No", False), ("OFF", False), ("", False),
    (" ", False)])
def test_autoload_switch_spellings(monkeypatch, value, disabled):
    monkeypatch.setenv("PFOR_DISABLE_PLUGIN_AUTOLOAD", value)
    monkeypatch.setenv("PFOR_PLUGINS", "pfor-converters-math")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        packs = plugins.load_packs(Registry())
    statuses = {p.name: p.status for p in packs}
    assert statuses["pfor-converters-math"] == "loaded"
    assert (statuses["pfor-converters-nn"] == "disabled") is disabled, statuses


def test_autoload_switch_unknown_value_is_named(monkeypatch):
    monkeypatch.setenv("PFOR_DISABLE_PLUGIN_AUTOLOAD", "maybe")
    monkeypatch.setenv("PFOR_PLUGINS", "pfor-converters-math")
    with pytest.warns(RuntimeWarning, match="PFOR_DISABLE_PLUGIN_AUTOLOAD='maybe'"):
        packs = plugins.load_packs(Registry())
    statuses = {p.name: p.status for p in packs}
    assert statuses["pfor-converters-nn"] == "disabled"


# -- collectives inside control flow of the body ----------------------------------------------
FLAG = tf.constant(True)
ROWS = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3))


def _sum_in_invariant_cond(i):
    row = tf.gather(ROWS, i)
    return tf.cond(FLAG, lambda: pf.all_sum(row) + row, lambda: row)


def _gather_in_invariant_case(i):
    row = tf.gather(ROWS, i)
    return tf.switch_case(tf.constant(1), [lambda: row, lambda: pf.all_gather(row)[1] - row])


def test_collective_in_a_cond_with_an_invariant_predicate():
    total = tf.reduce_sum(ROWS, 0)
    want = total + ROWS
    testing.assert_allclose(pf.pfor(_sum_in_invariant_cond, 4, fallback="error"), want)
    graph = tf.function(lambda n: pf.pfor(_sum_in_invariant_cond, n, fallback="error"))
    testing.assert_allclose(graph(tf.constant(4)), want)
    testing.assert_allclose(pf.pfor(_gather_in_invariant_case, 4, fallback="error"),
                            ROWS[1] - ROWS)
    rows = pf.explain(_sum_in_invariant_cond, 4).rows
    assert ("StatelessIf", "converter") in [(r.op_type, r.how) for r in rows]
    assert ("Identity", "collective") in [(r.op_type, r.how) for r in rows]


def _sum_in_stacked_cond(i):
    row = tf.gather(ROWS, i)
    return tf.cond(i > 1, lambda: pf.all_sum(row), lambda: row)


def _sum_in_while(i):
    row = tf.gather(ROWS, i)
    return tf.while_loop(lambda t, a: t < 2, lambda t, a: (t + 1, pf.all_mean(a)), (0, row))[1]


@pytest.mark.parametrize("mode", ["error", "loop"])
def test_collective_in_a_cond_with_a_per_iteration_predicate_raises(mode):
    with pytest.raises(pf.ConversionError, match="predicate differs between iterations") as e:
        pf.pfor(_sum_in_stacked_cond, 4, fallback=mode)
    assert "before the conditional" in str(e.value)
    assert "inside the loop body" not in str(e.value)


def test_collective_in_a_while_loop_raises():
    with pytest.raises(pf.ConversionError, match="pf.all_mean is called inside a "
                       "tf.while_loop") as e:
        pf.pfor(_sum_in_while, 4, fallback="loop")
    assert "after the tf.while_loop" in str(e.value)


def test_collective_in_a_conditional_that_falls_back_raises(monkeypatch):
    """Without a converter for the conditional, the fallback loop would run the
    collective as an identity, one iteration at a time."""
    registry = pf.default_registry()
    monkeypatch.setattr(registry, "candidates", lambda op_type, pattern: () if op_type in (
        "If", "StatelessIf") else Registry.candidates(registry, op_type, pattern))
    with pytest.raises(pf.ConversionError, match="fallback loop.*before the conditional"):
        pf.pfor(_sum_in_invariant_cond, 4, fallback="loop")


def test_collective_outside_a_body_still_says_where_to_call_it():
    with pytest.raises(RuntimeError, match="inside the loop body"):
        pf.all_sum(ROWS)
