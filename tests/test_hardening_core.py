"""The core at its edges (issue 17): loops of no iterations, broken converters, packs
that misbehave while loading, the autoload switch, collectives inside control flow."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing

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
