"""Property tests of the reshape-like converters (Reshape, Transpose, ExpandDims, Squeeze)
against the sequential loop.

Every check runs with fallback="error", so passing also means nothing fell back.
Stacked arguments carry one row per iteration; invariant ones are shared. Ragged values
(x[:n_i]): a reshape flattening a varying dimension with others, and one across the
varying dimension, which falls back.
"""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing


ITERS = st.sampled_from([0, 1, 2, 3])
DIMS = st.lists(st.integers(0, 4), max_size=4)


# Modes for testing.check: eager, or inside a tf.function whose inputs have unknown
# dims and values (the converters' dynamic paths).
EAGER, EAGER_OR_UNKNOWN = ("eager",), ("eager", "unknown_shapes")


def arg(rng, shape, stacked, n, dtype=np.float32):
    return testing.random_values(rng, ([n] if stacked else []) + list(shape), dtype)


def rows(value, n):
    """A stacked argument whose every row is ``value`` (stacked, yet the same)."""
    return np.broadcast_to(np.asarray(value), [n] + list(np.shape(value))).copy()


@st.composite
def reshape_targets(draw, shape, minus_one=True):
    """A target shape for ``shape``: its dims shuffled, some merged, some 1s inserted,
    maybe one replaced by -1."""
    dims = draw(st.permutations(shape)) if shape else []
    target = []
    for d in dims:
        if target and draw(st.booleans()):
            target[-1] *= d
        else:
            target.append(d)
    for _ in range(draw(st.integers(0, 2))):
        target.insert(draw(st.integers(0, len(target))), 1)
    if target and minus_one and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return target


@given(data=st.data(), shape=DIMS, n=st.integers(0, 5), graph=st.booleans(),
       chunk=st.sampled_from([None, 2]))
@settings(max_examples=30)
def test_reshape(data, shape, n, graph, chunk):
    """Also with iters known only at run time and in chunks (the last one shorter)."""
    target = data.draw(reshape_targets(shape))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = arg(rng, shape, True, n)
    testing.assert_matches_loop(lambda i: tf.reshape(tf.gather(x, i), target), n, graph=graph,
                                parallel_iterations=chunk)


@given(data=st.data(), shape=DIMS.filter(lambda s: len(s) >= 1 and 0 not in s), n=ITERS,
       x_stacked=st.booleans())
def test_reshape_stacked_target_proven_static(data, shape, n, x_stacked):
    """A stacked target whose value the body's shape inference still knows (one entry
    unknown, the element count fixed)."""
    target = data.draw(reshape_targets(shape, minus_one=False))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = arg(rng, shape, x_stacked, n)
    first = rows(np.int32(target[0]), n)

    def loop_fn(i):
        value = tf.gather(x, i) if x_stacked else x
        return tf.reshape(value, tf.stack([tf.gather(first, i)] + target[1:]))

    testing.assert_matches_loop(loop_fn, n)


@given(data=st.data(), shape=DIMS, n=ITERS, known_target=st.booleans())
@settings(max_examples=20)
def test_reshape_unknown_static_shapes(data, shape, n, known_target):
    """Inside a tf.function whose inputs have unknown dims (and an unknown target
    value), -1 is resolved at run time."""
    target = data.draw(reshape_targets(shape))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = arg(rng, shape, True, n)
    spec = tf.TensorSpec([None] * x.ndim, tf.float32)

    @tf.function(input_signature=[spec, tf.TensorSpec([len(target)], tf.int32),
                                  tf.TensorSpec([], tf.int32)], autograph=False)
    def run(x, sizes, iters):
        sizes = target if known_target else sizes
        return pf.pfor(lambda i: tf.reshape(tf.gather(x, i), sizes), iters, fallback="error")

    got = run(x, np.asarray(target, np.int32), n)
    expected = testing.sequential(lambda i: tf.reshape(x[int(i)], target), n)
    if expected is None:
        assert got.shape[0] == 0
    else:
        testing.assert_allclose(got, expected)


@given(data=st.data(), shape=DIMS, n=ITERS, conjugate=st.booleans())
def test_transpose(data, shape, n, conjugate):
    perm = data.draw(st.permutations(range(len(shape))))
    perm = np.asarray([p - len(shape) if data.draw(st.booleans()) else p for p in perm],
                      np.int32)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = arg(rng, shape, True, n, np.complex64 if conjugate else np.float32)
    testing.check(data, lambda a, p: tf.transpose(a, p, conjugate=conjugate), [x, perm],
                  stacked=[True, False], n=n, modes=EAGER_OR_UNKNOWN)


@given(data=st.data(), shape=DIMS, n=ITERS)
def test_expand_dims(data, shape, n):
    axis = np.int32(data.draw(st.integers(-len(shape) - 1, len(shape))))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = arg(rng, shape, True, n, np.int32)
    testing.check(data, tf.expand_dims, [x, axis],
                  stacked=[True, False], n=n, modes=EAGER_OR_UNKNOWN)


@given(data=st.data(), shape=st.lists(st.integers(0, 2), max_size=4),
       n=st.sampled_from([0, 1, 2]))
def test_squeeze(data, shape, n):
    """Explicit axes (also negative) and "all size-1 axes", which must not squeeze
    the iteration axis when n == 1."""
    ones = [k for k, d in enumerate(shape) if d == 1]
    axes = data.draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    axes = [a - len(shape) if data.draw(st.booleans()) else a for a in axes]
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = arg(rng, shape, True, n)
    # Squeezing "all size-1 axes" of an unknown shape is declined by design.
    testing.check(data, lambda a: tf.squeeze(a, axes or None), [x],
                  stacked=[True], n=n, modes=EAGER_OR_UNKNOWN if axes else EAGER)


WIDTH, D = 5, 3


def test_reshape_flattening_a_varying_dimension_with_others():
    x = tf.ones([2, WIDTH, D])
    n = tf.constant([2, 4])
    testing.assert_matches_loop(lambda i: tf.reshape(testing.rows(x, n, i), [-1]), 2, graph=True,
                                ragged_outputs=True)


def test_reshape_across_the_varying_dimension_falls_back():
    x = tf.ones([2, WIDTH, D])
    n = tf.constant([2, 4])
    report = pf.explain(lambda i: tf.reshape(testing.rows(x, n, i), [-1, 2]), 2)
    assert [r.op_type for r in report.fallbacks] == ["Reshape"]
    got = pf.pfor(lambda i: tf.reduce_sum(tf.reshape(testing.rows(x, n, i), [-1, 2])), 2,
                  fallback="loop")
    assert got.numpy().tolist() == [6.0, 12.0]
