"""The fallback is total for outputs of unknown rank (issue 33, item 2).

A ``tf.numpy_function`` or ``tf.py_function`` without ``set_shape`` has an output of no
static rank, whose shape (even rank) may differ between iterations. The fallback loop
keeps what it made as an unranked value (every iteration's elements, shape and rank);
an op that reads one is converted on the stacked value when all iterations have one
shape at run time, else runs in the fallback loop too. So pfor gives the Python loop's
values wherever that loop could give them:

- consumed by ops that make values of one shape (a reduction), whatever the shapes;
- consumed by ops that give them a rank (``tf.ensure_shape``, ``tf.reshape``, an
  identity with ``set_shape``): ragged values as usual, returned as a
  ``tf.RaggedTensor`` with ``ragged_outputs=True``;
- returned as they are: stacked when they have one shape in every iteration (with
  ``ragged_outputs`` too, as ``Dataset.ragged_batch`` batches such values); of different
  shapes (or ranks), the "values of different shapes" error, which asks for their rank:
  a ``tf.RaggedTensor`` needs one when the graph is built, and no loop could stack
  them without it either;
- as a component of a returned ``tf.RaggedTensor``: ragged along their first dimension.

Iterations whose ranks differ are fine as long as only the fallback loop reads them
(``tf.reduce_sum`` of each); returned, they are one of the errors above.
"""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing
from pfor_core.ragged import Ragged, Unranked

pytestmark = pytest.mark.filterwarnings("ignore::pfor_core.FallbackWarning")


def rows_of(k):
    """Iteration k's value: k + 1 rows of two values k (a shape of its own)."""
    return np.full([k + 1, 2], k, np.float32)


def unranked(i, fn=rows_of):
    """``fn(i)`` through tf.numpy_function, its output of no static rank."""
    out = tf.numpy_function(fn, [i], tf.float32, stateful=False)
    assert tf.executing_eagerly() or out.shape.rank is None
    return out


def py_unranked(i):
    """The same through tf.py_function: i + 1 values i."""
    out = tf.py_function(lambda k: tf.fill([k + 1], tf.cast(k, tf.float32)), [i], tf.float32)
    assert tf.executing_eagerly() or out.shape.rank is None
    return out


def loop_rows(body, n):
    return [np.asarray(body(tf.constant(j))).tolist() for j in range(n)]


def run(body, n, mode, **kwargs):
    """pfor of ``body`` eagerly, in a tf.function with ``n`` known only at run time, or
    in chunks of 2 (also in such a tf.function)."""
    if "chunked" in mode:
        kwargs["parallel_iterations"] = 2
    if "function" in mode:
        return tf.function(lambda k: pf.pfor(body, k, fallback="loop", **kwargs))(
            tf.constant(n))
    return pf.pfor(body, n, fallback="loop", **kwargs)


MODES = ["eager", "function", "chunked", "chunked_function"]


def _no_broken_converter():
    """Warnings about converters that raised are errors (the walk must not feed a
    converter a value it cannot take)."""
    warnings.simplefilter("error", RuntimeWarning)


# -- consumed by ops of one output shape -----------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_a_reduction_of_values_of_unknown_rank_and_per_iteration_shape(mode):
    def body(i):
        return tf.reduce_sum(unranked(i) * 2.0)

    with warnings.catch_warnings():
        _no_broken_converter()
        got = run(body, 4, mode)
    testing.assert_allclose(got, testing.sequential(body, 4))


def test_zero_iterations_at_run_time():
    body = lambda i: tf.reduce_sum(unranked(i))  # noqa: E731
    got = run(body, 0, "function")
    assert got.shape == [0]


def test_a_py_function_variant():
    def body(i):
        y = py_unranked(i)
        return tf.reduce_max(y) + tf.cast(tf.size(y), tf.float32)

    testing.assert_allclose(pf.pfor(body, 3, fallback="loop"), testing.sequential(body, 3))


def test_ranks_that_differ_between_iterations_reduced_by_the_loop():
    """Iteration k makes a value of rank k + 1: only the fallback reads them (its
    reduce_sum over all axes, which reads the rank, runs per iteration too)."""
    def body(i):
        return tf.reduce_sum(unranked(i, lambda k: np.ones([2] * (k + 1), np.float32)))

    got = pf.pfor(body, 3, fallback="loop")
    testing.assert_allclose(got, testing.sequential(body, 3))
    np.testing.assert_allclose(got.numpy(), [2., 4., 8.])


def test_gradients_through_a_value_of_unknown_rank():
    x = tf.constant([1., 2., 3.])

    def body(i):
        return tf.reduce_sum(unranked(i)) * tf.gather(x, i) ** 2

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        got = pf.pfor(body, 3, fallback="loop")
        want = tf.stack([body(tf.constant(j)) for j in range(3)])
    testing.assert_allclose(got, want)
    testing.assert_allclose(tf.convert_to_tensor(tape.gradient(got, x)),
                            tf.convert_to_tensor(tape.gradient(want, x)))


def test_inside_an_outer_pfor():
    def outer(j):
        return pf.pfor(lambda i: tf.reduce_sum(unranked(i + j)), 2, fallback="loop")

    with warnings.catch_warnings():
        _no_broken_converter()
        got = pf.pfor(outer, 3, fallback="loop")
    testing.assert_allclose(got, testing.sequential(outer, 3))


def mapped_sums(i, fn=rows_of, shape=None):
    """tf.map_fn over the values (a tensor list made from them): each row's sum."""
    y = unranked(i, fn)
    if shape is not None:
        y = tf.ensure_shape(y, shape)
    return tf.reduce_sum(tf.map_fn(tf.reduce_sum, y))


def test_a_tensor_list_of_values_of_unknown_rank():
    """A tensor list (tf.map_fn, a TensorArray) holds ragged items only with their
    rank: values of one shape convert as before; of different shapes, a clear error
    asks for the rank, with which they convert."""
    one_shape = lambda k: np.full([2, 2], k, np.float32)  # noqa: E731
    body = lambda i: mapped_sums(i, one_shape)  # noqa: E731
    testing.assert_allclose(pf.pfor(body, 3, fallback="loop"), testing.sequential(body, 3))
    with pytest.raises(ValueError, match=r"TensorListFromTensor .* got values of unknown "
                                         r"rank .*whose shapes differ.*set_shape"):
        pf.pfor(mapped_sums, 3, fallback="loop")
    ranked = lambda i: mapped_sums(i, shape=[None, 2])  # noqa: E731
    testing.assert_allclose(pf.pfor(ranked, 3, fallback="loop"), testing.sequential(ranked, 3))


def test_loops_and_branches_around_values_of_unknown_rank():
    x = tf.constant([1., -1., 2.])

    def in_a_loop(i):
        def step(t, s):
            return t + 1, s + tf.reduce_sum(unranked(t + i))
        return tf.while_loop(lambda t, s: t < i, step, (0, 0.))[1]

    def carried(i):
        def step(t, z):
            return t + 1, tf.numpy_function(lambda a: np.concatenate([a, a]), [z], tf.float32)
        _, z = tf.while_loop(lambda t, z: t < 2, step, (0, unranked(i)),
                             shape_invariants=(tf.TensorShape([]), tf.TensorShape(None)))
        return tf.reduce_sum(z)

    def branches(i):
        y = tf.cond(x[i] > 0, lambda: unranked(i), lambda: unranked(i + 1) * 2.0)
        return tf.reduce_sum(y)

    with warnings.catch_warnings():
        _no_broken_converter()
        for body in (in_a_loop, carried, branches):
            testing.assert_allclose(pf.pfor(body, 3, fallback="loop"),
                                    testing.sequential(body, 3), what=body.__name__)


# -- returned ------------------------------------------------------------------------
def per_row_pairs(i):
    """More ops on the values of unknown rank, the last of which gives them a rank."""
    y = tf.nn.relu(unranked(i) * 2.0 - 1.0) + tf.cast(i, tf.float32)
    return tf.reshape(y, [-1, 2])


@pytest.mark.parametrize("mode", MODES)
def test_consumed_then_returned_ragged(mode):
    with warnings.catch_warnings():
        _no_broken_converter()
        got = run(per_row_pairs, 4, mode, ragged_outputs=True)
    assert isinstance(got, tf.RaggedTensor) and got.ragged_rank == 1
    assert got.to_list() == loop_rows(per_row_pairs, 4)


def test_returned_ragged_from_a_py_function_and_with_no_iterations():
    body = lambda i: tf.ensure_shape(tf.sqrt(py_unranked(i) + 1.0), [None])  # noqa: E731
    got = pf.pfor(body, 3, fallback="loop", ragged_outputs=True)
    np.testing.assert_allclose(np.concatenate(got.to_list()),
                               np.concatenate(loop_rows(body, 3)), rtol=1e-6)
    assert [len(r) for r in got.to_list()] == [1, 2, 3]
    assert run(body, 0, "function", ragged_outputs=True).to_list() == []


def test_a_rank_set_by_hand_later_makes_it_ragged():
    def body(i):
        y = tf.identity(unranked(i) * 3.0)
        y.set_shape([None, 2])
        return y

    got = pf.pfor(body, 3, fallback="loop", ragged_outputs=True)
    assert got.ragged_rank == 1 and got.to_list() == loop_rows(body, 3)
    wide = lambda i: tf.ensure_shape(  # noqa: E731
        unranked(i, lambda k: np.ones([2, k + 1], np.float32)) * 2.0, [None, None])
    assert pf.pfor(wide, 3, fallback="loop", ragged_outputs=True).to_list() == (
        loop_rows(wide, 3))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ragged_outputs", [False, True])
def test_returned_of_different_shapes_is_the_clear_error(mode, ragged_outputs):
    """Stacking values of unknown rank and different shapes is what no loop can do
    either (``Dataset.ragged_batch`` refuses them too): a ``tf.RaggedTensor`` needs
    their rank, which the error asks for."""
    body = lambda i: {"y": unranked(i) + 1.0}  # noqa: E731
    error = ValueError if "function" not in mode else tf.errors.InvalidArgumentError
    with pytest.raises(error, match=r"different shapes in different iterations at "
                                    r"output/y, of unknown rank.*set_shape"):
        run(body, 3, mode, ragged_outputs=ragged_outputs)


def test_returned_values_of_different_ranks_are_the_clear_error():
    body = lambda i: unranked(i, lambda k: np.ones([2] * (k + 1), np.float32))  # noqa: E731
    for ragged_outputs in (False, True):
        with pytest.raises(ValueError, match="different shapes in different iterations"):
            pf.pfor(body, 3, fallback="loop", ragged_outputs=ragged_outputs)


@pytest.mark.parametrize("ragged_outputs", [False, True])
def test_returned_of_one_shape_in_every_iteration(ragged_outputs):
    """Unknown rank, one shape: stacked as before, also with ragged_outputs=True (as
    Dataset.ragged_batch batches such values); the ops after it are converted on the
    stacked value at run time."""
    def body(i):
        y = unranked(i, lambda k: np.full([2, 3], k, np.float32))
        return tf.nn.relu(y * 2.0 - 1.0)

    for mode in MODES:
        got = run(body, 3, mode, ragged_outputs=ragged_outputs)
        assert isinstance(got, tf.Tensor)
        testing.assert_allclose(got, testing.sequential(body, 3))


def test_returned_scalars_stay_dense_with_ragged_outputs():
    body = lambda i: py_unranked(i)[0] * 2.0  # noqa: E731
    got = pf.pfor(body, 3, fallback="loop", ragged_outputs=True)
    assert isinstance(got, tf.Tensor)
    testing.assert_allclose(got, testing.sequential(body, 3))


def test_map_batched_over_varying_elements_with_a_py_function_label():
    """pf.data.map_batched over elements of varying length returns ragged values;
    a py_function's label of unknown rank comes back as Dataset.ragged_batch gives it."""
    def fn(x):
        label = tf.py_function(lambda v: tf.cast(tf.size(v), tf.float32), [x], tf.float32)
        return x * 2, label

    ds = tf.data.Dataset.range(5).map(lambda k: tf.range(tf.cast(k, tf.int32)))
    want = list(ds.map(fn).ragged_batch(2))
    got = list(ds.apply(pf.data.map_batched(fn, 2, fallback="loop")))
    assert len(got) == len(want)
    for (values, label), (want_values, want_label) in zip(got, want):
        assert values.to_list() == want_values.to_list()
        assert isinstance(label, tf.Tensor)
        testing.assert_allclose(label, want_label)


def test_a_returned_ragged_tensor_of_values_of_unknown_rank():
    def body(i):
        values = unranked(i, lambda k: np.arange(2 * k, dtype=np.float32))
        return tf.RaggedTensor.from_row_lengths(values, [i, i])

    want = tf.map_fn(body, tf.range(3),
                     fn_output_signature=tf.RaggedTensorSpec([2, None], tf.float32, 1))
    for mode in MODES:
        assert run(body, 3, mode).to_list() == want.to_list(), mode


def test_explain_reports_the_unranked_values_and_their_ops():
    def body(i):
        return tf.reduce_sum(tf.reduce_sum(unranked(i), 0))  # a reduction of one: looped

    report = pf.explain(body, 3)
    assert [r.op_type for r in report.fallbacks][:2] == ["PyFuncStateless", "Sum"]
    inner = next(r for r in report.rows if r.op_type == "Sum")
    assert "ranks are unknown" in inner.reason and inner.ragged


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_elementwise_ops_of_an_unranked_value_and_scalars_run_on_its_elements(mode):
    """max(tanh(x * 0.5 + 1), |x|) after a numpy_function: each op runs once on every
    iteration's elements, shapes kept (no run-time choice, no loop), and the loop's
    values come back."""
    def body(i):
        x = unranked(i)
        y = tf.maximum(tf.tanh(x * 0.5 + 1.0), tf.abs(x))
        return tf.reduce_sum(y), tf.reduce_sum(tf.where(x > 1.0, x - 3.0, x))

    report = pf.explain(body, 4)
    assert [r.op_type for r in report.fallbacks] == ["PyFuncStateless", "Rank", "Sum",
                                                     "Rank", "Sum"]
    converted = {r.op_type for r in report.rows if r.how == "converter"}
    assert {"Mul", "AddV2", "Tanh", "Abs", "Maximum", "Greater", "Sub", "SelectV2"} <= converted
    run = (lambda: pf.pfor(body, 4, fallback="loop")) if mode == "eager" else \
        tf.function(lambda: pf.pfor(body, 4, fallback="loop"))
    testing.assert_same_results(run(), testing.sequential(body, 4))


# -- the value --------------------------------------------------------------------------
def test_unranked_value():
    value = Unranked.of(tf.range(7.), tf.constant([2, 2, 3]), tf.constant([2, 1]),
                        tf.constant([4, 3]))
    assert value.code == "R" and value.shape.rank is None
    assert value.row(0).numpy().tolist() == [[0., 1.], [2., 3.]]
    assert value.row(1).numpy().tolist() == [4., 5., 6.]
    assert not value.is_uniform().numpy()
    with pytest.raises(tf.errors.InvalidArgumentError, match="ranks differ"):
        value.shapes("ranks differ")
    same = Unranked.of(tf.range(6.), tf.constant([3, 3]), tf.constant([1, 1]), tf.constant([3, 3]))
    assert same.is_uniform().numpy()
    assert same.as_stacked().tensor.numpy().tolist() == [[0., 1., 2.], [3., 4., 5.]]
    assert same.to_ragged_tensor("no").to_list() == [[0., 1., 2.], [3., 4., 5.]]
    ragged = Unranked.of(tf.range(5.), tf.constant([2, 3]), tf.constant([1, 1]),
                         tf.constant([2, 3])).ranked(
        [None], "no")
    assert isinstance(ragged, Ragged)
    assert ragged.to_ragged_tensor().to_list() == [[0., 1.], [2., 3., 4.]]
    with pytest.raises(pf.extend.NotStacked):
        value.tensor  # noqa: B018
