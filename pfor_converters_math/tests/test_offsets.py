"""Windows at per-iteration offsets against the loop, with no fallback: slices with
stacked bounds of one size, their gradients (StridedSliceGrad with a stacked begin),
and Pad with stacked paddings (Slice's gradient); per-example gradients through
``x[i]``, ``x[i:i + k]`` and ``tf.slice`` of a captured tensor and of a variable."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, strategies as st

import pfor_core as pf
from pfor_core import testing

N = 4


def _x(shape, seed=0):
    return tf.constant(np.random.default_rng(seed).normal(size=shape), tf.float32)


def _gradient_body(slice_fn, source):
    def body(i):
        with tf.GradientTape() as tape:
            tape.watch(source)
            y = tf.reduce_sum(tf.sin(slice_fn(source, i)) ** 2)
        return tape.gradient(y, source)
    return body


SLICES = {
    "x[i]": lambda s, i: s[i],
    "x[-i - 1]": lambda s, i: s[-i - 1],
    "x[i, 1:]": lambda s, i: s[i, 1:],
    "x[:, i]": lambda s, i: s[:, i % 3],
    "x[i:i + 2]": lambda s, i: s[i:i + 2],
    "x[i:i + 1, :2]": lambda s, i: s[i:i + 1, :2],
    "x[1:3, i % 2:i % 2 + 2]": lambda s, i: s[1:3, i % 2:i % 2 + 2],
    "x[-i - 2:5 - i]": lambda s, i: s[-i - 2:5 - i],
    "tf.slice": lambda s, i: tf.slice(s, [i, 0, 1], [2, 4, 2]),
}


@pytest.mark.parametrize("name", sorted(SLICES))
def test_slices_with_stacked_bounds(name):
    x = _x([6, 4, 3])
    testing.assert_matches_loop(lambda i: SLICES[name](x, i), N, graph=True)


@pytest.mark.parametrize("name", sorted(SLICES))
def test_gradients_of_slices_with_stacked_bounds(name):
    x = _x([6, 4, 3])
    testing.assert_matches_loop(_gradient_body(SLICES[name], x), N, graph=True)


def test_per_example_gradients_through_indexing_a_variable():
    table = tf.Variable(_x([5, 3]))
    xs = _x([N, 3], seed=1)
    ids = tf.constant([3, 0, 2, 0])

    def loss(x, k):
        return tf.reduce_sum((table[k[0]] * x) ** 2) + tf.reduce_sum(table[k[0]:k[0] + 2])

    got = pf.per_example_gradients(loss, [table], xs, ids[:, None], fallback="error")[0]
    want = []
    for b in range(N):
        with tf.GradientTape() as tape:
            y = loss(xs[b], ids[b:b + 1])
        want.append(tape.gradient(y, table))
    testing.assert_allclose(got, tf.stack(want))


@given(rows=st.integers(3, 6), cols=st.integers(1, 4), window=st.integers(0, 3),
       stacked_x=st.booleans(), seed=st.integers(0, 2**16))
def test_windows_property(rows, cols, window, stacked_x, seed):
    rng = np.random.default_rng(seed)
    window = min(window, rows)
    starts = tf.constant(rng.integers(0, rows - window + 1, size=N), tf.int32)
    xs = _x([N, rows, cols], seed)
    x = xs[0]

    def body(i):
        source = tf.gather(xs, i) if stacked_x else x
        start = tf.gather(starts, i)
        return source[start:start + window]

    def window_of(source, i):
        start = tf.gather(starts, i)
        return source[start:start + window]

    testing.assert_matches_loop(body, N)
    testing.assert_matches_loop(_gradient_body(window_of, x), N)


@given(before=st.lists(st.integers(0, 3), min_size=N, max_size=N), total=st.integers(3, 5),
       fill=st.sampled_from([None, 7.0]), stacked_x=st.booleans(), seed=st.integers(0, 99))
def test_pad_with_stacked_paddings(before, total, fill, stacked_x, seed):
    pads = tf.constant([[b, total - b] for b in before], tf.int32)
    xs = _x([N, 2, 3], seed)

    def body(i):
        source = tf.gather(xs, i) if stacked_x else xs[0]
        paddings = tf.stack([tf.gather(pads, i), tf.constant([1, 0])])
        if fill is None:
            return tf.pad(source, paddings)
        return tf.pad(source, paddings, constant_values=fill)

    testing.assert_matches_loop(body, N, graph=True)


def test_windows_of_different_sizes_are_a_clear_error():
    """A window of one size that the end of the axis clips in some iterations: the
    loop's outputs would differ in shape, an error naming the output. (Bounds that are not
    provably one size apart make ragged values: test_slicing.py.)"""
    x = _x([6, 3])
    with pytest.raises(ValueError, match="different shapes in different iterations"):
        pf.pfor(lambda i: x[i + 3:i + 6], N, fallback="error")
    pads = tf.constant([[0, 1], [2, 2]])
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError),
                       match="different sizes in different iterations"):
        pf.pfor(lambda i: tf.pad(x[0], [tf.gather(pads, i)]), 2, fallback="error")
