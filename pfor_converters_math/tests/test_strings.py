"""String ops (strings.py) against the loop, with no fallback: elementwise ops with their
attrs, RegexReplace, Substr and StringJoin for every mix of per-iteration and invariant
operands, ReduceJoin over fixed axes; tf.strings.split (StringSplitV2) of a
per-iteration string or string vector: whitespace and a given sep, maxsplit, empty
strings, iterations with no string, a split reduced to a fixed shape."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing

PIECES = np.array(["a", "B", " ", "Zz", "", "1", "-2.5", "\u00fcber", "o\u00df"])
NUMBERS = np.array(["1", "-2.5", "3e2", "0", "17", "-0.125"])


def strings(rng, shape, pieces=PIECES):
    flat = ["".join(rng.choice(pieces, size=rng.integers(0, 4)))
            for _ in range(int(np.prod(shape)))]
    return tf.constant(np.array(flat, dtype=object).reshape(shape), tf.string)


def draw_shape(data, min_rank=0):
    return data.draw(st.lists(st.integers(0, 3), min_size=min_rank, max_size=2), label="shape")


ELEMENTWISE = {
    "upper": lambda s: tf.strings.upper(s),
    "upper_utf8": lambda s: tf.strings.upper(s, encoding="utf-8"),
    "lower": lambda s: tf.strings.lower(s),
    "static_regex": lambda s: tf.strings.regex_replace(s, "[aZ]+", "<\\0>"),
    "static_regex_first": lambda s: tf.strings.regex_replace(s, "z", "", replace_global=False),
    "hash": lambda s: tf.strings.to_hash_bucket(s, 7),
    "hash_fast": lambda s: tf.strings.to_hash_bucket_fast(s, 5),
    "hash_strong": lambda s: tf.strings.to_hash_bucket_strong(s, 11, [3, 9]),
    "transcode": lambda s: tf.strings.unicode_transcode(s, "UTF-8", "UTF-16-BE"),
    "transcode_replace": lambda s: tf.strings.unicode_transcode(
        s, "UTF-8", "UTF-8", errors="replace", replacement_char=63),
    "strip": lambda s: tf.strings.strip(s),
    "length": lambda s: tf.strings.length(s, unit="UTF8_CHAR"),
}


@settings(max_examples=40)
@given(st.data(), st.sampled_from(sorted(ELEMENTWISE)))
def test_elementwise(data, name):
    n = data.draw(st.integers(0, 4), label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = strings(rng, [n] + draw_shape(data))
    testing.check(data, ELEMENTWISE[name], [x], stacked=[True], n=n)


@given(st.data(), st.sampled_from([tf.float32, tf.float64, tf.int32, tf.int64]))
def test_to_number(data, dtype):
    n = data.draw(st.integers(0, 4), label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    shape = [n] + draw_shape(data)
    pieces = NUMBERS if dtype.is_floating else NUMBERS[[0, 2 - 2, 3, 4]]
    x = tf.constant(rng.choice(pieces, size=shape).astype(object), tf.string)
    testing.check(data, lambda s: tf.strings.to_number(s, dtype), [x], stacked=[True], n=n)


@given(st.data())
def test_as_string_and_unicode_script(data):
    n = data.draw(st.integers(0, 4), label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    shape = [n] + draw_shape(data)
    x = tf.constant(rng.standard_normal(shape) * 100, tf.float32)
    form = data.draw(st.sampled_from([{}, {"precision": 2}, {"scientific": True},
                                      {"width": 9, "fill": "0"}]))
    testing.check(data, lambda v: tf.strings.as_string(v, **form), [x], stacked=[True], n=n)
    codes = tf.constant(rng.choice([65, 0x3b1, 0x416, 0x5d0, 0x4e00, 48, 1 << 22], size=shape),
                        tf.int32)
    testing.check(data, tf.strings.unicode_script, [codes], stacked=[True], n=n)


def test_elementwise_errors_like_the_loop():
    bad = tf.constant([["1", "x"], ["2", "3"]])
    testing.assert_fails_like_loop(lambda i: tf.strings.to_number(bad[i]), 2)


@given(st.data())
def test_regex_replace_of_per_iteration_strings(data):
    n = data.draw(st.integers(0, 4), label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = strings(rng, [n] + draw_shape(data))
    pattern, rewrite = tf.constant("[B ]"), tf.constant("_")
    glob = data.draw(st.booleans())

    def body(s):
        # Patterns computed in the body stay inputs of RegexReplace (not static attrs).
        return tf.strings.regex_replace(s, tf.identity(pattern), tf.identity(rewrite),
                                        replace_global=glob)

    testing.check(data, body, [x], stacked=[True], n=n)


@settings(max_examples=40)
@given(st.data())
def test_substr_every_layout(data):
    n = data.draw(st.integers(0, 4), label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    combo = data.draw(st.sampled_from(testing.invariance_combinations(3)), label="stacked")
    # The strings' shape and (one) shape of pos/len: pos/len broadcast against them.
    shape = draw_shape(data, min_rank=1)
    pos_shape = data.draw(st.sampled_from([[], shape, shape[-1:]]), label="pos shape")
    x = tf.constant(rng.choice(["hello", "abcdef", "xyz0123"], size=shape).astype(object),
                    tf.string)
    # Positions within the shortest string; negative ones count from the end.
    pos = tf.constant(rng.integers(-3, 4, size=pos_shape), tf.int32)
    length = tf.constant(rng.integers(0, 5, size=pos_shape), tf.int32)
    unit = data.draw(st.sampled_from(["BYTE", "UTF8_CHAR"]))
    args = [tf.repeat(a[None], n, axis=0) if s else a for a, s in zip([x, pos, length], combo)]
    testing.check(data, lambda s, p, l: tf.strings.substr(s, p, l, unit=unit), args,
                  stacked=list(combo), n=n)


def test_mismatched_shapes_fail_like_the_loop():
    """Broadcasting the operands must not hide a shape the kernel rejects."""
    words = tf.constant([["ab", "cd", "ef"], ["gh", "ij", "kl"]])
    # Shapes unknown to shape inference, which would reject them while tracing.
    pos = tf.Variable([[0], [1]], shape=tf.TensorShape([None, None]))
    ones = tf.Variable([[1, 1, 1]] * 2, shape=tf.TensorShape([None, None]))
    testing.assert_fails_like_loop(
        lambda i: tf.strings.substr(words[i], pos.read_value()[i], ones.read_value()[i]), 2)
    testing.assert_fails_like_loop(
        lambda i: tf.strings.join([words[i], tf.strings.as_string(pos.read_value()[i])]), 2)


def test_substr_out_of_range_fails_like_the_loop():
    words = tf.constant(["abc", "de"])
    pos = tf.constant([1, 5])
    testing.assert_fails_like_loop(lambda i: tf.strings.substr(words[i], pos[i], 1), 2)


@settings(max_examples=40)
@given(st.data())
def test_string_join_every_layout(data):
    n = data.draw(st.integers(0, 4), label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    count = data.draw(st.integers(1, 3), label="count")
    combo = data.draw(st.sampled_from(testing.invariance_combinations(count)), label="stacked")
    shape = draw_shape(data, min_rank=1)
    scalar = [data.draw(st.booleans()) for _ in range(count)]
    args = [strings(rng, ([n] if s else []) + ([] if sc else shape))
            for s, sc in zip(combo, scalar)]
    sep = data.draw(st.sampled_from(["", "-", ", "]))
    testing.check(data, lambda *xs: tf.strings.join(list(xs), separator=sep), args,
                  stacked=list(combo), n=n)


@given(st.data())
def test_reduce_join_over_fixed_axes(data):
    n = data.draw(st.integers(0, 4), label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    shape = draw_shape(data, min_rank=1) + data.draw(st.lists(st.integers(0, 3), max_size=1))
    rank = len(shape)
    axis = data.draw(st.sampled_from([None, 0, -1, list(range(rank))[::-1], [-1, 0]]))
    if isinstance(axis, list) and len(set(a % rank for a in axis)) < len(axis):
        axis = axis[:1]
    keepdims = data.draw(st.booleans())
    sep = data.draw(st.sampled_from(["", "|"]))
    x = strings(rng, [n] + shape)
    testing.check(data, lambda s: tf.strings.reduce_join(s, axis=axis, keepdims=keepdims,
                                                         separator=sep),
                  [x], stacked=[True], n=n)


def test_reduce_join_bad_axis_fails_like_the_loop():
    x = tf.constant([["a", "b"], ["c", "d"]])
    axes = tf.Variable([2])  # a value shape inference cannot see
    testing.assert_fails_like_loop(
        lambda i: tf.raw_ops.ReduceJoin(inputs=x[i], reduction_indices=axes.read_value()), 2,
        error=tf.errors.OutOfRangeError)
    testing.assert_fails_like_loop(
        lambda i: tf.raw_ops.ReduceJoin(inputs=x[i], reduction_indices=-axes.read_value() - 1), 2,
        error=tf.errors.OutOfRangeError)


@pytest.mark.parametrize("which", ["pattern", "rewrite"])
def test_per_iteration_regex_falls_back(which):
    """One pattern per kernel call: a per-iteration pattern runs in the loop, right."""
    words = tf.constant(["aab", "bba"])
    pats = tf.constant(["a", "b"])

    def body(i):
        pattern, rewrite = (pats[i], "-") if which == "pattern" else ("a", pats[i])
        return tf.strings.regex_replace(words[i], pattern, rewrite)

    with pytest.raises(pf.ConversionError, match="RegexReplace"):
        pf.pfor(body, 2, fallback="error")
    testing.assert_matches_loop(body, 2, fallback="loop")


MAX_N = 4


WORDS = tf.constant(["a bb c", "", "dd  e", "x", "  lead and trail  "])


TABLE = tf.constant([["a bb c", ""], ["", ""], ["dd  e", "x y z w"], ["x", "q,r"]])


COUNTS = tf.constant([2, 0, 1, 2])


def check(body, n, modes=testing.RUN_MODES):
    """A body returning a tensor or a tf.RaggedTensor: pfor (in each of ``modes``)
    equals the loop row by row; nothing falls back."""
    want = [body(tf.constant(j)) for j in range(n)]
    if want and not isinstance(want[0], tf.RaggedTensor):
        testing.assert_matches_loop(body, n, modes=modes, ragged_outputs=True)
        return
    want = [w.to_list() for w in want]
    for mode in modes:
        got = testing.run_in_mode(body, n, mode, fallback="error", ragged_outputs=True)
        got = got.to_list() if isinstance(got, tf.RaggedTensor) else got.numpy().tolist()
        assert got == want, mode


SPLITS = {
    "whitespace": lambda s: tf.strings.split(s),
    "space": lambda s: tf.strings.split(s, sep=" "),
    "comma": lambda s: tf.strings.split(s, sep=","),
    "maxsplit": lambda s: tf.strings.split(s, maxsplit=1),
}


@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize("source", ["scalar", "vector", "ragged"])
def test_split(split, source, case_modes):
    fn = SPLITS[split]
    pick = {"scalar": lambda i: WORDS[i], "vector": lambda i: TABLE[i],
            "ragged": lambda i: TABLE[i, :COUNTS[i]]}[source]
    check(lambda i: fn(pick(i)), MAX_N, case_modes)
    check(lambda i: tf.size(fn(pick(i))), MAX_N, case_modes)


def test_split_dense_and_reduced_results():
    check(lambda i: tf.strings.split(TABLE[i]).to_tensor(default_value="-"), MAX_N)
    check(lambda i: tf.strings.split(TABLE[i, :COUNTS[i]]).row_lengths(), MAX_N)
    check(lambda i: tf.strings.length(tf.strings.split(WORDS[i])), 5)
    check(lambda i: tf.strings.length(TABLE[i], unit="UTF8_CHAR"), MAX_N)


def test_split_of_no_iteration_and_of_empty_rows():
    empty = tf.zeros([3, 0], tf.string)
    check(lambda i: tf.strings.split(empty[i]), 3)
    check(lambda i: tf.strings.split(WORDS[i]), 0)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(0, MAX_N), ragged=st.booleans(), sep=st.sampled_from([None, " ", "ab"]),
       seed=st.integers(0, 2**16), mode=st.sampled_from(testing.RUN_MODES))
def test_split_of_drawn_strings(n, ragged, sep, seed, mode):
    rng = np.random.default_rng(seed)
    pieces = np.array(["a", "b", " ", "ab", ""])
    strings = ["".join(rng.choice(pieces, size=rng.integers(0, 6))) for _ in range(MAX_N * 3)]
    table = tf.constant(np.array(strings).reshape(MAX_N, 3))
    counts = tf.constant(rng.integers(0, 4, size=MAX_N), tf.int32)
    check(lambda i: tf.strings.split(table[i, :counts[i]] if ragged else table[i], sep=sep), n,
          (mode,))
