"""The fallback is total for outputs of unknown rank (issue 33, item 2).

A ``tf.numpy_function`` or ``tf.py_function`` without ``set_shape`` has an output of no
static rank, whose shape (even rank) may differ between iterations. The fallback loop
keeps what it made as an unranked value (every iteration's elements, shape and rank);
an op that reads one is converted on the stacked value when all iterations have one
shape at run time, else runs in the fallback loop too. So pfor gives the Python loop's
values wherever that loop could give them:

- consumed by ops that make values of one shape (a reduction), whatever the shapes;
- returned with ``ragged_outputs=True``: a ``tf.RaggedTensor`` ragged along the first
  dimension (a ragged rank must be static), when the iterations agree in rank and in
  every later dimension; else a clear error asks for the value's rank;
- returned with ``ragged_outputs=False``: the values of one shape are stacked; values of
  different shapes (or ranks) are the "values of different shapes" error, which no loop
  could stack either.

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


# -- returned ------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_consumed_then_returned_ragged(mode):
    def body(i):
        return tf.nn.relu(unranked(i) * 2.0 - 1.0) + tf.cast(i, tf.float32)

    with warnings.catch_warnings():
        _no_broken_converter()
        got = run(body, 4, mode, ragged_outputs=True)
    assert isinstance(got, tf.RaggedTensor)
    assert got.to_list() == loop_rows(body, 4)


def test_returned_ragged_from_a_py_function_and_with_no_iterations():
    body = lambda i: tf.sqrt(py_unranked(i) + 1.0)  # noqa: E731
    got = pf.pfor(body, 3, fallback="loop", ragged_outputs=True)
    np.testing.assert_allclose(np.concatenate(got.to_list()),
                               np.concatenate(loop_rows(body, 3)), rtol=1e-6)
    assert [len(r) for r in got.to_list()] == [1, 2, 3]
    assert run(body, 0, "function", ragged_outputs=True).to_list() == []


def test_returned_without_ragged_outputs_is_the_clear_error():
    body = lambda i: unranked(i) + 1.0  # noqa: E731
    with pytest.raises(ValueError, match=r"different shapes in different iterations at "
                                         r"output/y.*ragged_outputs=True"):
        pf.pfor(lambda i: {"y": body(i)}, 3, fallback="loop")


def test_returned_of_one_shape_in_every_iteration():
    """Unknown rank, one shape: stacked as before (ops after it converted on the
    stacked value at run time); a RaggedTensor of uniform rows when asked for one."""
    def body(i):
        y = unranked(i, lambda k: np.full([2, 3], k, np.float32))
        return tf.nn.relu(y * 2.0 - 1.0)

    for mode in MODES:
        got = run(body, 3, mode)
        assert isinstance(got, tf.Tensor)
        testing.assert_allclose(got, testing.sequential(body, 3))
    got = pf.pfor(body, 3, fallback="loop", ragged_outputs=True)
    assert got.to_list() == loop_rows(body, 3)


def test_returned_ragged_beyond_the_first_dimension_asks_for_a_rank():
    body = lambda i: unranked(i, lambda k: np.ones([2, k + 1], np.float32))  # noqa: E731
    with pytest.raises(ValueError, match=r"values of unknown rank at output whose ranks or "
                                         r"sizes after the first dimension differ.*set_shape"):
        pf.pfor(body, 3, fallback="loop", ragged_outputs=True)

    def ranked(i):  # the rank given after the fact: ragged along every dimension
        return tf.ensure_shape(body(i) * 2.0, [None, None])

    assert pf.pfor(ranked, 3, fallback="loop", ragged_outputs=True).to_list() == (
        loop_rows(ranked, 3))


def test_returned_values_of_different_ranks_are_a_clear_error():
    body = lambda i: unranked(i, lambda k: np.ones([2] * (k + 1), np.float32))  # noqa: E731
    with pytest.raises(ValueError, match="different shapes in different iterations"):
        pf.pfor(body, 3, fallback="loop")
    with pytest.raises(ValueError, match="ranks or sizes after the first dimension differ"):
        pf.pfor(body, 3, fallback="loop", ragged_outputs=True)
    with pytest.raises(ValueError, match="ranks or sizes after the first dimension differ"):
        run(body, 3, "chunked", ragged_outputs=True)


def test_a_rank_set_by_hand_later_makes_it_ragged():
    def body(i):
        y = tf.identity(unranked(i) * 3.0)
        y.set_shape([None, 2])
        return y

    got = pf.pfor(body, 3, fallback="loop", ragged_outputs=True)
    assert got.ragged_rank == 1 and got.to_list() == loop_rows(body, 3)


def test_explain_reports_the_unranked_values_and_their_ops():
    report = pf.explain(lambda i: tf.reduce_sum(unranked(i) * 2.0), 3)
    assert [r.op_type for r in report.fallbacks][:2] == ["PyFuncStateless", "Mul"]
    mul = next(r for r in report.rows if r.op_type == "Mul")
    assert "ranks are unknown" in mul.reason and mul.ragged


# -- the value --------------------------------------------------------------------------
def test_unranked_value():
    value = Unranked.of(tf.range(7.), tf.constant([2, 2, 3]), tf.constant([2, 1]))
    assert value.code == "R" and value.shape.rank is None
    assert value.row(0).numpy().tolist() == [[0., 1.], [2., 3.]]
    assert value.row(1).numpy().tolist() == [4., 5., 6.]
    assert not value.is_uniform().numpy()
    with pytest.raises(tf.errors.InvalidArgumentError, match="ranks differ"):
        value.shapes("ranks differ")
    same = Unranked.of(tf.range(6.), tf.constant([3, 3]), tf.constant([1, 1]))
    assert same.is_uniform().numpy()
    assert same.as_stacked().tensor.numpy().tolist() == [[0., 1., 2.], [3., 4., 5.]]
    assert same.to_ragged_tensor("no").to_list() == [[0., 1., 2.], [3., 4., 5.]]
    ragged = Unranked.of(tf.range(5.), tf.constant([2, 3]), tf.constant([1, 1])).ranked(
        [None], "no")
    assert isinstance(ragged, Ragged)
    assert ragged.to_ragged_tensor().to_list() == [[0., 1.], [2., 3., 4.]]
    with pytest.raises(pf.extend.NotStacked):
        value.tensor  # noqa: B018
