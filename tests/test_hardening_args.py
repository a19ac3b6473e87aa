"""Issue 17, arguments at the edges: no silent truncation, wrapping or mis-mapping.

- ``iters`` beyond the int32 range is a clear error (statically and at run time).
- Leading sizes that differ only at run time fail with the arguments named, in
  ``vectorized_map``, ``map_fn``, ``vmap`` and ``per_example_gradients``;
  ``vectorized_map`` broadcasts a single row as ``tf.vectorized_map`` does.
- ``vmap``'s dict ``in_axes`` match by key; ``map_fn``'s ``fn_output_signature`` is
  checked; derivatives of integer outputs are a TypeError.
- Composite values (extension types, SparseTensor, IndexedSlices) in and out.
- Eager values captured by the body (large tensors, variable handles) and v1 graphs.
- Inputs of unknown rank take the converters' dynamic paths (strict mode).
"""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing


def runtime_fn(fn, *specs):
    """``fn`` in a tf.function whose inputs have the given shapes (None dims unknown)."""
    return tf.function(fn, input_signature=[tf.TensorSpec(s, d) for s, d in specs],
                       autograph=False)


# -- iters beyond int32 -----------------------------------------------------------------
@pytest.mark.parametrize("iters", [2**31, 2**32 + 2, np.int64(2**31),
                                   tf.constant(2**32 + 2, tf.int64)])
def test_static_iters_beyond_int32_is_named(iters):
    with pytest.raises(ValueError, match=r"iters=\d+ is more than pfor supports.*2\*\*31 - 1"):
        pf.pfor(lambda i: i, iters)


def test_runtime_int64_iters_beyond_int32_fails_instead_of_wrapping():
    run = runtime_fn(lambda n: pf.pfor(lambda i: i * 2, n, fallback="error"),
                     ([], tf.int64))
    with pytest.raises(tf.errors.InvalidArgumentError, match="iters is more than pfor supports"):
        run(tf.constant(2**32 + 2, tf.int64))  # would wrap to 2 iterations
    with pytest.raises(tf.errors.InvalidArgumentError, match="iters must be >= 0"):
        run(tf.constant(-2**32 + 2, tf.int64))  # would wrap to 2 as well
    testing.assert_allclose(run(tf.constant(3, tf.int64)), tf.constant([0, 2, 4]))


@pytest.mark.parametrize("dtype", [tf.uint8, tf.int16, tf.int64, tf.uint32])
def test_runtime_iters_of_other_integer_dtypes(dtype):
    run = runtime_fn(lambda n: pf.pfor(lambda i: i + 1, n, fallback="error"), ([], dtype))
    testing.assert_allclose(run(tf.constant(4, dtype)), tf.constant([1, 2, 3, 4]))


# -- leading sizes --------------------------------------------------------------------
X3 = tf.reshape(tf.range(6.0), [3, 2])
ROW = tf.constant([[10.0, 20.0]])


def test_vectorized_map_runtime_leading_sizes_are_checked():
    run = runtime_fn(lambda a, b: pf.vectorized_map(lambda e: e[0] + e[1], (a, b),
                                                    fallback="error"),
                     ([None, 2], tf.float32), ([None, 2], tf.float32))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"elems have different leading sizes.*elems\[0\]:\] \[3\] "
                             r"\[elems\[1\]:\] \[2\]"):
        run(X3, tf.ones([2, 2]))
    testing.assert_allclose(run(X3, X3), X3 * 2)


@pytest.mark.parametrize("other", [tf.ones([2, 2]), tf.ones([4, 2])])
def test_map_fn_runtime_leading_sizes_are_checked(other):
    run = runtime_fn(lambda a, b: pf.map_fn(lambda e: e[0] + e[1], (a, b), fallback="error"),
                     ([None, 2], tf.float32), ([None, 2], tf.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"elems\[1\]:\] \[(2|4)\]"):
        run(X3, other)
    # tf.map_fn does not broadcast: a single row is an error too.
    with pytest.raises(tf.errors.InvalidArgumentError, match="different leading sizes"):
        run(X3, ROW)


def test_vmap_runtime_leading_sizes_are_checked():
    add = pf.vmap(lambda a, b: a + b, fallback="error")
    run = runtime_fn(add, ([None, 2], tf.float32), ([None, 2], tf.float32))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"args\[0\] \(axis 0\):\] \[3\] \[args\[1\] \(axis 0\):\] \[2\]"):
        run(X3, tf.ones([2, 2]))
    testing.assert_allclose(run(X3, X3), X3 * 2)


def test_vmap_leading_size_error_is_a_value_error_when_called_eagerly():
    """A vmap traced for unknown sizes, then called eagerly with mismatched ones."""
    add = pf.vmap(lambda a, b: a + b, fallback="error")
    runtime_fn(add, ([None, 2], tf.float32), ([None, 2], tf.float32))(X3, X3)
    with pytest.raises(ValueError, match=r"args\[0\] \(axis 0\): 3 args\[1\] \(axis 0\): 2"):
        add(X3, tf.ones([2, 2]))


def test_per_example_gradients_runtime_leading_sizes_are_checked():
    w = tf.Variable([1.0, 2.0])
    run = runtime_fn(lambda a, b: pf.per_example_gradients(
        lambda r, s: tf.reduce_sum(w * r * s), [w], a, b, fallback="error"),
        ([None, 2], tf.float32), ([None, 2], tf.float32))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"batch have different leading sizes.*\[batch\[1\]:\] \[2\]"):
        run(X3, tf.ones([2, 2]))
    (grads,) = run(X3, X3)
    testing.assert_allclose(grads, X3 * X3)


def test_static_leading_sizes_name_the_arguments():
    with pytest.raises(ValueError, match=r"elems\['a'\] has 3, elems\['b'\] has 2"):
        pf.map_fn(lambda e: e["a"], {"a": X3, "b": tf.ones([2])})
    with pytest.raises(ValueError, match=r"batch\[0\] has 3, batch\[1\] has 4"):
        pf.per_example_gradients(lambda a, b: tf.reduce_sum(a) * b, [tf.Variable(1.0)],
                                 X3, tf.ones([4]))


# -- vectorized_map broadcasts single rows -----------------------------------------------
def _expected_rows(fn, elems, n):
    rows = []
    for j in range(n):
        row = tf.nest.map_structure(lambda t: t[j if t.shape[0] > 1 else 0], elems)
        rows.append(fn(row))
    return tf.stack(rows) if rows else None


def test_vectorized_map_broadcasts_a_single_row_statically():
    fn = lambda e: e[0] * e[1] + e[2]  # noqa: E731
    elems = (X3, ROW, tf.constant([1.0]))
    got = pf.vectorized_map(fn, elems, fallback="error")
    testing.assert_allclose(got, _expected_rows(fn, elems, 3))
    only_rows = (ROW, ROW * 2)
    testing.assert_allclose(pf.vectorized_map(lambda e: e[0] + e[1], only_rows,
                                              fallback="error"), ROW * 3)


def test_vectorized_map_broadcasts_a_single_row_at_run_time():
    run = runtime_fn(lambda a, b: pf.vectorized_map(lambda e: e[0] * e[1], (a, b),
                                                    fallback="error"),
                     ([None, 2], tf.float32), ([None, 2], tf.float32))
    testing.assert_allclose(run(X3, ROW), X3 * ROW)
    testing.assert_allclose(run(ROW, X3), X3 * ROW)
    testing.assert_allclose(run(ROW, ROW), ROW * ROW)
    assert run(tf.zeros([0, 2]), ROW).shape == (0, 2)  # a row broadcasts against none
    with pytest.raises(tf.errors.InvalidArgumentError, match="each must have the same number "
                                                            "of rows, or 1"):
        run(X3, tf.ones([2, 2]))


def test_vectorized_map_different_sizes_above_one_are_an_error():
    with pytest.raises(ValueError, match=r"different leading sizes \[1, 2, 3\]: elems\[0\] has 3, "
                                         r"elems\[1\] has 1, elems\[2\] has 2"):
        pf.vectorized_map(lambda e: e[0], (X3, ROW, tf.ones([2, 2])))


# -- vmap dict in_axes --------------------------------------------------------------------
def test_vmap_dict_in_axes_match_by_key():
    f = lambda d: d["a"] * 10.0 + d["b"]  # noqa: E731
    a, b = X3, tf.constant([1.0, 2.0])
    want = X3 * 10.0 + b
    # Keys in another order than the argument's still map the right leaf.
    got = pf.vmap(f, in_axes=({"b": None, "a": 0},), fallback="error")({"a": a, "b": b})
    testing.assert_allclose(got, want)
    nested = pf.vmap(lambda d: d["a"]["u"] + d["b"], in_axes=({"a": 0, "b": None},),
                     fallback="error")
    testing.assert_allclose(nested({"a": {"u": a}, "b": b}), a + b)


@pytest.mark.parametrize("in_axes, match", [
    (({"a": 0, "c": None},), r"in_axes\[0\] has keys \['a', 'c'\] but the dict it maps has "
                             r"keys \['a', 'b'\]"),
    (({"a": 0},), r"has keys \['a'\] but the dict it maps has keys \['a', 'b'\]"),
    (({"a": 0, "b": None, "c": 0},), r"keys \['a', 'b', 'c'\]"),
    (({"a": {"x": 0}, "b": None},), r"in_axes\[0\]\['a'\]=\{'x': 0\} is a dict but"),
    (({"a": "0", "b": None},), r"entries must be ints or None"),
])
def test_vmap_dict_in_axes_that_do_not_match_raise(in_axes, match):
    f = pf.vmap(lambda d: d["a"] + d["b"], in_axes=in_axes)
    with pytest.raises((ValueError, TypeError), match=match):
        f({"a": X3, "b": tf.constant([1.0, 2.0])})


# -- map_fn's fn_output_signature ---------------------------------------------------------
class Pair(tf.experimental.ExtensionType):
    a: tf.Tensor
    b: tf.Tensor


class BatchablePair(tf.experimental.BatchableExtensionType):
    a: tf.Tensor
    b: tf.Tensor


def two(row):
    return row[0], tf.cast(row, tf.int32)


@pytest.mark.parametrize("signature", [
    (tf.float32, tf.int32),
    (tf.TensorSpec([], tf.float32), tf.TensorSpec([2], tf.int32)),
    (tf.TensorSpec(None, tf.float32), tf.TensorSpec([None], tf.int32)),
    ["float32", np.int32],
])
def test_map_fn_accepts_matching_signatures(signature):
    got = pf.map_fn(two, X3, fn_output_signature=signature, fallback="error")
    testing.assert_same_results(got, testing.sequential(lambda i: two(tf.gather(X3, i)), 3))


@pytest.mark.parametrize("fn, signature, error, match", [
    (two, (tf.float32, tf.float32), TypeError, r"int32 at output/1 but .* says float32"),
    (two, (tf.float32, tf.TensorSpec([3], tf.int32)), ValueError,
     r"shape \(2,\) at output/1 but fn_output_signature says \(3,\)"),
    (two, tf.float32, TypeError, "does not match fn_output_signature"),
    (two, (tf.float32, tf.int32, tf.int32), TypeError, "does not match"),
    (lambda r: {"u": r}, {"v": tf.float32}, TypeError, r"\{'u': '\.'\} against \{'v': '\.'\}"),
    (lambda r: r, tf.SparseTensorSpec([2], tf.float32), TypeError, "does not match"),
    (lambda r: BatchablePair(a=r, b=r),
     BatchablePair.Spec(a=tf.TensorSpec([3]), b=tf.TensorSpec([2])), TypeError,
     "does not match fn_output_signature's"),
    (lambda r: r, "nonsense", TypeError, "must be dtypes or tf.TypeSpecs"),
    (lambda r: r, tf.RaggedTensorSpec([2, None], tf.float32), ValueError,
     r"shape \(2,\) at output but fn_output_signature says \(2, None\)"),
])
def test_map_fn_checks_the_signature(fn, signature, error, match):
    with pytest.raises(error, match=match):
        pf.map_fn(fn, X3, fn_output_signature=signature)


def test_map_fn_signature_of_an_extension_type():
    spec = BatchablePair.Spec(a=tf.TensorSpec([2]), b=tf.TensorSpec([], tf.float32))
    got = pf.map_fn(lambda r: BatchablePair(a=r, b=r[1]), X3, fn_output_signature=spec,
                    fallback="error")
    testing.assert_allclose(got.a, X3)
    testing.assert_allclose(got.b, X3[:, 1])


# -- derivatives of integer outputs ------------------------------------------------------
def _tape_of(fn, x):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = fn(x)
    return tape, y


@pytest.mark.parametrize("call", [
    lambda: pf.jacobian(lambda v: tf.cast(v, tf.int32), X3),
    lambda: pf.jacobian(lambda v: (v, tf.cast(v, tf.int64)), X3),
    lambda: pf.batch_jacobian(lambda v: tf.cast(v * 2, tf.int32), X3),
    lambda: pf.hessian(lambda v: tf.cast(tf.reduce_sum(v), tf.int32), X3),
    lambda: pf.tape_jacobian(*_tape_of(lambda v: tf.cast(v, tf.int32), X3), X3),
    lambda: pf.tape_batch_jacobian(*_tape_of(lambda v: tf.cast(v, tf.int32), X3), X3),
])
def test_derivatives_of_integer_outputs_raise(call):
    with pytest.raises(TypeError, match=r"floating-point values to differentiate, got int"):
        call()


# -- composite values -------------------------------------------------------------------
def test_extension_types_returned_and_mapped():
    for cls in (Pair, BatchablePair):
        out = pf.vectorized_map(lambda r: cls(a=r, b=r * 2.0), X3, fallback="error")
        assert isinstance(out, cls)
        testing.assert_allclose(out.a, X3)
        testing.assert_allclose(out.b, X3 * 2.0)
        mapped = pf.vectorized_map(lambda p: p.a + p.b, cls(a=X3, b=X3 * 3.0),
                                   fallback="error")
        testing.assert_allclose(mapped, X3 * 4.0)
        through = pf.map_fn(lambda p: cls(a=p.b, b=p.a), cls(a=X3, b=-X3), fallback="error")
        testing.assert_allclose(through.a, -X3)
    run = runtime_fn(lambda t: pf.vectorized_map(lambda p: BatchablePair(a=p.a * 2, b=p.b),
                                                 BatchablePair(a=t, b=t), fallback="error"),
                     ([None, 2], tf.float32))
    testing.assert_allclose(run(X3).a, X3 * 2)


def test_sparse_tensor_returned_is_one_stacked_sparse_tensor():
    def loop_fn(i):
        values = tf.gather(X3, i)
        return tf.SparseTensor([[0], [2]], values, [3 + i % 2])

    expected = tf.stack([tf.sparse.to_dense(loop_fn(tf.constant(j)))[:3] for j in range(3)])
    for run in (lambda: pf.pfor(loop_fn, 3, fallback="error"),
                lambda: tf.function(lambda n: pf.pfor(loop_fn, n, fallback="error"))(
                    tf.constant(3))):
        out = run()
        assert isinstance(out, tf.SparseTensor)
        testing.assert_allclose(out.dense_shape, tf.constant([3, 4], tf.int64))  # largest
        testing.assert_allclose(tf.sparse.to_dense(out)[:, :3], expected)
    empty = pf.pfor(loop_fn, 0, fallback="error")
    assert isinstance(empty, tf.SparseTensor) and empty.values.shape[0] == 0


def test_indexed_slices_become_dense():
    def fn(row):
        return tf.IndexedSlices(row[None], tf.constant([1]), tf.constant([3, 2]))

    got = pf.vectorized_map(fn, X3, fallback="error")
    testing.assert_allclose(got, tf.stack([tf.convert_to_tensor(fn(r)) for r in X3]))
    slices = tf.IndexedSlices(X3, tf.constant([0, 2, 3]), tf.constant([4, 2]))
    got = pf.vectorized_map(lambda r: r * 2.0, slices, fallback="error")
    testing.assert_allclose(got, tf.convert_to_tensor(slices) * 2.0)


@pytest.mark.parametrize("call, match", [
    (lambda: pf.vectorized_map(tf.sparse.to_dense, tf.sparse.from_dense(X3)),
     r"elems holds a SparseTensor at elems: .*tf\.sparse\.to_dense"),
])
def test_sparse_inputs_get_clear_errors(call, match):
    """(RaggedTensors in and out are mapped: tests/test_ragged_core.py.)"""
    with pytest.raises(TypeError, match=match):
        call()


# -- eager captures and v1 graphs -----------------------------------------------------
def test_large_eager_captures_reach_converters_as_graph_tensors():
    """Over 1000 elements, an eager tensor is captured by placeholder, not folded into
    a constant: converters that look at ``.op`` (BiasAdd's unfolding) must still work."""
    big = tf.reshape(tf.range(40 * 5 * 10, dtype=tf.float32), [40, 5, 10])
    bias = tf.range(10, dtype=tf.float32)
    testing.assert_matches_loop(lambda i: tf.nn.bias_add(tf.gather(big, i), bias), 40)
    variable = tf.Variable(tf.ones([50]))
    testing.assert_matches_loop(lambda i: variable * tf.cast(i, tf.float32), 3, graph=True)


def test_v1_graph_with_a_resource_variable_in_strict_mode():
    graph = tf.compat.v1.Graph()
    with graph.as_default():
        w = tf.compat.v1.get_variable("w", initializer=tf.reshape(tf.range(12.0), [3, 4]),
                                      use_resource=True)
        x = tf.compat.v1.placeholder(tf.float32, [3, 2, 4])

        def loop_fn(i):
            row = tf.gather(w, i)  # ResourceGather of the loop index
            return tf.nn.bias_add(tf.gather(x, i), row) + w.read_value()[0]

        out = pf.pfor(loop_fn, 3, fallback="error")
        expected = tf.stack([loop_fn(tf.constant(j)) for j in range(3)])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            feed = {x: np.arange(24, dtype=np.float32).reshape(3, 2, 4)}
            got, want = session.run([out, expected], feed)
    np.testing.assert_allclose(got, want)


def test_v1_graph_using_an_eager_variable_is_a_clear_error():
    variable = tf.Variable(tf.ones([4]))
    with tf.compat.v1.Graph().as_default():
        with pytest.raises(ValueError, match="created eagerly.*Create the variables inside the graph"):
            pf.pfor(lambda i: variable * tf.cast(i, tf.float32), 3)


# -- unknown ranks ---------------------------------------------------------------------
R = np.random.default_rng(0)
A = tf.constant(R.normal(size=[3, 4, 5]), tf.float32)
B = tf.constant(R.normal(size=[4, 5]), tf.float32)
V = tf.constant(R.normal(size=[5]), tf.float32)
IDX = tf.constant([[0, 3], [1, 1], [2, 0]])

UNKNOWN_RANK = {
    "exp": (tf.exp, [A], [True]),
    "add SS": (tf.add, [A, A], [True, True]),
    "add SU": (tf.add, [A, B], [True, False]),
    "add lower invariant": (tf.add, [A, V], [True, False]),
    "add lower stacked": (tf.add, [A, tf.constant(R.normal(size=[3, 5]), tf.float32)],
                          [True, True]),
    "greater invariant scalar": (lambda a: tf.cast(a > 0.0, tf.float32), [A], [True]),
    "mean axis 1": (lambda a: tf.reduce_mean(a, axis=1), [A], [True]),
    "sum axis -1 keepdims": (lambda a: tf.reduce_sum(a, axis=-1, keepdims=True), [A], [True]),
    "max all": (tf.reduce_max, [A], [True]),
    "argmax": (lambda a: tf.argmax(a, axis=-1), [A], [True]),
    "cumsum": (lambda a: tf.cumsum(a, axis=0), [A], [True]),
    "l2_normalize": (lambda a: tf.math.l2_normalize(a, -1), [A], [True]),
    "gather loop index": (lambda a: a * 2.0, [A], [True]),
    "gather stacked indices": (lambda p, i: tf.gather(p, i), [B, IDX], [False, True]),
    "gather axis 1": (lambda p, i: tf.gather(p, i, axis=1), [B, IDX], [False, True]),
    "gather axis -1": (lambda p, i: tf.gather(p, i, axis=-1), [B, IDX], [False, True]),
    "gather stacked params axis -1": (lambda p: tf.gather(p, [0, 2], axis=-1), [A], [True]),
    "reshape": (lambda a: tf.reshape(a, [-1]), [A], [True]),
    "shape": (lambda a: a * tf.cast(tf.shape(a)[0], tf.float32), [A], [True]),
    "concat": (lambda a, b: tf.concat([a, b], -1), [A, B], [True, False]),
    "stack": (lambda a, b: tf.stack([a, b], -1), [A, B], [True, False]),
    "transpose": (tf.transpose, [A], [True]),
    "expand_dims": (lambda a: tf.expand_dims(a, -1), [A], [True]),
    "broadcast_to": (lambda a: tf.broadcast_to(a, [2, 4, 5]), [A], [True]),
    "bias_add": (tf.nn.bias_add, [A, V], [True, False]),
    "bias_add stacked bias": (tf.nn.bias_add, [A, tf.constant(R.normal(size=[3, 5]),
                                                              tf.float32)], [True, True]),
    "bias_add NCHW": (lambda a, b: tf.nn.bias_add(a, b, data_format="NCHW"),
                      [tf.constant(R.normal(size=[3, 2, 4, 5]), tf.float32),
                       tf.constant(R.normal(size=[4]), tf.float32)], [True, False]),
}


@pytest.mark.parametrize("name", sorted(UNKNOWN_RANK))
def test_unknown_rank_inputs_convert_in_strict_mode(name):
    fn, args, stacked = UNKNOWN_RANK[name]
    testing.check_op_unknown_shapes(fn, args, stacked=stacked, n=3, known_rank=False)


def test_v1_placeholder_of_unknown_shape_in_strict_mode():
    with tf.compat.v1.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape=None)
        b = tf.compat.v1.placeholder(tf.float32, shape=None)

        def loop_fn(i):
            row = tf.gather(x, i)
            return tf.reduce_mean(row * b, axis=-1) + tf.reduce_sum(tf.gather(row, [0], axis=-1))

        out = pf.pfor(loop_fn, 3, fallback="error")
        expected = tf.stack([loop_fn(tf.constant(j)) for j in range(3)])
        with tf.compat.v1.Session() as session:
            got, want = session.run([out, expected], {x: A.numpy(), b: V.numpy()})
    np.testing.assert_allclose(got, want, rtol=1e-5)


OUT_OF_RANGE = {
    "reduce": lambda a: tf.reduce_sum(a, axis=-3),
    "concat": lambda a: tf.concat([a, a], -3),
    "expand_dims": lambda a: tf.expand_dims(a, -4),
    "stack": lambda a: tf.raw_ops.Pack(values=[a, a], axis=-4),
    "unstack": lambda a: tf.unstack(a, num=3, axis=-3)[0],
    "gather": lambda a: tf.gather(a, [0], axis=-3),
    "reverse": lambda a: tf.reverse(a, [-3]),
}


@pytest.mark.parametrize("name", sorted(OUT_OF_RANGE))
def test_unknown_rank_axis_out_of_range_fails_like_loop(name):
    """Axis -3 of a rank-2 value is out of range in the loop; on the stacked tensor it
    would be the iteration axis, so pfor checks it at run time."""
    fn = OUT_OF_RANGE[name]
    x = tf.constant(R.normal(size=[3, 3, 4]), tf.float32)
    run = runtime_fn(lambda t: pf.pfor(lambda i: fn(tf.gather(t, i)), 3, fallback="error"),
                     (None, tf.float32))
    with pytest.raises(tf.errors.InvalidArgumentError):
        testing.sequential(lambda i: fn(tf.gather(x, i)), 3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
        run(x)


def test_unknown_rank_ops_without_a_dynamic_path_fall_back_quietly():
    """A converter that needs a static rank declines (no 'converter raised' warning);
    the fallback gives the loop's values."""
    images = tf.constant(R.normal(size=[3, 2, 5, 5, 3]), tf.float32)
    filters = tf.constant(R.normal(size=[3, 3, 3, 4]), tf.float32)
    stacked = [True, False]

    @tf.function(input_signature=[tf.TensorSpec(None), tf.TensorSpec(None)], autograph=False)
    def run(a, f):
        return pf.pfor(testing.loop_fn_for(lambda x, w: tf.nn.conv2d(x, w, 1, "SAME"),
                                           [a, f], stacked), 3, fallback="warn")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = run(images, filters)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert [w for w in caught if issubclass(w.category, pf.FallbackWarning)]
    expected = testing.sequential(testing.loop_fn_for(
        lambda x, w: tf.nn.conv2d(x, w, 1, "SAME"), [images, filters], stacked), 3)
    testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_run_time_checks_compile_under_xla():
    """XLA has no string kernels: the checks added above must still compile (XLA drops
    Asserts, so nothing is checked there)."""
    def body(a, b, n):
        sums = pf.pfor(lambda i: tf.math.unsorted_segment_sum(tf.gather(a, i), [0, 1], 2), n,
                       fallback="error")
        rows = pf.pfor(lambda i: tf.reduce_sum(tf.gather(a, i), axis=tf.rank(a) - 2), n,
                       fallback="error")
        mapped = pf.vectorized_map(lambda e: e[0] + e[1], (a, b), fallback="error")
        return sums, rows, mapped

    got = tf.function(body, jit_compile=True)(X3, X3, tf.constant(3, tf.int64))
    want = tf.function(body)(X3, X3, tf.constant(3, tf.int64))
    testing.assert_same_results(got, want)
