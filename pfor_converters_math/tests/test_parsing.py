"""Tests for parsing under pfor: tf.Example protos (ParseExampleV2, ParseSingleExample)
and CSV lines (DecodeCSV), against the sequential loop and in ``pf.data.map_batched``.

Property tests draw the records (features present or missing, so defaults are used),
whether each iteration parses one record or a vector of them, and the loop length (0
included); all run with fallback="error". Sparse, ragged and variable-length dense
features are declined with a reason.
"""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing

iters = st.integers(0, 4)
seeds = st.integers(0, 2**31 - 1)


def example(rng, k):
    """A serialized tf.Example: ``x`` (k floats, always there), ``m`` (2x2 ints, always
    there), ``id`` and ``tag`` (each present or not, then defaulted)."""
    feature = {
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=rng.standard_normal(k))),
        "m": tf.train.Feature(int64_list=tf.train.Int64List(value=rng.integers(-9, 9, 4))),
    }
    if rng.random() < 0.6:
        feature["id"] = tf.train.Feature(int64_list=tf.train.Int64List(
            value=[int(rng.integers(0, 100))]))
    if rng.random() < 0.6:
        feature["tag"] = tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[rng.choice([b"cat", b"dog", b""])]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def features(k):
    return {
        "x": tf.io.FixedLenFeature([k], tf.float32),
        "m": tf.io.FixedLenFeature([2, 2], tf.int64),
        "id": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
        "tag": tf.io.FixedLenFeature([], tf.string, default_value="none"),
    }


def records(rng, shape, k):
    flat = [example(rng, k) for _ in range(int(np.prod(shape)))]
    return tf.constant(np.array(flat, dtype=object).reshape(shape))


def parse_single_raw(serialized, k):
    """The ParseSingleExample op (keys as attrs), which tf.io no longer builds."""
    spec = features(k)
    keys = sorted(spec)
    out = tf.raw_ops.ParseSingleExample(
        serialized=serialized,
        dense_defaults=[tf.constant(spec[key].default_value or [], spec[key].dtype)
                        for key in keys],
        num_sparse=0, sparse_keys=[], dense_keys=keys, sparse_types=[],
        dense_shapes=[spec[key].shape for key in keys])
    return dict(zip(keys, out.dense_values))


def _emitted_types(fn, spec):
    graph = tf.function(fn, autograph=False).get_concrete_function(spec).graph
    return {op.type for op in graph.get_operations()}


def test_test_functions_emit_the_ops_they_test():
    scalar = tf.TensorSpec([], tf.string)
    assert "ParseExampleV2" in _emitted_types(
        lambda s: tf.io.parse_single_example(s, features(2)), scalar)
    assert "ParseSingleExample" in _emitted_types(lambda s: parse_single_raw(s, 2), scalar)
    assert "DecodeCSV" in _emitted_types(lambda s: tf.io.decode_csv(s, [[0.0]]), scalar)


@settings(max_examples=25)
@given(data=st.data(), how=st.sampled_from(["single", "single_raw", "vector", "named"]),
       k=st.integers(0, 3), n=iters, seed=seeds)
def test_parse_dense_features(data, how, k, n, seed):
    rng = np.random.default_rng(seed)
    b = data.draw(st.integers(0, 3), label="records per iteration")
    per_iteration = [] if how.startswith("single") else [b]
    serialized = records(rng, [n] + per_iteration, k)
    names = tf.constant(np.array([f"r{j}" for j in range(n * b)], dtype=object)
                        .reshape([n, b]) if n * b else np.zeros([n, b], dtype=object))

    def parse(s, labels):
        if how == "single":
            return tf.io.parse_single_example(s, features(k))
        if how == "single_raw":
            return parse_single_raw(s, k)
        if how == "named":
            return tf.io.parse_example(s, features(k), example_names=labels)
        return tf.io.parse_example(s, features(k))

    mode = data.draw(st.sampled_from(testing.DRAWN_MODES[:2]), label="mode")
    testing.check_op(parse, [serialized, names], stacked=[True, True], n=n, mode=mode)


def test_parse_in_map_batched_equals_map_then_batch():
    rng = np.random.default_rng(0)
    ds = tf.data.Dataset.from_tensor_slices(records(rng, [7], 3))

    def parse(s):
        return tf.io.parse_single_example(s, features(3))

    fast = list(ds.apply(pf.data.map_batched(parse, 3, fallback="error")))
    slow = list(ds.map(parse).batch(3))
    assert len(fast) == len(slow) == 3
    for got, want in zip(fast, slow):
        testing.assert_same_results(got, want)


@pytest.mark.parametrize("feature, reason", [
    (tf.io.VarLenFeature(tf.float32), "sparse feature"),
    (tf.io.RaggedFeature(tf.float32), "ragged feature"),
    (tf.io.FixedLenSequenceFeature([], tf.float32, allow_missing=True),
     "not fully defined"),
])
def test_parse_of_non_dense_features_is_declined_with_a_reason(feature, reason):
    serialized = records(np.random.default_rng(1), [3], 2)

    def body(i):
        value = tf.io.parse_single_example(tf.gather(serialized, i), {"x": feature})["x"]
        if isinstance(value, tf.SparseTensor):
            return tf.sparse.to_dense(value)
        if isinstance(value, tf.RaggedTensor):
            return value.to_tensor()
        return value

    with pytest.raises(pf.ConversionError, match=f"ParseExampleV2.*{reason}"):
        pf.pfor(body, 3, fallback="error")


# -- CSV --------------------------------------------------------------------------------

DEFAULTS = ([0.5], [7], ["none"], [tf.constant(0, tf.int64)])


def csv_line(rng):
    """A line of four fields, each possibly empty (then defaulted)."""
    fields = [f"{rng.standard_normal():.3f}", str(rng.integers(-50, 50)),
              rng.choice(["a", "b c", '"q,uoted"']), str(rng.integers(0, 10**12))]
    return ",".join("" if rng.random() < 0.3 else f for f in fields)


@settings(max_examples=20)
@given(data=st.data(), lead=st.lists(st.integers(0, 3), max_size=2),
       select=st.booleans(), n=iters, seed=seeds)
def test_decode_csv(data, lead, select, n, seed):
    rng = np.random.default_rng(seed)
    lines = [csv_line(rng) for _ in range(int(np.prod([n] + lead)))]
    lines = tf.constant(np.array(lines, dtype=object).reshape([n] + lead))
    cols, defaults = ([0, 2], [DEFAULTS[0], DEFAULTS[2]]) if select else (None, DEFAULTS)
    mode = data.draw(st.sampled_from(testing.DRAWN_MODES), label="mode")
    testing.check_op(lambda s: tf.io.decode_csv(s, defaults, select_cols=cols), [lines],
                     stacked=[True], n=n, mode=mode)


def test_decode_csv_in_map_batched_equals_map_then_batch():
    rng = np.random.default_rng(2)
    ds = tf.data.Dataset.from_tensor_slices([csv_line(rng) for _ in range(5)])

    def decode(line):
        return tf.io.decode_csv(line, DEFAULTS)

    fast = list(ds.apply(pf.data.map_batched(decode, 2, fallback="error")))
    slow = list(ds.map(decode).batch(2))
    assert len(fast) == len(slow) == 3
    for got, want in zip(fast, slow):
        testing.assert_same_results(got, want)
