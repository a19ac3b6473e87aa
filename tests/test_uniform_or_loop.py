"""Windows ``x[i:i + k]`` clipped at the end of their axis (ragged values marked
usually uniform) reaching an op with no converter for ragged values (issue 15, section
4): where the fallback loop may run, the result is the loop's, by the converted op when
all windows have one size and by the loop otherwise; ``fallback="error"`` keeps the
run-time check and its message."""

import warnings

import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core.testing import assert_allclose
from pfor_core import testing

SIGNAL = tf.reshape(tf.sin(tf.range(30, dtype=tf.float32)), [10, 3])
FILTERS = tf.reshape(tf.cos(tf.range(24, dtype=tf.float32)), [2, 3, 4])
WINDOW = 4


def conv_of_window(i):
    window = SIGNAL[i:i + WINDOW]  # 4 rows, fewer from row 7 on
    return tf.nn.conv1d(window[None], FILTERS, 1, "VALID")[0]


def summed(i):
    return tf.reduce_sum(conv_of_window(i) ** 2, axis=0)


# 9 iterations: the last windows hold 3 and 2 rows; 7: every window holds 4.
@pytest.mark.parametrize("n", [9, 7])
def test_clipped_windows_reach_an_op_without_ragged_converters(n):
    testing.assert_matches_loop(summed, n, modes=testing.RUN_MODES, fallback="loop")
    testing.assert_matches_loop(conv_of_window, n, modes=testing.RUN_MODES, fallback="loop",
                                ragged=True)


def test_the_op_is_reported_as_a_fallback():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = pf.pfor(summed, 9, fallback="warn")
    reported = [str(w.message) for w in caught if issubclass(w.category, pf.FallbackWarning)]
    assert any("Conv2D" in text and "converted when they agree at run time" in text
               for text in reported), reported
    assert_allclose(got, tf.stack([summed(tf.constant(i)) for i in range(9)]))
    assert "Conv2D" in [row.op_type for row in pf.explain(summed, 9).fallbacks]


def test_gradients_through_clipped_windows():
    def loss_of(filters):
        def body(i):
            window = SIGNAL[i:i + WINDOW]
            return tf.reduce_sum(tf.nn.conv1d(window[None], filters, 1, "VALID") ** 2)
        return body

    filters = tf.Variable(FILTERS)
    with tf.GradientTape() as tape:
        got = tf.reduce_sum(pf.pfor(loss_of(filters), 9, fallback="loop"))
    with tf.GradientTape() as loop_tape:
        want = tf.add_n([loss_of(filters)(tf.constant(i)) for i in range(9)])
    assert_allclose(got, want)
    assert_allclose(tape.gradient(got, filters), loop_tape.gradient(want, filters),
                    rtol=1e-4, atol=1e-4)


def test_without_the_loop_the_shapes_are_checked_when_it_runs():
    run = tf.function(lambda k: pf.pfor(summed, k, fallback="error"), autograph=False)
    assert_allclose(run(tf.constant(7)), tf.stack([summed(tf.constant(i)) for i in range(7)]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="clipped at the end"):
        run(tf.constant(9))
