"""Loops with per-iteration trip counts, some rows running no step, compiled by XLA:
under ``jit_compile=True`` (the masked loop) and in a ``jit_scope`` (the active subset,
whose ops XLA clusters; with auto-clustering on, the clusters reach the merge of the
finished rows' values after the loop), against the loop, without fallback."""

from unittest import mock

import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing
from pfor_controlflow.loops import masking

# With TensorFlow's graph optimizer off altogether (no single pass of it matters), the
# loop counters of the active-subset runner in a jit_scope come out as zeros: kept
# optimized, as users run, until that is understood.
pytestmark = pytest.mark.grappler

N, STEPS, WIDTH = 3, 5, 4
X = tf.random.stateless_normal([N, STEPS, WIDTH], seed=[7, 1])
# One row running no step, every row running none, and every row running some.
LENGTHS = [[4, 0, 2], [0, 0, 0], [1, 3, 2]]


def _body(lengths, x):
    def body(i):
        n = tf.gather(lengths, i)
        scalar = tf.while_loop(lambda t, h: t < n,
                               lambda t, h: (t + 1, tf.tanh(h + x[i, t, 0])), (0, 0.0))[1]
        # A vector state, the step counter and a TensorArray written each step.
        written = tf.TensorArray(tf.float32, size=STEPS, element_shape=[WIDTH])

        def step(t, h, written):
            h = tf.tanh(0.5 * h + x[i, t])
            return t + 1, h, written.write(t, h)

        t, h, written = tf.while_loop(lambda t, h, w: t < n, step,
                                      (0, tf.ones([WIDTH]), written))
        return scalar, t, h, written.stack()
    return body


@pytest.fixture
def autoclustering():
    """XLA auto-clustering on for the test (as TF_XLA_FLAGS=--tf_xla_auto_jit would)."""
    before = tf.config.optimizer.get_jit()
    tf.config.optimizer.set_jit("autoclustering")
    yield
    tf.config.optimizer.set_jit(before or False)


def _compiled(lengths, compile_all):
    """pf.pfor of the body in a tf.function, the lengths and inputs its arguments:
    all compiled (``jit_compile``) or in a ``jit_scope``."""
    def run(lengths, x):
        if compile_all:
            return pf.pfor(_body(lengths, x), N, fallback="error")
        with tf.xla.experimental.jit_scope():
            return pf.pfor(_body(lengths, x), N, fallback="error")
    return tf.function(run, jit_compile=compile_all)(tf.constant(lengths), X)


@pytest.mark.parametrize("lengths", LENGTHS)
def test_jit_compile(lengths):
    expected = testing.sequential(_body(tf.constant(lengths), X), N)
    testing.assert_same_results(_compiled(lengths, True), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lengths", LENGTHS)
@pytest.mark.parametrize("clustering, masked", [("scope", False), ("auto", False),
                                                ("auto", True)])
def test_jit_scope(request, clustering, masked, lengths):
    """The loops on the active subset (masked: as masking.pays may choose for small
    bodies), in a jit_scope alone and with auto-clustering on."""
    if clustering == "auto":
        request.getfixturevalue("autoclustering")
    expected = testing.sequential(_body(tf.constant(lengths), X), N)
    with mock.patch.object(masking, "pays", lambda loop: masked):
        got = _compiled(lengths, False)
    testing.assert_same_results(got, expected, rtol=1e-5, atol=1e-6)


def test_tensor_array_of_dynamic_size_is_a_clear_error_under_jit_compile():
    """Each row's list would grow to its own length, a resize XLA cannot compile."""
    def body(i):
        n = tf.gather(tf.constant([2, 0, 3]), i)
        grown = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[WIDTH])
        grown = tf.while_loop(lambda t, a: t < n, lambda t, a: (t + 1, a.write(t, X[i, t])),
                              (0, grown))[1]
        return grown.stack()

    compiled = tf.function(lambda: pf.pfor(body, N, fallback="error"), jit_compile=True)
    with pytest.raises(pf.ConversionError, match="TensorArray of dynamic size.*jit_compile"):
        compiled()
