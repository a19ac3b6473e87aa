"""Slices with one stacked bound (``x[b:4]``, ``x[1:e]``) and their gradients: the
sizes differ between iterations unless the stacked bound is the same in every one, so
slicing/strided_slice.py makes them ragged values; here the bounds are stacked yet equal per
row, so the body's result has one shape. The gradient takes a ragged ``dy`` (another
slice with the same bounds), which StridedSliceGrad places at each begin."""

import pytest
import tensorflow as tf

from pfor_core import testing

X = tf.reshape(tf.range(24.0), [6, 4])
W = tf.reshape(tf.range(24.0) * 0.5 - 3.0, [6, 4])
STARTS = tf.constant([1, 1, 1])  # stacked (read by row), the same in every iteration
ENDS = tf.constant([5, 5, 5])


def _window(x, i, which):
    if which == "start":
        return x[tf.gather(STARTS, i):5]
    return x[1:tf.gather(ENDS, i)]


@pytest.mark.parametrize("which", ["start", "end"])
def test_window_with_one_stacked_bound(which):
    testing.assert_matches_loop(lambda i: _window(X, i, which), 3, graph=True)


@pytest.mark.parametrize("which", ["start", "end"])
def test_gradient_of_a_window_with_one_stacked_bound(which):
    def body(i):
        with tf.GradientTape() as tape:
            tape.watch(X)
            window = _window(X, i, which)
        return tape.gradient(window, X, output_gradients=_window(W, i, which))

    testing.assert_matches_loop(body, 3, graph=True)


@pytest.mark.parametrize("which", ["start", "end"])
def test_strided_slice_grad_of_a_stacked_dy_with_one_stacked_bound(which):
    """slicing/slice_grads.py's gradient of a window: one stacked bound, equal per row, and a dy of
    the window's static shape (stacked, not ragged)."""
    dys = tf.reshape(tf.range(48.0), [3, 4, 4])

    def body(i):
        begin = tf.stack([tf.gather(STARTS, i)]) if which == "start" else tf.constant([1])
        end = tf.constant([5]) if which == "start" else tf.stack([tf.gather(ENDS, i)])
        return tf.raw_ops.StridedSliceGrad(shape=[6, 4], begin=begin, end=end, strides=[1],
                                           dy=tf.gather(dys, i))

    testing.assert_matches_loop(body, 3, graph=True)
