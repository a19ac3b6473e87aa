"""Property tests of the slicing converters against the sequential loop.

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


def make(rng, shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 5, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def arg(rng, shape, stacked, n, dtype=np.float32):
    return make(rng, ([n] if stacked else []) + list(shape), dtype)


def flags(data, count):
    return testing.draw_stacked(data, count)


# Modes for testing.check: eager, or inside a tf.function whose inputs have unknown
# dims and values (the converters' dynamic paths).
EAGER, EAGER_OR_UNKNOWN = ("eager",), ("eager", "unknown_shapes")


def seed(data):
    return np.random.default_rng(data.draw(st.integers(0, 99)))


# -- GatherV2 ---------------------------------------------------------------------------
@given(data=st.data(), shape=st.lists(st.integers(1, 3), min_size=1, max_size=4), n=ITERS)
@settings(max_examples=40)
def test_gather(data, shape, n):
    rank = len(shape)
    batch_dims = data.draw(st.integers(0, rank - 1))
    axis = data.draw(st.integers(batch_dims, rank - 1))
    extra = data.draw(st.lists(st.integers(0, 3), max_size=2))
    index_shape = shape[:batch_dims] + extra
    stacked = flags(data, 2)
    rng = seed(data)
    params = arg(rng, shape, stacked[0], n)
    indices = rng.integers(0, shape[axis], size=([n] if stacked[1] else []) + index_shape)
    if data.draw(st.booleans()):
        axis -= rank
    if batch_dims and data.draw(st.booleans()):
        batch_dims -= len(index_shape)
    testing.check(data, lambda p, j: tf.gather(p, j, axis=axis, batch_dims=batch_dims),
                  [params, indices.astype(np.int32)], stacked=stacked, n=n,
                  modes=EAGER_OR_UNKNOWN)


@given(data=st.data(), shape=st.lists(st.integers(0, 3), max_size=3), n=st.integers(0, 5),
       extra_rows=st.integers(0, 2), chunk=st.sampled_from([None, 1, 2, 3]),
       graph=st.booleans())
def test_gather_rows_of_the_loop_index(data, shape, n, extra_rows, chunk, graph):
    """``params[i]`` is a slice of rows, also in chunks and with iters known only at
    run time."""
    params = make(seed(data), [n + extra_rows] + shape)
    testing.assert_matches_loop(lambda i: tf.gather(params, i), n, graph=graph,
                                parallel_iterations=chunk)


@given(data=st.data(), shape=st.lists(st.integers(1, 3), min_size=2, max_size=3),
       n=st.integers(0, 3), chunk=st.sampled_from([None, 2]))
def test_gather_loop_index_on_inner_axis(data, shape, n, chunk):
    shape[1] = max(shape[1], n)
    params = make(seed(data), shape)
    testing.assert_matches_loop(lambda i: tf.gather(params, i, axis=1), n,
                                parallel_iterations=chunk)


# -- GatherNd ---------------------------------------------------------------------------
@given(data=st.data(), shape=st.lists(st.integers(1, 3), min_size=1, max_size=4), n=ITERS)
def test_gather_nd(data, shape, n):
    depth = data.draw(st.integers(0, len(shape)))
    batch = data.draw(st.lists(st.integers(0, 3), max_size=2))
    stacked = flags(data, 2)
    rng = seed(data)
    params = arg(rng, shape, stacked[0], n)
    lead = ([n] if stacked[1] else []) + batch
    indices = np.stack([rng.integers(0, d, size=lead) for d in shape[:depth]], -1) \
        if depth else np.zeros(lead + [0], np.int64)
    testing.check(data, tf.gather_nd, [params, indices.astype(np.int32)],
                  stacked=stacked, n=n, modes=EAGER_OR_UNKNOWN)


# -- Slice ------------------------------------------------------------------------------
@given(data=st.data(), shape=DIMS, n=ITERS)
def test_slice(data, shape, n):
    """Invariant or stacked starts; sizes may be -1 (to the end) where starts are
    invariant. Stacked starts need static sizes (so no unknown-shape variant)."""
    stacked = flags(data, 2)
    rng = seed(data)
    begins, sizes = [], []
    for d in shape:
        size = data.draw(st.integers(0 if stacked[1] else -1, d))
        sizes.append(size)
        top = d if size == -1 else d - size
        begins.append(rng.integers(0, top + 1, size=[n] if stacked[1] else []))
    begin = np.stack(begins, -1) if shape else np.zeros([n, 0] if stacked[1] else [0])
    x = arg(rng, shape, stacked[0], n)
    testing.check(data, tf.slice, [x, begin.astype(np.int32), np.asarray(sizes, np.int32)],
                  stacked=stacked + [False], n=n, modes=EAGER if stacked[1] else EAGER_OR_UNKNOWN)


@given(data=st.data(), shape=st.lists(st.integers(1, 4), min_size=2, max_size=3), n=ITERS)
def test_slice_mixed_start(data, shape, n):
    """A start packed from a constant and a per-iteration index: the constant part is
    sliced once, the rest gathered."""
    rng = seed(data)
    first = rng.integers(0, shape[0], size=[n]).astype(np.int32)
    x = make(rng, [n] + shape)

    def loop_fn(i):
        start = tf.stack([tf.gather(first, i)] + [1] * (len(shape) - 1))
        return tf.slice(tf.gather(x, i), start, [1] + [d - 1 for d in shape[1:]])

    testing.assert_matches_loop(loop_fn, n)


# -- StridedSlice -----------------------------------------------------------------------
@st.composite
def slice_specs(draw, shape):
    """A Python index expression for ``shape``: ints, slices (negative and out-of-range
    bounds, negative steps), at most one Ellipsis, new axes; some ints become
    per-iteration indices (``("stacked", size)`` placeholders)."""
    rank = len(shape)
    count = draw(st.integers(0, rank))
    kinds = [draw(st.sampled_from(["index", "slice"])) for _ in range(count)]
    for _ in range(draw(st.integers(0, 2))):
        kinds.insert(draw(st.integers(0, len(kinds))), "new")
    if draw(st.booleans()) or not kinds:
        kinds.insert(draw(st.integers(0, len(kinds))), "ellipsis")
    before = kinds.index("ellipsis") if "ellipsis" in kinds else len(kinds)
    first_after = rank - sum(k in ("index", "slice") for k in kinds[before:])
    spec, dim = [], 0
    for pos, kind in enumerate(kinds):
        if pos == before:
            dim = first_after
        if kind == "ellipsis":
            spec.append(Ellipsis)
        elif kind == "new":
            spec.append(tf.newaxis)
        else:
            d = shape[dim]
            dim += 1
            if kind == "index" and d > 0:
                if draw(st.booleans()):
                    spec.append(("stacked", d))
                else:
                    spec.append(draw(st.integers(-d, d - 1)))
            else:
                bound = st.none() | st.integers(-d - 1, d + 1)
                step = draw(st.sampled_from([None, 1, 2, -1, -2]))
                spec.append(slice(draw(bound), draw(bound), step))
    return spec


def _strided_slice_args(shape, spec):
    """Bounds (as arrays) and masks of the StridedSlice that ``x[spec]`` builds."""
    with tf.Graph().as_default():
        op = tf.compat.v1.placeholder(tf.int32, shape)[tuple(spec)].op
    if op.type != "StridedSlice":
        return None
    bounds = [tf.get_static_value(t) for t in op.inputs[1:]]
    masks = {k: op.get_attr(k) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                         "new_axis_mask", "shrink_axis_mask")}
    return bounds, masks


@given(data=st.data(), shape=DIMS, n=ITERS, x_stacked=st.booleans())
@settings(max_examples=40)
def test_strided_slice(data, shape, n, x_stacked):
    """Python indexing with every mask, also with bounds of unknown value; indices may
    be per-iteration (x[i], x[:, i]), which must not fall back either."""
    spec = data.draw(slice_specs(shape))
    rng = seed(data)
    # Each per-iteration index takes any valid value, negative ones included.
    tables = [rng.integers(-s[1], s[1], size=[n]).astype(np.int32)
              for s in spec if isinstance(s, tuple)]
    x_stacked = x_stacked or not tables
    x = arg(rng, shape, x_stacked, n, np.int32)

    def index(a, *rows):
        rows = iter(rows)
        key = tuple(next(rows) if isinstance(s, tuple) else s for s in spec)
        return tf.convert_to_tensor(a)[key]

    plain = None if tables else _strided_slice_args(shape, spec)
    if plain is None:
        testing.check(data, index, [x] + tables,
                      stacked=[x_stacked] + [True] * len(tables), n=n, modes=EAGER_OR_UNKNOWN)
    else:
        bounds, masks = plain
        testing.check(data, lambda a, b, e, s: tf.strided_slice(a, b, e, s, **masks),
                      [x] + bounds, stacked=[True, False, False, False], n=n,
                      modes=EAGER_OR_UNKNOWN)


@given(data=st.data(), shape=DIMS, n=ITERS)
@settings(max_examples=40)
def test_strided_slice_grad(data, shape, n):
    """The gradient of a slice with invariant bounds, per-iteration upstream gradients
    (what tape.gradient of x[t] inside a loop body emits)."""
    spec = [s for s in data.draw(slice_specs(shape)) if not isinstance(s, tuple)]
    plain = _strided_slice_args(shape, spec)
    if plain is None:
        return
    (begin, end, strides), masks = plain
    out_shape = np.zeros(shape, np.float32)[tuple(spec)].shape
    dy = arg(seed(data), out_shape, True, n)

    def grad(g):
        return tf.raw_ops.StridedSliceGrad(shape=np.array(shape, np.int32), begin=begin,
                                           end=end, strides=strides, dy=g, **masks)

    testing.check(data, grad, [dy],
                  stacked=[True], n=n, modes=EAGER_OR_UNKNOWN)


def test_strided_slice_stacked_range_bound_of_one_size():
    """Windows of one size at per-iteration offsets vectorize (test_offsets.py has more)."""
    x = tf.reshape(tf.range(15), [3, 5])

    def loop_fn(i):
        return x[:, i:i + 2]

    testing.assert_matches_loop(loop_fn, 3)


def test_per_iteration_shifts_roll_without_fallback():
    """Per-iteration shifts gather per rolled axis (more in test_bands_rolls_sequences.py)."""
    x = tf.reshape(tf.range(24.0), [4, 6])
    table = tf.constant([[1, 2], [2, 1], [0, 3]])  # rows that differ per iteration

    def loop_fn(i):
        return tf.roll(x, tf.gather(table, i), [0, 1])

    testing.assert_matches_loop(loop_fn, 3)


@given(data=st.data(), shape=st.lists(st.integers(1, 3), min_size=1, max_size=3), n=ITERS)
def test_strided_slice_stacked_end_unread(data, shape, n):
    """Only the end is stacked and every axis masks or ignores it (shrunk axes read
    only their start)."""
    rng = seed(data)
    x = make(rng, [n] + shape)
    shrink = data.draw(st.integers(0, 2 ** len(shape) - 1))
    begin = [data.draw(st.integers(-d, d - 1)) for d in shape]
    ends = rng.integers(-3, 3, size=[n, len(shape)]).astype(np.int32)
    x_stacked = data.draw(st.booleans())
    shared = make(rng, shape)
    unshrunk = (2 ** len(shape) - 1) & ~shrink

    def loop_fn(i):
        value = tf.gather(x, i) if x_stacked else shared
        return tf.strided_slice(value, begin, tf.gather(ends, i), end_mask=unshrunk,
                                shrink_axis_mask=shrink)

    testing.assert_matches_loop(loop_fn, n)


# -- pads, reverses, rolls --------------------------------------------------------------
@given(data=st.data(), shape=DIMS, n=ITERS,
       mode=st.sampled_from(["CONSTANT", "CONSTANT_VALUE", "REFLECT", "SYMMETRIC"]))
def test_pad(data, shape, n, mode):
    """Also with iters known only at run time, where REFLECT must cope with n == 0."""
    if mode == "REFLECT":
        shape = [max(d, 1) for d in shape]  # REFLECT needs each axis longer than its pads
    top = {"REFLECT": -1, "SYMMETRIC": 0}.get(mode)
    paddings = [[data.draw(st.integers(0, 2 if top is None else d + top))
                 for _ in range(2)] for d in shape]
    paddings = np.asarray(paddings, np.int32).reshape([len(shape), 2])
    x = arg(seed(data), shape, True, n)
    if mode == "CONSTANT_VALUE":
        op = lambda a, p: tf.pad(a, p, constant_values=1.5)  # noqa: E731
    else:
        op = lambda a, p: tf.pad(a, p, mode=mode)  # noqa: E731
    testing.check(data, op, [x, paddings],
                  stacked=[True, False], n=n, modes=EAGER_OR_UNKNOWN)


@pytest.mark.parametrize("n", [0, 2])
def test_reflect_pad_with_iters_known_at_run_time(n):
    """REFLECT pads need every axis longer than its padding, the stacked one too."""
    x = np.arange(n * 6, dtype=np.float32).reshape([n, 2, 3])
    loop_fn = testing.loop_fn_for(lambda a: tf.pad(a, [[1, 0], [2, 1]], mode="REFLECT"),
                                  [x], [True])
    testing.assert_matches_loop(loop_fn, n, graph=True)


@given(data=st.data(), shape=st.lists(st.integers(0, 4), min_size=1, max_size=4), n=ITERS)
def test_reverse_and_roll(data, shape, n):
    rank = len(shape)
    axes = data.draw(st.lists(st.integers(0, rank - 1), unique=True))
    axes = [a - rank if data.draw(st.booleans()) else a for a in axes]
    shifts = np.asarray([data.draw(st.integers(-5, 5)) for _ in axes], np.int32)
    axes = np.asarray(axes, np.int32)
    x = arg(seed(data), shape, True, n)
    testing.check(data, lambda a, s, k: (tf.reverse(a, k), tf.roll(a, s, k)),
                  [x, shifts, axes], stacked=[True, False, False], n=n, modes=EAGER_OR_UNKNOWN)


@given(data=st.data(), rows=st.integers(0, 3), extra=st.integers(1, 3),
       chunk=st.sampled_from([None, 2]))
@settings(max_examples=6)
def test_gather_of_loop_index_past_params_fails_like_loop(data, rows, extra, chunk):
    """``tf.gather(x, i)`` with fewer rows in ``x`` than iterations fails the loop's
    kernel; the slice pfor emits instead must fail too (statically short params, rows
    known only at run time, chunks)."""
    x = tf.reshape(tf.range(rows * 2, dtype=tf.float32), [rows, 2])
    n = rows + extra
    testing.assert_fails_like_loop(lambda i: tf.gather(x, i) * 2.0, n,
                                   parallel_iterations=chunk)
    unknown = tf.function(lambda t, m: pf.pfor(lambda i: tf.gather(t, i), m, fallback="error",
                                               parallel_iterations=chunk),
                          input_signature=[tf.TensorSpec([None, 2]),
                                           tf.TensorSpec([], tf.int32)])
    with pytest.raises(tf.errors.InvalidArgumentError, match="the loop index"):
        unknown(x, tf.constant(n))
    testing.assert_allclose(unknown(x, tf.constant(rows)), x)
