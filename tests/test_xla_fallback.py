"""The fallback under XLA (jit_compile=True): a body that compiles as a plain loop over
the iterations compiles through pfor when ops fall back, also ops that need
compile-time inputs (tf.range's bounds, tf.math.bincount's size); where the fallback
cannot be compiled, a pf.ConversionError names the op. Against the loop."""

import warnings

import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing, unrolled

STARTS = tf.constant([0, 2, 5, 1])
X = tf.constant([[0, 1, 1], [2, 3, 3], [1, 1, 1], [0, 0, 3]])
SIZES = tf.constant([5, 5, 5, 5])

BODIES = {
    # Range with per-iteration bounds: its converter declines under XLA (the lengths
    # have no static bound).
    "range": lambda i: tf.range(tf.gather(STARTS, i), tf.gather(STARTS, i) + 3),
    # DenseBincount: its size must be known when XLA compiles (a per-iteration size here,
    # the same in every iteration; minlength == maxlength would prove it one size).
    "bincount": lambda i: tf.raw_ops.DenseBincount(
        input=tf.gather(X, i), size=tf.gather(SIZES, i), weights=tf.constant([], tf.int32)),
    # Both, and a converted op reading the fallback's result.
    "both": lambda i: tf.math.bincount(
        tf.range(tf.gather(STARTS, i), tf.gather(STARTS, i) + 2), minlength=8,
        maxlength=8) * 2,
}


def _compiled_pfor(body, n, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.FallbackWarning)
        return tf.function(lambda: pf.pfor(body, n, fallback="loop", **kwargs),
                           jit_compile=True)()


@pytest.mark.parametrize("name", sorted(BODIES))
def test_fallback_ops_that_need_constants_compile(name):
    body = BODIES[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", pf.FallbackWarning)
        tf.function(lambda: pf.pfor(body, 4, fallback="warn"), jit_compile=True)()
    assert any(issubclass(w.category, pf.FallbackWarning) for w in caught), (
        "the body must exercise the fallback")
    tf.function(lambda: testing.sequential(body, 4), jit_compile=True)()  # the plain loop compiles
    testing.assert_same_results(_compiled_pfor(body, 4), testing.sequential(body, 4))


def test_gradients_through_the_fallback_under_xla():
    """FakeQuantWithMinMaxArgs (no converter) per iteration, differentiated outside
    pfor."""
    def loss(vi):
        quantized = tf.quantization.fake_quant_with_min_max_args(tf.gather(vi * 2.0, [2, 0]))
        return tf.reduce_sum(quantized * vi[1]) ** 2

    def gradient(v, vectorized):
        with tf.GradientTape() as tape:
            tape.watch(v)
            if vectorized:
                rows = pf.pfor(lambda i: loss(tf.gather(v, i)), 4, fallback="loop")
            else:
                rows = tf.stack([loss(v[j]) for j in range(4)])
            total = tf.reduce_sum(rows * tf.range(1.0, 5.0))
        return tape.gradient(total, v)

    v = tf.random.stateless_normal([4, 3], seed=[1, 2])
    assert [r.op_type for r in pf.explain(lambda i: loss(tf.gather(v, i)), 4).fallbacks] == [
        "FakeQuantWithMinMaxArgs"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.FallbackWarning)
        got = tf.function(lambda v: gradient(v, True), jit_compile=True)(v)
    testing.assert_allclose(got, gradient(v, False))


def test_more_iterations_than_unrolled_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(unrolled, "UNROLL_LIMIT", 3)
    with pytest.raises(pf.ConversionError, match="Range 'range'.*XLA.*at most 3"):
        _compiled_pfor(BODIES["range"], 4)


def test_iterations_known_only_at_run_time_is_a_clear_error():
    body = BODIES["bincount"]

    @tf.function(jit_compile=True)
    def run(n):
        return pf.pfor(body, n, fallback="loop")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.FallbackWarning)
        with pytest.raises(pf.ConversionError, match="DenseBincount.*known only at run time"):
            run(tf.constant(4))


def test_other_ops_keep_the_loop_beyond_the_limit(monkeypatch):
    """An op that needs no compile-time input still falls back to the while loop."""
    monkeypatch.setattr(unrolled, "UNROLL_LIMIT", 2)

    def body(i):
        return tf.raw_ops.Gather(params=tf.cast(tf.gather(X, i), tf.float32), indices=[1])

    testing.assert_same_results(_compiled_pfor(body, 4), testing.sequential(body, 4))
