"""Property tests of the shape converters against the sequential loop.

Every check runs with fallback="error", so passing also means nothing fell back.
Stacked arguments carry one row per iteration; invariant ones are shared.
"""

import numpy as np
import pytest
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


def make(rng, shape, dtype=np.float32):
    """Random values of a shape: small ints for integer dtypes."""
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 5, size=shape).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def arg(rng, shape, stacked, n, dtype=np.float32):
    return make(rng, ([n] if stacked else []) + list(shape), dtype)


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


@given(data=st.data(), shapes=st.lists(DIMS, min_size=1, max_size=3), n=ITERS,
       out_type=st.sampled_from([tf.int32, tf.int64]),
       unknown=st.sampled_from([None, "dims", "rank"]))
def test_shape_queries_are_invariant(data, shapes, n, out_type, unknown):
    stacked = [data.draw(st.booleans()) for _ in shapes]
    stacked[0] = True
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    args = [arg(rng, s, k, n) for s, k in zip(shapes, stacked)]

    def queries(*values):
        first = values[0]  # raw ops: tf.shape & co. fold static shapes into constants
        return (tf.raw_ops.Shape(input=first, out_type=out_type),
                tf.raw_ops.Size(input=first, out_type=out_type), tf.raw_ops.Rank(input=first),
                tf.shape_n(list(values), out_type=out_type))

    if unknown:
        testing.check_op_unknown_shapes(queries, args, stacked=stacked, n=n,
                                        known_rank=unknown == "dims")
    else:
        testing.check_op(queries, args, stacked=stacked, n=n)


@given(data=st.data(), dims=DIMS, n=st.integers(0, 5),
       chunk=st.sampled_from([None, 2]))
def test_fill(data, dims, n, chunk):
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    value = arg(rng, [], True, n)
    if chunk:
        testing.assert_matches_loop(lambda i: tf.fill(dims, tf.gather(value, i)), n,
                                    graph=True, parallel_iterations=chunk)
    else:
        testing.check(data, lambda v, d: tf.fill(d, v), [value, np.asarray(dims, np.int32)],
                      stacked=[True, False], n=n, modes=EAGER_OR_UNKNOWN)


@given(data=st.data(), target=DIMS, n=ITERS, stacked=st.sampled_from(["x", "shape", "both"]))
def test_broadcast_to(data, target, n, stacked):
    """x's shape is a suffix of the target with some dims 1; a stacked target is one
    the body's shape inference proves (its first entry fixed by x's, of size >= 2)."""
    rank = data.draw(st.integers(0, len(target)))
    shape = [1 if data.draw(st.booleans()) else d for d in target[len(target) - rank:]]
    x_stacked = stacked != "shape"
    if stacked != "x":
        if len(target) == 0 or rank != len(target) or target[0] < 2:
            stacked, x_stacked = "x", True
        else:
            shape[0] = target[0]
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = arg(rng, shape, x_stacked, n, np.int32)
    if stacked == "x":
        testing.check(data, tf.broadcast_to, [x, np.asarray(target, np.int32)],
                      stacked=[True, False], n=n, modes=EAGER_OR_UNKNOWN)
        return
    first = rows(np.int32(target[0]), n)

    def loop_fn(i):
        value = tf.gather(x, i) if x_stacked else x
        return tf.broadcast_to(value, tf.stack([tf.gather(first, i)] + target[1:]))

    testing.assert_matches_loop(loop_fn, n)


@given(data=st.data(), shape=DIMS, n=ITERS)
def test_tile(data, shape, n):
    multiples = data.draw(st.lists(st.integers(0, 3), min_size=len(shape),
                                   max_size=len(shape)))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = arg(rng, shape, True, n)
    testing.check(data, tf.tile, [x, np.asarray(multiples, np.int32)],
                  stacked=[True, False], n=n, modes=EAGER_OR_UNKNOWN)


@given(data=st.data(), shape=st.lists(st.integers(0, 3), min_size=1, max_size=3), n=ITERS,
       x_stacked=st.booleans())
def test_tile_stacked_multiples_on_empty_axes(data, shape, n, x_stacked):
    """Stacked multiples are allowed where the static output shape proves them: on
    axes whose input is empty, any multiple gives an empty axis."""
    shape[0] = 0
    multiples = data.draw(st.lists(st.integers(0, 3), min_size=len(shape),
                                   max_size=len(shape)))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = arg(rng, shape, x_stacked, n)
    varying = rng.integers(0, 4, size=[n]).astype(np.int32)

    def loop_fn(i):
        value = tf.gather(x, i) if x_stacked else x
        return tf.tile(value, tf.stack([tf.gather(varying, i)] + multiples[1:]))

    testing.assert_matches_loop(loop_fn, n)


@given(data=st.data(), shape=st.lists(st.integers(0, 3), max_size=3), n=ITERS,
       depth=st.integers(0, 4), dtype=st.sampled_from([np.float32, np.int32]))
@settings(max_examples=30)
def test_one_hot(data, shape, n, depth, dtype):
    axis = data.draw(st.integers(-1, len(shape)))
    stacked = [data.draw(st.booleans()) for _ in range(3)]
    if not any(stacked):
        stacked[0] = True
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    indices = rng.integers(-1, depth + 1, size=([n] if stacked[0] else []) + shape)
    on = arg(rng, [], stacked[1], n, dtype)
    off = arg(rng, [], stacked[2], n, dtype)
    testing.check(data, lambda j, a, b: tf.one_hot(j, depth, a, b, axis=axis),
                  [indices.astype(np.int32), on, off], stacked=stacked, n=n,
                  modes=EAGER_OR_UNKNOWN)


@pytest.mark.parametrize("op_type", ["Reshape", "Fill", "BroadcastTo", "Tile"])
def test_stacked_shapes_not_known_statically(op_type):
    """A stacked target shape the body cannot prove the same in every iteration: Fill,
    BroadcastTo and Tile make ragged values (ragged_fill.py), and Reshape of an
    invariant value too (ragged_reshape.py), which are one shape after all here."""
    x = tf.reshape(tf.range(6.0), [2, 3])
    targets = tf.constant([[3, 2], [3, 2], [3, 2]])

    def loop_fn(i):
        target = tf.gather(targets, i)
        if op_type == "Reshape":
            return tf.reshape(x, target)
        if op_type == "Fill":
            return tf.fill(target, 1.0)
        if op_type == "BroadcastTo":
            return tf.broadcast_to(x[:1, :1], target)
        return tf.tile(x, target)

    got = testing.assert_matches_loop(loop_fn, 3, fallback="error")
    assert got.shape == ([3, 6, 6] if op_type == "Tile" else [3, 3, 2])
