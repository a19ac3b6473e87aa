"""Property tests of the slicing converters against the sequential loop.

Every check runs with fallback="error", so passing also means nothing fell back.
Stacked arguments carry one row per iteration; invariant ones are shared.

Slices whose size differs between iterations against the loop, with no fallback:
``x[:n_i]``, ``x[b_i:e_i]`` on any axis, negative and clipped bounds, ``tf.slice`` with
per-iteration sizes, slices of ragged values, rows of a captured ``tf.RaggedTensor``;
gradients through them (a tape around pfor, and StridedSliceGrad of a ragged ``dy``
inside the body).
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


MAX_N = 4


# -- comparing rows of different shapes with the loop ---------------------------------------
def check_rows(body, n):
    """pfor with ragged outputs, eagerly, in a tf.function of run-time iters, and in
    chunks of 2, equals the loop's rows; nothing falls back."""
    testing.assert_matches_loop(body, n, ragged=True, modes=testing.RUN_MODES)


def _x(shape, seed):
    return tf.constant(np.random.default_rng(seed).normal(size=shape), tf.float32)


# -- strided slices -------------------------------------------------------------------------
SLICES = {
    "x[:e]": lambda x, b, e: x[:e],
    "x[b:]": lambda x, b, e: x[b:],
    "x[b:e]": lambda x, b, e: x[b:e],
    "x[-e:]": lambda x, b, e: x[-e:],
    "x[0, b:e]": lambda x, b, e: x[0, b:e] if x.shape.rank == 2 else x[b:e],
    "x[:, b:]": lambda x, b, e: x[:, b:] if x.shape.rank == 2 else x[b:],
    "x[b:e, :e]": lambda x, b, e: x[b:e, :e] if x.shape.rank == 2 else x[b:e],
    "x[b:b + e]": lambda x, b, e: x[b:b + e],
}


@settings(max_examples=12, deadline=None)
@given(name=st.sampled_from(sorted(SLICES)), n=st.integers(0, MAX_N),
       shape=st.lists(st.integers(1, 5), min_size=1, max_size=2),
       stacked_x=st.booleans(), seed=st.integers(0, 2**16))
def test_strided_slices_with_stacked_bounds(name, n, shape, stacked_x, seed):
    rng = np.random.default_rng(seed)
    side = shape[0]
    # Bounds in and out of range, negative too: StridedSlice clips them.
    begins = tf.constant(rng.integers(-side - 1, side + 2, size=MAX_N), tf.int32)
    ends = tf.constant(rng.integers(-side - 1, side + 2, size=MAX_N), tf.int32)
    xs = _x([MAX_N] + shape, seed)
    x = xs[0]

    def body(i):
        source = tf.gather(xs, i) if stacked_x else x
        return SLICES[name](source, tf.gather(begins, i), tf.gather(ends, i))

    check_rows(body, n)
    if n and not stacked_x:
        testing.assert_gradients_match(body, [x], n, ragged=True)


def test_lengths_including_empty_rows():
    x = tf.reshape(tf.range(12.0), [3, 4])
    lengths = tf.constant([2, 0, 4])
    check_rows(lambda i: x[i, :lengths[i]], 3)
    testing.assert_gradients_match(lambda i: x[i, :lengths[i]], [x], 3, ragged=True)


def test_slices_of_a_ragged_value_resolve_bounds_per_row():
    """x[:n_i] is ragged; its [-1], [1:], [:-1] count from each row's own end."""
    x = tf.reshape(tf.range(1.0, 13.0), [3, 4])
    lengths = tf.constant([2, 1, 4])
    row = lambda i: x[i, :lengths[i]]  # noqa: E731
    check_rows(lambda i: row(i)[1:], 3)
    check_rows(lambda i: row(i)[:-1], 3)
    check_rows(lambda i: row(i)[-2:], 3)
    check_rows(lambda i: tf.stack([row(i)[-1], row(i)[0]]), 3)
    check_rows(lambda i: tf.slice(row(i), [1], [-1]), 3)
    testing.assert_gradients_match(lambda i: row(i)[1:], [x], 3, ragged=True)


def test_a_shrunk_index_out_of_a_rows_range_fails_like_the_loop():
    x = tf.reshape(tf.range(12.0), [3, 4])
    lengths = tf.constant([2, 0, 4])
    with pytest.raises(tf.errors.InvalidArgumentError):
        x[1, :0][-1]  # the loop fails on the empty row
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
        pf.pfor(lambda i: x[i, :lengths[i]][-1], 3, fallback="error")


@pytest.mark.parametrize("n", [3, 4, 5])
def test_windows_clipped_at_the_end_of_the_axis(n, case_modes):
    """x[i:i + 2] over 4 rows: the last windows are shorter, as in the loop (ragged,
    marked usually uniform); inside the axis it stays stacked."""
    x = tf.reshape(tf.range(12.0), [4, 3])
    check_rows(lambda i: x[i:i + 2], n)
    testing.assert_matches_loop(lambda i: tf.reduce_sum(x[i:i + 2] ** 2, 0), n,
                                modes=case_modes)
    testing.assert_gradients_match(lambda i: x[i:i + 2] * 2.0, [x], n, ragged=True)
    testing.assert_gradients_match(lambda i: tf.reduce_sum(tf.sin(x[i:i + 2, 1:])), [x], n)


def test_windows_of_usually_one_size_reach_ops_without_ragged_converters():
    """An op with no converter for ragged values (Conv2D) takes windows that are usually
    of one size as stacked: checked when it runs, with a message saying what to do."""
    images = tf.reshape(tf.range(6 * 4 * 4, dtype=tf.float32), [6, 4, 4, 1])
    kernel = tf.ones([2, 2, 1, 1])
    body = lambda i: tf.nn.conv2d(images[i:i + 2], kernel, 1, "VALID")  # noqa: E731
    run = tf.function(lambda n: pf.pfor(body, n, fallback="error"))
    testing.assert_rows_match(run(tf.constant(5)), [body(i) for i in range(5)])
    with pytest.raises(tf.errors.InvalidArgumentError, match="clipped at the end"):
        run(tf.constant(6))


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_varying_size_broadcast_against_a_fixed_size(data):
    """A size that varies per iteration meets a fixed size 3: rows of size 1 broadcast,
    the result is uniform (the loop's shapes agree)."""
    n = data.draw(st.integers(0, MAX_N), label="n")
    lengths = tf.constant(data.draw(st.lists(st.sampled_from([1, 3]), min_size=n,
                                             max_size=n), label="lengths"), tf.int32)
    x = tf.reshape(tf.range(MAX_N * 3 * 2, dtype=tf.float32), [MAX_N, 3, 2])
    u = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    testing.assert_matches_loop(lambda i: x[i, :lengths[i]] * u, n,
                                modes=testing.draw_modes(data))


def test_varying_size_broadcast_against_a_fixed_size_fails_like_the_loop():
    x, u = tf.ones([2, 3, 2]), tf.ones([3, 2])
    lengths = tf.constant([3, 2])
    from pfor_core import testing  # pylint: disable=import-outside-toplevel

    testing.assert_fails_like_loop(lambda i: x[i, :lengths[i]] * u, 2, match="broadcast")


def test_windows_of_one_size_stay_stacked():
    """x[i:i + k] is left to the window converter (a stacked result, no ragged layout)."""
    x = tf.reshape(tf.range(12.0), [6, 2])
    body = lambda i: x[i:i + 2]  # noqa: E731
    records = pf.explain(body, 3).rows
    converters = {r.converter for r in records if r.op_type == "StridedSlice"}
    assert converters == {
        "pfor_converters_math.slicing.strided_slice.convert_strided_slice_window"}, converters
    check_rows(body, 3)


# -- tf.slice -------------------------------------------------------------------------------
@settings(max_examples=12, deadline=None)
@given(n=st.integers(0, MAX_N), rows=st.integers(0, 5), cols=st.integers(1, 3),
       stacked_x=st.booleans(), to_end=st.booleans(), seed=st.integers(0, 2**16))
def test_slice_with_stacked_begin_and_size(n, rows, cols, stacked_x, to_end, seed):
    rng = np.random.default_rng(seed)
    begins = rng.integers(0, rows + 1, size=MAX_N)
    sizes = [int(rng.integers(0, rows - b + 1)) for b in begins]
    begins, sizes = tf.constant(begins, tf.int32), tf.constant(sizes, tf.int32)
    xs = _x([MAX_N, rows, cols], seed)

    def body(i):
        source = tf.gather(xs, i) if stacked_x else xs[0]
        size = -1 if to_end else tf.gather(sizes, i)
        return tf.slice(source, tf.stack([tf.gather(begins, i), 0]), tf.stack([size, -1]))

    check_rows(body, n)
    if n and not stacked_x:
        testing.assert_gradients_match(body, [xs[0]], n, ragged=True)


def test_slice_out_of_range_fails_like_the_loop():
    x = tf.reshape(tf.range(12.0), [6, 2])
    sizes = tf.constant([2, 7])
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.slice(x, [0, 0], [7, -1])
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
        pf.pfor(lambda i: tf.slice(x, [0, 0], tf.stack([sizes[i], -1])), 2,
                fallback="error")


# -- the gradient inside the body: StridedSliceGrad of a ragged dy ------------------------
@pytest.mark.parametrize("bounds", ["begin", "end", "both"])
def test_strided_slice_grad_of_a_ragged_dy(bounds):
    x = tf.reshape(tf.range(24.0), [6, 4])
    w = tf.reshape(tf.range(24.0) * 0.5 - 3.0, [6, 4])
    begins, ends = tf.constant([1, 4, 0, 2]), tf.constant([5, 4, 6, 3])

    def window(source, i):
        if bounds == "begin":
            return source[begins[i]:]
        if bounds == "end":
            return source[1:ends[i]]
        return source[begins[i]:ends[i]]

    def body(i):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = window(x, i)
        return tape.gradient(y, x, output_gradients=window(w, i))

    check_rows(body, 4)


# -- rows of a RaggedTensor -----------------------------------------------------------------
RAGGED = [[1.0, 2.0], [], [3.0, 4.0, 5.0], [6.0]]


RAGGED2 = [[[1.0, 2.0], []], [], [[3.0], [4.0, 5.0], [6.0]], [[7.0]]]


def test_rows_of_a_captured_ragged_tensor():
    rt = tf.ragged.constant(RAGGED)
    check_rows(lambda i: rt[i], 4)
    check_rows(lambda i: rt[i][1:], 4)
    got = pf.vectorized_map(lambda row: row, rt, fallback="error", ragged_outputs=True)
    assert got.to_list() == rt.to_list()
    got = pf.map_fn(lambda row: row, rt, fallback="error",
                    fn_output_signature=tf.RaggedTensorSpec([None], tf.float32))
    assert got.to_list() == rt.to_list()


def test_gradient_through_rows_of_a_ragged_tensor():
    values = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    splits = tf.constant([0, 2, 2, 5, 6], tf.int64)
    testing.assert_gradients_match(lambda i: tf.RaggedTensor.from_row_splits(values, splits)[i],
                                   [values], 4, ragged=True)


def test_rows_of_a_ragged_tensor_of_ragged_rank_2():
    rt = tf.ragged.constant(RAGGED2)
    got = pf.pfor(lambda i: rt[i], 4, fallback="error")
    assert got.to_list() == rt.to_list()
    got = pf.vectorized_map(lambda row: row, rt, fallback="error")
    assert got.to_list() == rt.to_list()


def test_rows_of_ragged_rank_2_convert_their_slices():
    """Until the consumers of ragged values land, the slices of rt[i] are converted
    here and the rest falls back: the result is the loop's."""
    rt = tf.ragged.constant(RAGGED2)
    records = pf.explain(lambda i: rt[i], 4).rows
    slices = [r for r in records if r.op_type == "StridedSlice" and r.how != "invariant"]
    assert slices and all(r.how == "converter" for r in slices), slices
    got = pf.pfor(lambda i: rt[i], 4, fallback="loop")
    assert got.to_list() == rt.to_list()


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_gradient_of_a_per_iteration_item_of_a_ragged_value(data):
    """StridedSliceGrad with a per-iteration shape (the sliced value differs in shape
    per iteration) and begin: the gradient of ``values[t_i]`` (what a loop over its
    items needs) and of ``values[t_i:]`` (a ragged ``dy``) for a ragged ``values``,
    placed in each iteration's own shape."""
    n = data.draw(st.integers(1, MAX_N), label="n")
    lengths = data.draw(st.lists(st.integers(1, 5), min_size=n, max_size=n), label="lengths")
    picks = data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n), label="positions")
    rank2 = data.draw(st.booleans(), label="items of rank 1")
    window = data.draw(st.booleans(), label="values[t:] (else values[t])")
    x = tf.random.stateless_normal([n, 5, 3], seed=[n, 31])
    length_of = tf.constant(lengths)
    pick_of = tf.constant([p % l for p, l in zip(picks, lengths)])

    def body(i):
        xi = tf.gather(x, i) if rank2 else tf.gather(x, i)[:, 0]
        with tf.GradientTape() as tape:
            tape.watch(xi)
            values = xi[:tf.gather(length_of, i)]
            t = tf.gather(pick_of, i)
            part = values[t:] if window else values[t]
            loss = tf.reduce_sum(tf.sin(part) * tf.cast(t + 1, tf.float32))
        return tape.gradient(loss, xi)

    testing.assert_matches_loop(body, n, modes=testing.draw_modes(data))
