"""Which way a loop with per-iteration trip counts runs (masked or the active subset),
that the choice never changes an answer, and that masking never repeats effects."""

from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing
from pfor_controlflow.loops import trip_counts

TRIPS = tf.constant([3, 0, 5, 1, 2])


def _chosen(body, n=5):
    """The strategies the loops of ``pf.pfor(body, n)`` ran with; checks the result."""
    chosen = []

    def spy(name):
        run = getattr(trip_counts, name)
        return lambda *args: chosen.append(name) or run(*args)

    with mock.patch.object(trip_counts, "run_masked", spy("run_masked")), \
            mock.patch.object(trip_counts, "run_subset", spy("run_subset")):
        testing.assert_matches_loop(body, n)
    return chosen


def _loop(step, init):
    def body(i):
        x0 = tf.cast(i, tf.float32) * init
        return tf.while_loop(lambda t, x: t < tf.gather(TRIPS, i), step, (0, x0))[1]
    return body


def test_small_total_body_runs_masked():
    w = tf.constant([[0.5, 0.1], [0.2, 0.3]])
    body = _loop(lambda t, x: (t + 1, tf.tanh(tf.linalg.matvec(w, x)) + 1.0), tf.ones([2]))
    assert _chosen(body) == ["run_masked"]


def _matvec_loop(trips, d, seed=0):
    """``x = tanh(W x)`` on a row of ``d`` floats, iteration i for ``trips[i]`` steps."""
    rng = np.random.default_rng(seed)
    w = tf.constant(rng.normal(size=[d, d]) / np.sqrt(d), tf.float32)
    x0 = tf.constant(rng.normal(size=[len(trips), d]), tf.float32)
    trips = tf.constant(trips, tf.int32)

    def body(i):
        return tf.while_loop(lambda t, x: t < tf.gather(trips, i),
                             lambda t, x: (t + 1, tf.tanh(tf.linalg.matvec(w, x))),
                             (0, tf.gather(x0, i)))[1]
    return body


def _strategy(body, n):
    """The strategy pf.explain reports for the one loop of ``body``, checking the loop's
    result against tf.map_fn (no fallback: fallback="error")."""
    report = pf.explain(body, n)
    assert report.fallbacks == [] and len(report.loops) == 1
    got = tf.function(lambda: pf.pfor(body, n, fallback="error"))()
    want = tf.function(lambda: tf.map_fn(body, tf.range(n), fn_output_signature=tf.float32))()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return report.loops[0].strategy, report.loops[0].reason


_RNG = np.random.default_rng(3)
_UNIFORM = _RNG.integers(1, 101, 512)
_SKEWED = np.where(_RNG.random(512) < 0.9, _RNG.integers(1, 11, 512), _RNG.integers(90, 101, 512))


def test_the_choice_follows_the_utilization():
    """Rows of 8 floats at batch 512: masked while most rows run most steps, compacted
    when most finish early (benchmarks/while_strategies.py measures both)."""
    strategy, reason = _strategy(_matvec_loop(_UNIFORM, 8), 512)
    assert strategy == "masked" and "utilization 0.5" in reason
    assert "known before the loop" in reason
    strategy, reason = _strategy(_matvec_loop(_SKEWED, 8), 512)
    assert strategy == "compacted" and "utilization 0.1" in reason


def test_the_choice_follows_the_body_cost():
    assert _strategy(_matvec_loop(_UNIFORM[:128], 2), 128)[0] == "masked"
    assert _strategy(_matvec_loop(_UNIFORM[:128], 128), 128)[0] == "compacted"


def test_the_choice_follows_the_batch():
    """Few rows: the compacted loop's work per step outweighs running them all."""
    assert _strategy(_matvec_loop(_UNIFORM[:4], 64), 4)[0] == "masked"
    assert _strategy(_matvec_loop(_UNIFORM, 64), 512)[0] == "compacted"


def test_trip_counts_known_only_at_run_time_are_assumed_uniform():
    x0 = tf.ones([6, 3])
    seen = []

    @tf.function
    def run(trips):
        body = lambda i: tf.while_loop(lambda t, x: t < trips[i],  # noqa: E731
                                       lambda t, x: (t + 1, x * 0.5 + 1.0), (0, x0[i]))[1]
        seen.append(pf.explain(body, 6).loops[0])
        return pf.pfor(body, 6, fallback="error")

    trips = np.array([0, 3, 1, 7, 2, 2])
    got = run(tf.constant(trips, tf.int32))
    want = [np.full([3], 2.0 - 0.5 ** k) for k in trips]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert seen[0].strategy == "masked" and "assumed uniform" in seen[0].reason


def test_forced_choices_say_why():
    body = _matvec_loop([3, 0, 5, 1], 4)
    compiled = []

    @tf.function(jit_compile=True)
    def run():
        compiled.append(pf.explain(body, 4).loops[0])
        return pf.pfor(body, 4, fallback="error")

    run()
    assert compiled[0].strategy == "masked" and "XLA" in compiled[0].reason
    seq = tf.reshape(tf.range(25, dtype=tf.float32), [5, 5])

    def reads_past_the_end(i):
        row, steps = tf.gather(seq, i), tf.gather(TRIPS, i)
        return tf.while_loop(lambda t, x: t < steps,
                             lambda t, x: (t + 1, x + tf.gather(row, t)), (0, 0.0))[1]

    entry = pf.explain(reads_past_the_end, 5).loops[0]
    assert entry.strategy == "compacted" and "not total" in entry.reason
    assert "StatelessWhile" in str(pf.explain(reads_past_the_end, 5))


def test_index_past_the_end_for_finished_rows_keeps_the_active_subset():
    """A finished row's step counter equals its length: a gather at it would fail on
    the CPU, so this small body must not run masked."""
    seq = tf.reshape(tf.range(25, dtype=tf.float32), [5, 5])

    def body(i):
        row, steps = tf.gather(seq, i), tf.gather(TRIPS, i)
        return tf.while_loop(lambda t, x: t < steps,
                             lambda t, x: (t + 1, x + tf.gather(row, t)), (0, 0.0))[1]

    assert _chosen(body) == ["run_subset"]


def test_integer_division_by_zero_on_finished_rows_keeps_the_active_subset():
    def body(i):
        steps = tf.gather(TRIPS, i)
        return tf.while_loop(lambda t, x: t < steps,
                             lambda t, x: (t + 1, x + 12 // (steps - t)), (0, 0))[1]

    assert _chosen(body) == ["run_subset"]


def test_float_division_by_zero_is_total():
    def body(i):
        steps = tf.cast(tf.gather(TRIPS, i), tf.float32)
        return tf.while_loop(lambda t, x: t < steps,
                             lambda t, x: (t + 1.0, x + 12.0 / (steps - t)), (0.0, 0.0))[1]

    assert _chosen(body) == ["run_masked"]


def _counting_loop(v):
    def body(i):
        def step(t, h):
            v.assign_add(1.0)
            return t + 1, h + 1.0
        return tf.while_loop(lambda t, h: t < tf.gather(TRIPS, i), step, (0, 0.0))[1]
    return body


def test_effects_happen_once_per_step_of_each_iteration():
    v = tf.Variable(0.0)
    out = pf.pfor(_counting_loop(v), 5, fallback="error")
    np.testing.assert_array_equal(out, [3, 0, 5, 1, 2])
    assert v.numpy() == 11.0  # every iteration's steps, no finished row's extra


def test_effects_in_a_loop_that_must_run_masked_are_a_clear_error():
    v = tf.Variable(0.0)
    compiled = tf.function(lambda: pf.pfor(_counting_loop(v), 5, fallback="error"),
                           jit_compile=True)
    with pytest.raises(pf.ConversionError, match="under XLA.*AssignAddVariableOp"):
        compiled()

    def outer(j):
        return pf.pfor(lambda i: _counting_loop(v)(i) + tf.cast(j, tf.float32), 5,
                       fallback="error")

    with pytest.raises(pf.ConversionError, match="inside an outer pfor.*AssignAddVariableOp"):
        pf.pfor(outer, 2, fallback="error")
    assert v.numpy() == 0.0



def test_trip_counts_of_an_eager_call_being_traced_are_read():
    """pf.vmap traced for an eager call reads the call's trip counts (uniform: masked,
    skewed: compacted, as where they are known before the loop) and keeps that choice
    for the signature; the result is tf.map_fn's."""
    from pfor_controlflow.loops import masking
    rng = np.random.default_rng(4)
    w = tf.constant(rng.normal(size=[8, 8]) / np.sqrt(8), tf.float32)
    x0 = tf.constant(rng.normal(size=[512, 8]), tf.float32)

    def one(x, trips):
        return tf.while_loop(lambda t, x: t < trips,
                             lambda t, x: (t + 1, tf.tanh(tf.linalg.matvec(w, x))), (0, x))[1]
    real = masking._choose  # pylint: disable=protected-access
    for trips, strategy in ((_UNIFORM, True), (_SKEWED, False)):
        seen = []
        with mock.patch.object(masking, "_choose", lambda loop: seen.append(real(loop))
                               or seen[-1]):
            f = pf.vmap(one, fallback="error")
            got = f(x0, tf.constant(trips, tf.int32))
            f(x0, tf.constant(trips[::-1], tf.int32))  # the same signature: not traced
        want = tf.map_fn(lambda a: one(*a), (x0, tf.constant(trips, tf.int32)),
                         fn_output_signature=tf.float32)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        assert f.trace_count == 1 and len({c.reason for c in seen}) == 1, seen
        assert seen[0].masked == strategy and "the first call's trip counts" in seen[0].reason
