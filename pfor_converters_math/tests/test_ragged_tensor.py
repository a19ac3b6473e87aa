"""tf.ragged.range, tf.gather of a RaggedTensor and rt.to_tensor() in a loop body
(ragged_tensor.py: RaggedRange, RaggedGather, RaggedTensorToTensor) against the loop,
with no fallback: stacked and ragged arguments, rows and iterations with no element,
default values and fixed shapes; bodies returning a RaggedTensor compare row by row.

RaggedTensorToVariant / RaggedTensorFromVariant: ``tf.map_fn`` with a
``tf.RaggedTensorSpec`` output inside a loop body, against the loop, with no fallback:
elements whose lengths differ within and between iterations, empty ones, ragged ranks 0
and 1, and a ragged pfor output."""

import functools

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing

MAX_N = 4


# pfor eagerly, in a tf.function of run-time iters and in chunks of 2 against one run of
# the loop (ragged results row by row); nothing falls back. Property tests draw one of
# the modes per example instead, parametrized cases take them in turn (case_modes).
check = functools.partial(testing.assert_matches_loop, modes=testing.RUN_MODES,
                          ragged_outputs=True)
MODE = st.sampled_from(testing.RUN_MODES)


def check_ragged_tensor(body, n, modes=testing.RUN_MODES):
    """A body returning a tf.RaggedTensor: pfor's rows (in each of ``modes``) are the
    loop's values; nothing falls back."""
    want = [body(tf.constant(j)) for j in range(n)]
    like = want or [body(tf.constant(0))]  # with no iteration: what the body returns
    if not all(isinstance(w, tf.RaggedTensor) for w in like):
        check(body, n, modes=modes)  # a dense value per iteration
        return
    want = [w.to_list() for w in want]
    for mode in modes:
        got = testing.run_in_mode(body, n, mode, fallback="error")
        assert isinstance(got, tf.RaggedTensor), mode
        assert got.to_list() == want, mode


# -- RaggedRange -------------------------------------------------------------------


def _range_args(kinds, rng, dtype):
    """starts/limits/deltas of each kind: U (a constant), S0 (a stacked scalar), S1 (a
    stacked vector of 3), R (a vector of a per-iteration length, 0 included)."""
    starts = rng.integers(-3, 4, size=[MAX_N, 3])
    deltas = rng.choice([-2, -1, 1, 2], size=[MAX_N, 3])
    limits = starts + deltas * rng.integers(-1, 4, size=[MAX_N, 3])
    lengths = tf.constant(rng.integers(0, 4, size=MAX_N), tf.int32)
    lengths = tf.tensor_scatter_nd_update(lengths, [[1]], [0])  # an empty iteration
    tables = [tf.constant(a, dtype) for a in (starts, limits, deltas)]

    def args(i):
        out = []
        for kind, table in zip(kinds, tables):
            out.append({"U": table[0, 0], "S0": table[i % MAX_N, 0], "S1": table[i % MAX_N],
                        "R": table[i % MAX_N, :lengths[i % MAX_N]]}[kind])
        return out

    return args


RANGE_KINDS = [("S0", "U", "U"), ("U", "S1", "U"), ("U", "U", "S0"), ("S1", "S1", "S0"),
               ("R", "U", "S0"), ("U", "R", "U"), ("S0", "U", "R"), ("R", "R", "U"),
               ("R", "S0", "R"), ("U", "R", "R"), ("R", "R", "R")]


@pytest.mark.parametrize("kinds", RANGE_KINDS, ids="-".join)
def test_ragged_range_of_every_argument_kind(kinds, case_modes):
    args = _range_args(kinds, np.random.default_rng(0), tf.int32)
    check_ragged_tensor(lambda i: tf.ragged.range(*args(i)), MAX_N, case_modes)
    check(lambda i: tf.ragged.range(*args(i)).to_tensor(), MAX_N, modes=case_modes)


@settings(max_examples=8, deadline=None)
@given(n=st.integers(0, MAX_N), kinds=st.sampled_from(RANGE_KINDS),
       dtype=st.sampled_from([tf.int32, tf.int64, tf.float32]),
       splits=st.sampled_from([tf.int32, tf.int64]), seed=st.integers(0, 2**16), mode=MODE)
def test_ragged_range(n, kinds, dtype, splits, seed, mode):
    args = _range_args(kinds, np.random.default_rng(seed), dtype)
    check_ragged_tensor(lambda i: tf.ragged.range(*args(i), row_splits_dtype=splits), n,
                        (mode,))


def test_ragged_range_of_a_zero_step_fails_like_the_loop():
    deltas = tf.constant([1, 0])
    testing.assert_fails_like_loop(lambda i: tf.ragged.range(0, 3, deltas[i]).flat_values, 2)


# -- RaggedGather --------------------------------------------------------------------

RT1 = tf.ragged.constant([[1.0, 2.0], [], [3.0, 4.0, 5.0], [6.0]])
RT2 = tf.ragged.constant([[[1, 2], [3]], [[]], [[4], [5, 6, 7], []], []], ragged_rank=2)
INDEX = tf.constant([[0, 3, 1], [1, 1, 1], [2, 0, 3], [3, 3, 2]])
COUNTS = tf.constant([2, 0, 3, 1])


@pytest.mark.parametrize("params", ["rank1", "rank2"])
@pytest.mark.parametrize("index", ["scalar", "vector", "ragged", "range"])
def test_gather_of_a_captured_ragged_tensor(params, index, case_modes):
    rt = RT1 if params == "rank1" else RT2
    pick = {"scalar": lambda i: INDEX[i, 0], "vector": lambda i: INDEX[i],
            "ragged": lambda i: INDEX[i, :COUNTS[i]], "range": tf.range}[index]
    check_ragged_tensor(lambda i: tf.gather(rt, pick(i)), MAX_N, case_modes)
    if not (params == "rank1" and index == "scalar"):  # else a dense row already
        check(lambda i: tf.gather(rt, pick(i)).to_tensor(), MAX_N, modes=case_modes)


@settings(max_examples=6, deadline=None)
@given(n=st.integers(0, MAX_N), ragged=st.booleans(), seed=st.integers(0, 2**16), mode=MODE)
def test_gather_by_drawn_indices(n, ragged, seed, mode):
    rng = np.random.default_rng(seed)
    index = tf.constant(rng.integers(0, 4, size=[MAX_N, 3]), tf.int64)
    counts = tf.constant(rng.integers(0, 4, size=MAX_N), tf.int32)
    check_ragged_tensor(lambda i: tf.gather(RT2, index[i, :counts[i]] if ragged else index[i]), n,
                        (mode,))


def test_gather_out_of_range_fails_like_the_loop():
    index = tf.constant([0, 9])
    testing.assert_fails_like_loop(lambda i: tf.gather(RT1, index[i:i + 1]).flat_values, 2)


def test_gathered_rows_reduced_to_a_fixed_shape():
    def body(i):
        return tf.reduce_sum(tf.gather(RT1, INDEX[i, :COUNTS[i]]).to_tensor(), axis=1)

    check(body, MAX_N)


# -- RaggedTensorToTensor --------------------------------------------------------------

VALUES = tf.constant([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]])
SPLITS = tf.constant([[0, 1, 4], [0, 0, 0], [0, 4, 4], [0, 2, 3]])  # the last row: 3 values
RAGGED_SPLITS = tf.constant([[0, 4, 0, 0], [0, 0, 2, 4], [0, 4, 0, 0], [0, 1, 2, 4]])
SPLIT_COUNTS = tf.constant([2, 4, 2, 4])


@pytest.mark.parametrize("kwargs", [{}, {"default_value": -1}, {"shape": [None, 3]},
                                    {"shape": [1, None]}, {"shape": [3, 2]}],
                         ids=["plain", "default", "width", "rows", "fixed"])
def test_to_tensor_of_stacked_splits(kwargs, case_modes):
    def body(i):
        values = VALUES[i, :SPLITS[i, -1]]  # ragged values
        rt = tf.RaggedTensor.from_row_splits(values, SPLITS[i], validate=False)
        return rt.to_tensor(**kwargs)

    check(body, MAX_N, modes=case_modes)

    def stacked(i):
        rt = tf.RaggedTensor.from_row_splits(VALUES[i], [0, 1, 4], validate=False)
        return (rt * (i + 1)).to_tensor(**kwargs)

    check(stacked, MAX_N, modes=case_modes)


def test_to_tensor_of_ragged_splits():
    def body(i):
        splits = RAGGED_SPLITS[i, :SPLIT_COUNTS[i]]
        return tf.RaggedTensor.from_row_splits(VALUES[i], splits, validate=False).to_tensor()

    check(body, MAX_N)
    check(lambda i: tf.ragged.range(COUNTS[:i]).to_tensor(default_value=7), MAX_N)


def test_to_tensor_reads_only_the_values_the_splits_address():
    """The kernel ignores values past the last split; too few fail, and so do rows
    that the level above does not address."""
    short = tf.constant([[0, 1, 2], [0, 0, 0], [0, 3, 3], [0, 2, 4]])
    check(lambda i: tf.RaggedTensor.from_row_splits(VALUES[i], short[i], validate=False)
          .to_tensor(), MAX_N)
    check(lambda i: tf.RaggedTensor.from_row_splits(
        tf.RaggedTensor.from_row_splits(VALUES[i], short[i], validate=False),
        [0, 2], validate=False).to_tensor(), MAX_N)
    testing.assert_fails_like_loop(lambda i: tf.RaggedTensor.from_row_splits(
        tf.RaggedTensor.from_row_splits(VALUES[i], short[i], validate=False),
        tf.minimum(short[i, :2], 2), validate=False).to_tensor(), MAX_N)
    long = tf.constant([[0, 2], [0, 5]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="address more"):
        pf.pfor(lambda i: tf.RaggedTensor.from_row_splits(VALUES[i], long[i], validate=False)
                .to_tensor(), 2, fallback="error")


def test_to_tensor_of_value_rowids():
    rowids = tf.constant([[0, 0, 2, 2], [1, 1, 1, 1], [0, 1, 2, 2], [2, 2, 2, 2]])

    def stacked(i):
        rt = tf.RaggedTensor.from_value_rowids(VALUES[i], rowids[i], nrows=3, validate=False)
        return rt.to_tensor(default_value=-1)

    check(stacked, MAX_N)

    def ragged(i):
        rt = tf.RaggedTensor.from_value_rowids(tf.range(i), tf.range(i) // 2, nrows=i // 2 + 1,
                                               validate=False)
        return rt.to_tensor()

    check(ragged, MAX_N)  # a per-iteration number of rows

    def fixed_rows(i):
        rt = tf.RaggedTensor.from_value_rowids(tf.range(i), tf.range(i) // 2, nrows=2,
                                               validate=False)
        return rt.to_tensor()

    check(fixed_rows, MAX_N)


def test_to_tensor_of_two_ragged_levels():
    check(lambda i: tf.gather(RT2, INDEX[i]).to_tensor(), MAX_N)
    check(lambda i: tf.gather(RT2, tf.range(i)).to_tensor(shape=[None, 2, None]), MAX_N)


def test_to_tensor_gradients_match_the_loop():
    x = tf.constant([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])

    def body(i):
        rt = tf.RaggedTensor.from_row_splits(x[i, :SPLITS[i, -1]] ** 2, SPLITS[i], validate=False)
        return tf.reduce_sum(rt.to_tensor(default_value=1.0) * 3.0)

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        got = pf.pfor(body, 2, fallback="error")
        want = tf.stack([body(tf.constant(j)) for j in range(2)])
    np.testing.assert_allclose(got.numpy(), want.numpy())
    np.testing.assert_allclose(tape.gradient(got, x).numpy(), tape.gradient(want, x).numpy())


@pytest.mark.parametrize("rt", [RT1, RT2], ids=["rank1", "rank2"])
def test_a_row_of_a_captured_ragged_tensor(rt, case_modes):
    check_ragged_tensor(lambda i: rt[i], MAX_N, case_modes)
    check(lambda i: tf.reduce_sum(rt[i], axis=-1) if rt.ragged_rank == 1
          else tf.reduce_sum(rt[i].to_tensor(), axis=-1), MAX_N, modes=case_modes)


XLA_BODIES = {
    "range": lambda i: tf.reduce_sum(tf.ragged.range(COUNTS[i]).to_tensor()),
    "gather": lambda i: tf.reduce_sum(tf.gather(RT1, INDEX[i]).to_tensor()),
    "to_tensor": lambda i: tf.reduce_sum(tf.RaggedTensor.from_row_splits(
        VALUES[i], [0, 1, 4], validate=False).to_tensor()),
}


@pytest.mark.parametrize("body", sorted(XLA_BODIES))
def test_under_xla_the_converters_decline_with_the_reason(body):
    fn = tf.function(lambda: pf.pfor(XLA_BODIES[body], MAX_N, fallback="error"),
                     jit_compile=True, autograph=False)
    with pytest.raises(pf.ConversionError, match="under XLA"):
        fn()


# -- reductions over a RaggedTensor's rows (tf.repeat of its row lengths: Tile and a
# flattening Reshape of a ragged value, GatherV2 of ragged params by ragged indices) --


def test_reductions_over_the_rows_of_a_per_iteration_ragged_tensor():
    starts, limits = INDEX[:, 0], INDEX[:, 1] + 2
    bodies = [lambda i: tf.reduce_sum(tf.ragged.range(starts[:i], limits[:i]), axis=1),
              lambda i: tf.reduce_max(tf.gather(RT1, INDEX[i, :COUNTS[i]]), axis=1),
              lambda i: tf.reduce_sum(tf.gather(RT2, tf.range(i)), axis=[1, 2]),
              lambda i: tf.repeat(tf.range(COUNTS[i]), INDEX[i, :COUNTS[i]])]
    for k, body in enumerate(bodies):  # the bodies take the modes in turn
        check(body, MAX_N, modes=(testing.RUN_MODES[k % 3],))


def test_gradients_through_a_sum_over_gathered_rows():
    values = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])

    def body(i):
        rt = tf.RaggedTensor.from_row_splits(values ** 2, [0, 2, 2, 5, 6], validate=False)
        return tf.reduce_sum(tf.reduce_sum(tf.gather(rt, INDEX[i, :COUNTS[i]]), axis=1) * 3.0)

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(values)
        got = pf.pfor(body, MAX_N, fallback="error")
        want = tf.stack([body(tf.constant(j)) for j in range(MAX_N)])
    np.testing.assert_allclose(got.numpy(), want.numpy())
    np.testing.assert_allclose(tape.gradient(got, values).numpy(),
                               tape.gradient(want, values).numpy())


def test_gather_of_ragged_params_out_of_range_fails_like_the_loop():
    index = tf.constant([[0, 1], [0, 2]])
    testing.assert_fails_like_loop(lambda i: tf.gather(tf.range(i + 1), index[i, :i + 1]), 2)


@settings(max_examples=4, deadline=None)
@given(n=st.integers(0, MAX_N), seed=st.integers(0, 2**16), default=st.integers(-2, 2),
       shape=st.sampled_from([None, [None, 2], [2, None], [None, None]]),
       mode=st.sampled_from(testing.RUN_MODES))
def test_to_tensor_of_drawn_row_splits(n, seed, default, shape, mode):
    rng = np.random.default_rng(seed)
    splits, sizes, counts = np.zeros([MAX_N, 4], np.int64), [], []
    for j in range(MAX_N):
        rows = rng.integers(0, 4)
        ends = np.cumsum(rng.integers(0, 3, size=rows))
        splits[j, 1:rows + 1] = ends
        sizes.append(rows + 1)
        counts.append(int(ends[-1]) if rows else 0)
    splits, sizes, counts = (tf.constant(a) for a in (splits, sizes, counts))
    values = tf.constant(rng.integers(-5, 5, size=[MAX_N, 9]))

    def body(i):
        rt = tf.RaggedTensor.from_row_splits(values[i, :counts[i]], splits[i, :sizes[i]],
                                             validate=False)
        return rt.to_tensor(default_value=tf.constant(default, tf.int64), shape=shape)

    check(body, n, modes=(mode,))

    def per_iteration_default(i):  # each iteration's own default value
        rt = tf.RaggedTensor.from_row_splits(values[i, :counts[i]], splits[i, :sizes[i]],
                                             validate=False)
        return rt.to_tensor(default_value=tf.cast(i, tf.int64) + default, shape=shape)

    check(per_iteration_default, n, modes=(mode,))


def test_to_tensor_with_a_per_iteration_default_of_rows():
    """A default of the values' inner shape, per iteration, with stacked and ragged
    row splits."""
    values = tf.reshape(tf.range(24.0), [4, 3, 2])
    counts = tf.constant([3, 0, 2, 1])

    def body(i):
        rt = tf.RaggedTensor.from_row_lengths(values[i, :counts[i]],
                                              tf.stack([counts[i] - counts[i] // 2,
                                                        counts[i] // 2]))
        return rt.to_tensor(default_value=tf.gather(values, i)[0] * -1.0)

    check(body, 4)
    check(lambda i: tf.RaggedTensor.from_row_lengths(
        values[i, :counts[i]], tf.ones([counts[i]], tf.int32)).to_tensor(
            default_value=-tf.cast(i, tf.float32)), 4)


# -- RaggedGather of params built in the body -------------------------------------------

# Which parts of the body's params vary per iteration, level by level (row lengths of
# each ragged level, then the values): "U" the same in every iteration, "S" per
# iteration with a fixed count, "R" per iteration with a count of its own.
GATHER_KINDS = [("U", "S"), ("S", "S"), ("S", "R"), ("R", "R"), ("U", "U", "S"),
                ("U", "S", "R"), ("S", "R", "R"), ("R", "R", "R")]


def _lengths(rng, rows, total):
    """Row lengths of ``rows`` rows adding up to ``total`` (None: free, 0..2 each)."""
    if total is None:
        return rng.integers(0, 3, size=rows)
    cuts = np.sort(rng.integers(0, total + 1, size=rows - 1))
    return np.diff(np.concatenate([[0], cuts, [total]]))


def _body_params(kinds, rng):
    """A function of i: a RaggedTensor built in the body from row lengths and values
    that vary per iteration as ``kinds`` says. Every iteration has at least one row."""
    levels = len(kinds) - 1
    tables = [[] for _ in kinds]  # per level: each iteration's row lengths / values
    for j in range(MAX_N):
        rows = 2 if kinds[0] in "US" else int(rng.integers(1, 4))
        for level in range(levels):
            # A fixed count below (U or S) fixes this level's total.
            below = kinds[level + 1]
            total = (3 if level + 1 < levels else 4) if below in "US" else None
            lengths = _lengths(rng, rows, total)
            tables[level].append(lengths)
            rows = int(lengths.sum())
        tables[levels].append(rng.integers(-9, 9, size=rows).astype(np.float32))
    for level, kind in enumerate(kinds):  # "U": iteration 0's for every iteration
        if kind == "U":
            tables[level] = [tables[level][0]] * MAX_N
    # A "U" level above varying ones would not fit them: GATHER_KINDS avoids it.
    width = [max(len(t) for t in table) for table in tables]
    padded = [tf.constant(np.stack([np.pad(t, [0, w - len(t)]) for t in table]))
              for table, w in zip(tables, width)]
    fixed = [len(table[0]) for table in tables]  # the count of a U or S level
    counts = [tf.constant([len(t) for t in table], tf.int32) for table in tables]

    def part(level, i):
        kind = kinds[level]
        if kind == "U":
            return padded[level][0, :fixed[level]]
        if kind == "S":
            return padded[level][i, :fixed[level]]
        return padded[level][i, :counts[level][i]]

    def params(i):
        rt = part(levels, i)
        for level in reversed(range(levels)):
            rt = tf.RaggedTensor.from_row_lengths(rt, tf.cast(part(level, i), tf.int64))
        return rt

    return params


@pytest.mark.parametrize("kinds", GATHER_KINDS, ids="".join)
@settings(max_examples=2, deadline=None)
@given(n=st.integers(0, MAX_N), seed=st.integers(0, 2**16),
       index=st.sampled_from(["scalar", "vector", "ragged"]), mode=MODE)
def test_gather_of_params_built_in_the_body(kinds, n, seed, index, mode):
    rng = np.random.default_rng(seed)
    params = _body_params(kinds, rng)
    picks = tf.constant(rng.integers(0, 8, size=[MAX_N, 3]), tf.int32)
    counts = tf.constant(rng.integers(0, 4, size=MAX_N), tf.int32)

    def body(i):
        rt = params(i)
        valid = picks[i] % tf.cast(rt.nrows(), tf.int32)  # every iteration has rows
        return tf.gather(rt, {"scalar": valid[0], "vector": valid,
                              "ragged": valid[:counts[i]]}[index])

    check_ragged_tensor(body, n, (mode,))


def test_gather_of_params_built_in_the_body_out_of_range_fails_like_the_loop():
    values = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    testing.assert_fails_like_loop(
        lambda i: tf.gather(tf.RaggedTensor.from_row_lengths(values[i], [1, 2]),
                            tf.stack([i * 2])).flat_values, 2)


def test_validating_a_ragged_tensor_built_in_the_body_fails_like_the_loop():
    """from_row_lengths validates in an assert guard (an If) whose data are ragged: it
    fails when any iteration's row lengths do not add up, as the loop does."""
    values = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    counts = tf.constant([3, 2])
    body = lambda i: tf.reduce_sum(tf.RaggedTensor.from_row_lengths(  # noqa: E731
        values[i, :counts[i]], tf.constant([1, 2], tf.int64)), axis=1)
    testing.assert_fails_like_loop(body, 2)
    testing.assert_matches_loop(lambda i: body(0 * i), 2, graph=True)


def test_ragged_tensor_parts_of_every_kind():
    """Row splits the same in every iteration over values the body cannot size
    statically (they fit at run time), and per-iteration defaults over fixed values:
    the remaining input kinds of RaggedGather and RaggedTensorToTensor."""
    values = tf.reshape(tf.range(24.0), [4, 6])
    six = tf.fill([4], 6)  # every iteration keeps all 6: known only at run time

    def flat(i):  # U splits, R values
        return tf.RaggedTensor.from_row_splits(values[i, :six[i]], [0, 2, 2, 6])

    def nested(i):  # U splits over R splits over R values
        splits = tf.constant([0, 2, 6, 6], tf.int64)[:tf.fill([4], 4)[i]]  # all 4: run time
        middle = tf.RaggedTensor.from_row_splits(values[i, :six[i]], splits)
        return tf.RaggedTensor.from_row_splits(middle, [0, 1, 3])

    def under_fixed(i):  # U splits over U splits over R values
        middle = tf.RaggedTensor.from_row_splits(values[i, :six[i]], [0, 3, 6])
        return tf.RaggedTensor.from_row_splits(middle, [0, 1, 2])

    for k, params in enumerate((flat, nested, under_fixed)):  # the modes in turn
        check_ragged_tensor(lambda i: tf.gather(params(i), [1, 0]), 4,  # noqa: B023
                            (testing.RUN_MODES[k],))
    fixed = lambda i: tf.RaggedTensor.from_row_lengths(  # noqa: E731
        values[i], tf.stack([i % 3, 6 - i % 3]))
    varying = lambda i: tf.RaggedTensor.from_row_lengths(  # noqa: E731
        values[i], tf.concat([[6], tf.zeros([i], tf.int64)], 0))
    for k, rt in enumerate((fixed, varying)):
        check(lambda i: rt(i).to_tensor(default_value=-tf.cast(i, tf.float32)),  # noqa: B023
              4, modes=(testing.RUN_MODES[k + 1],))


ROWS, WIDTH = 3, 4


FLAT = tf.RaggedTensorSpec([None], tf.float32)


NESTED = tf.RaggedTensorSpec([2, None], tf.float32, ragged_rank=1)


def _draw(data):
    n = data.draw(st.integers(0, 4), label="n")
    values = data.draw(st.lists(st.integers(-3, 3), min_size=n * ROWS * WIDTH,
                                max_size=n * ROWS * WIDTH), label="values")
    return n, tf.constant(np.asarray(values, np.float32).reshape([n, ROWS, WIDTH]))


def positives(row):
    """A row's positive entries: a different number in every row."""
    return tf.boolean_mask(row, row > 0)


def halves(row):
    """A row's positive entries as two rows, cut after the first half of them."""
    kept = positives(row)
    first = tf.size(kept) // 2
    return tf.RaggedTensor.from_row_lengths(
        kept, tf.cast(tf.stack([first, tf.size(kept) - first]), tf.int64))


BODIES = {
    "sum": lambda x: tf.reduce_sum(tf.map_fn(positives, x, fn_output_signature=FLAT).flat_values),
    "to_tensor": lambda x: tf.map_fn(positives, x, fn_output_signature=FLAT).to_tensor(
        shape=[ROWS, WIDTH]),
    "nested": lambda x: tf.map_fn(halves, x, fn_output_signature=NESTED).to_tensor(
        shape=[ROWS, 2, WIDTH]),
    "row_lengths": lambda x: tf.map_fn(positives, x, fn_output_signature=FLAT).row_lengths(),
}


@settings(max_examples=12, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(BODIES)))
def test_map_fn_with_ragged_outputs_in_the_body(data, name):
    n, x = _draw(data)
    testing.assert_matches_loop(lambda i: BODIES[name](tf.gather(x, i)), n,
                                modes=testing.draw_modes(data))


@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_map_fn_result_returned_as_a_ragged_output(data):
    """The body returns the map_fn's RaggedTensor: one more ragged dimension."""
    n, x = _draw(data)
    testing.assert_matches_loop(
             lambda i: tf.map_fn(positives, tf.gather(x, i), fn_output_signature=FLAT).flat_values,
             n, ragged=True, modes=testing.draw_modes(data))
