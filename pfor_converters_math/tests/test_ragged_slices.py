"""Slices whose size differs between iterations (ragged_slices.py) against the loop,
with no fallback: ``x[:n_i]``, ``x[b_i:e_i]`` on any axis, negative and clipped bounds,
``tf.slice`` with per-iteration sizes, slices of ragged values, rows of a captured
``tf.RaggedTensor``; gradients through them (a tape around pfor, and StridedSliceGrad of
a ragged ``dy`` inside the body)."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing

MAX_N = 4


# -- comparing rows of different shapes with the loop ---------------------------------------
def check_rows(body, n):
    """pfor with ragged outputs, eagerly, in a tf.function of run-time iters, and in
    chunks of 2, equals the loop's rows; nothing falls back."""
    testing.assert_matches_loop(body, n, ragged=True, modes=testing.RUN_MODES)


def check_gradient(body, n, source):
    """The gradient of a loss over every row's elements, through pfor and the loop."""
    with tf.GradientTape() as tape:
        tape.watch(source)
        out = pf.pfor(body, n, fallback="error", ragged_outputs=True)
        flat = out.flat_values if isinstance(out, tf.RaggedTensor) else out
        got_loss = tf.reduce_sum(tf.sin(flat) * 1.5)
    got = tape.gradient(got_loss, source)
    if got is None:  # no row has an element
        got = tf.zeros_like(source)
    with tf.GradientTape() as tape:
        tape.watch(source)
        want_loss = tf.add_n([tf.reduce_sum(tf.sin(body(tf.constant(i))) * 1.5)
                              for i in range(n)] + [tf.zeros([])])
    want = tape.gradient(want_loss, source)
    if want is None:
        want = tf.zeros_like(source)
    np.testing.assert_allclose(tf.convert_to_tensor(got).numpy(), want.numpy(), rtol=1e-5,
                               atol=1e-6)


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
        check_gradient(body, n, x)


def test_lengths_including_empty_rows():
    x = tf.reshape(tf.range(12.0), [3, 4])
    lengths = tf.constant([2, 0, 4])
    check_rows(lambda i: x[i, :lengths[i]], 3)
    check_gradient(lambda i: x[i, :lengths[i]], 3, x)


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
    check_gradient(lambda i: row(i)[1:], 3, x)


def test_a_shrunk_index_out_of_a_rows_range_fails_like_the_loop():
    x = tf.reshape(tf.range(12.0), [3, 4])
    lengths = tf.constant([2, 0, 4])
    with pytest.raises(tf.errors.InvalidArgumentError):
        x[1, :0][-1]  # the loop fails on the empty row
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
        pf.pfor(lambda i: x[i, :lengths[i]][-1], 3, fallback="error")


@pytest.mark.parametrize("n", [3, 4, 5])
def test_windows_clipped_at_the_end_of_the_axis(n):
    """x[i:i + 2] over 4 rows: the last windows are shorter, as in the loop (ragged,
    marked usually uniform); inside the axis it stays stacked."""
    x = tf.reshape(tf.range(12.0), [4, 3])
    check_rows(lambda i: x[i:i + 2], n)
    testing.assert_matches_loop(lambda i: tf.reduce_sum(x[i:i + 2] ** 2, 0), n, modes=testing.RUN_MODES)
    check_gradient(lambda i: x[i:i + 2] * 2.0, n, x)
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
    """x[i:i + k] is left to offsets.py (a stacked result, no ragged layout)."""
    x = tf.reshape(tf.range(12.0), [6, 2])
    body = lambda i: x[i:i + 2]  # noqa: E731
    records = pf.explain(body, 3).rows
    converters = {r.converter for r in records if r.op_type == "StridedSlice"}
    assert converters == {"pfor_converters_math.offsets.convert_strided_slice_window"}, converters
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
        check_gradient(body, n, xs[0])


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
    check_gradient(lambda i: tf.RaggedTensor.from_row_splits(values, splits)[i], 4, values)


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
