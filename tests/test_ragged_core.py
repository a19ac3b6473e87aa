"""The ragged layout in the core: the value, the fallback that takes and makes ragged
values, ragged outputs (``ragged_outputs=``, a returned RaggedTensor), RaggedTensor
inputs, chunks, run-time and zero iteration counts, gradients, XLA.

The op that makes values of per-iteration shape here is ``tf.numpy_function``, which no
pack converts (it runs in the fallback loop whatever converters exist), so these tests
are about the core, not the packs' ragged converters.
"""

import warnings

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, strategies as st

import pfor_core as pf
from pfor_core.extend import NotStacked, Ragged, ragged_from_flat

pytestmark = pytest.mark.filterwarnings("ignore::pfor_core.FallbackWarning")


def prefix(x, k):
    """x[:k], through an op no converter takes: its output shape differs per iteration."""
    out = tf.numpy_function(lambda a, b: a[:b], [x, k], x.dtype, stateful=False)
    out.set_shape([None])
    return out


def rows_of(lengths, width=3):
    return tf.reshape(tf.range(len(lengths) * width, dtype=tf.float32), [len(lengths), width])


def loop_rows(fn, n):
    return [np.asarray(fn(tf.constant(i))).tolist() for i in range(n)]


# -- the value --------------------------------------------------------------------
def test_value_helpers():
    value = Ragged.from_row_lengths(tf.constant([1., 2., 3.]), tf.constant([2, 0, 1]))
    assert value.shape.as_list() == [None] and value.rank == 1 and value.code == "R"
    assert value.ragged_axes == (0,)
    assert value.padded.numpy().tolist() == [[1., 2.], [0., 0.], [3., 0.]]
    assert value.to_ragged_tensor().to_list() == [[1., 2.], [], [3.]]
    assert value.row(2).numpy().tolist() == [3.]
    flat, shapes = value.to_flat()
    assert flat.numpy().tolist() == [1., 2., 3.] and shapes.numpy().tolist() == [[2], [0], [1]]
    assert value.masked(value.padded + 5.).numpy().tolist() == [[6., 7.], [0., 0.], [8., 0.]]
    with pytest.raises(NotStacked, match="pattern letter R"):
        value.tensor  # noqa: B018


def test_value_two_ragged_dims_and_uniform():
    padded = tf.reshape(tf.range(2 * 2 * 3, dtype=tf.float32), [2, 2, 3]) + 1.
    value = Ragged.from_stacked(padded, [tf.constant([1, 2]), tf.constant([3, 0])])
    assert value.to_ragged_tensor().to_list() == [[[1., 2., 3.]], [[], []]]
    same = Ragged.from_stacked(padded, [None, tf.constant([2, 2])])
    assert same.uniform("differ").tensor.numpy().tolist() == [[[1., 2.], [4., 5.]],
                                                              [[7., 8.], [10., 11.]]]
    with pytest.raises(tf.errors.InvalidArgumentError, match="differ"):
        value.uniform("differ")


def test_value_checks_its_fields():
    with pytest.raises(ValueError, match="at least one dimension must vary"):
        Ragged(padded=tf.zeros([2, 3]), lengths=(None,))
    with pytest.raises(ValueError, match="one per per-iteration dimension"):
        Ragged(padded=tf.zeros([2, 3]), lengths=())


def test_fitted_to_a_static_shape():
    """A value seen through a body tensor of static shape: uniform where it knows the
    size, cut (or padded) to it."""
    value = Ragged(padded=tf.constant([[[1., 2., 0.], [3., 4., 0.]], [[5., 6., 0.], [0., 0., 0.]]]),
                   lengths=(tf.constant([2, 1]), tf.constant([2, 2])))
    cut = value.fitted(tf.TensorShape([None, 2]))
    assert isinstance(cut, Ragged) and cut.lengths[1] is None
    assert cut.padded.numpy().tolist() == [[[1., 2.], [3., 4.]], [[5., 6.], [0., 0.]]]
    whole = value.fitted(tf.TensorShape([2, 4]))
    assert whole.code == "S" and whole.tensor.shape == [2, 2, 4]
    assert value.fitted(tf.TensorShape([None, None])) is value


def test_identity_of_a_known_shape_makes_a_ragged_value_stacked():
    """An identity whose static shape the body knows (as a gradient's conditional
    branch sets it) passes the value on uniform: the ops after it need not take ragged
    values."""
    x = tf.constant([[1., -1., 2., -3.], [-1., 5., 6., -2.], [7., -1., -1., 8.]])

    def body(i):
        kept = tf.identity(tf.boolean_mask(x[i], x[i] > 0))  # two in every row
        kept.set_shape([2])
        return tf.raw_ops.MatrixDiag(diagonal=kept)  # no ragged converter

    got = pf.pfor(body, 3, fallback="error")
    assert got.shape == [3, 2, 2]
    np.testing.assert_allclose(got.numpy(), np.stack([body(tf.constant(j)) for j in range(3)]))


def test_from_flat_keeps_uniform_inner_dims():
    flat = tf.range(10)
    shapes = tf.constant([[2, 2], [0, 2], [3, 2]])
    rt = ragged_from_flat(flat, shapes, [0], [None, 2])
    assert rt.to_list() == [[[0, 1], [2, 3]], [], [[4, 5], [6, 7], [8, 9]]]
    assert rt.ragged_rank == 1


# -- the fallback takes and makes ragged values --------------------------------------
@given(lengths=st.lists(st.integers(0, 3), min_size=0, max_size=4))
def test_fallback_makes_ragged_and_converters_reduce_it(lengths):
    x, k = rows_of(lengths), tf.constant(lengths, tf.int32)

    def body(i):
        return tf.reduce_sum(prefix(x[i], k[i]) * 2.)

    want = [sum(2. * v for v in np.asarray(x)[i][:lengths[i]]) for i in range(len(lengths))]
    got = pf.pfor(body, len(lengths), fallback="loop")
    np.testing.assert_allclose(got.numpy().reshape(-1), want)


def test_fallback_takes_ragged_inputs():
    lengths = [2, 0, 3]
    x, k = rows_of(lengths), tf.constant(lengths)

    def body(i):
        part = prefix(x[i], k[i])
        return prefix(part, tf.size(part) - 1)  # a ragged input to the fallback

    want = [np.asarray(x)[i][:max(n - 1, 0)].tolist() for i, n in enumerate(lengths)]
    got = pf.pfor(body, 3, fallback="loop", ragged_outputs=True)
    assert got.to_list() == want


def test_explain_shows_ragged_values():
    x, k = rows_of([1, 2]), tf.constant([1, 2])
    report = pf.explain(lambda i: tf.reduce_sum(prefix(x[i], k[i])), 2)
    assert [r.op_type for r in report.ragged] == ["PyFuncStateless"]
    assert "ragged" in str(report)


def test_x_slice_with_a_per_iteration_start_never_raises_a_shape_error():
    """Issue 15 section 4: ``x[j:j+1]`` with per-iteration j in a fallback op."""
    x = tf.constant([5., 6., 7.])
    body = lambda i: tf.numpy_function(lambda a: a * 2, [x[i:i + 1]], tf.float32)  # noqa: E731
    got = pf.pfor(body, 3, fallback="loop")
    np.testing.assert_allclose(got.numpy(), [[10.], [12.], [14.]])


# -- outputs ----------------------------------------------------------------------------
def test_varying_output_is_a_clear_error_naming_it():
    x, k = rows_of([1, 2]), tf.constant([1, 2])
    with pytest.raises(ValueError, match=r"output/values.*ragged_outputs=True"):
        pf.pfor(lambda i: {"values": prefix(x[i], k[i])}, 2, fallback="loop")


def test_varying_output_of_one_shape_after_all_is_dense():
    x, k = rows_of([2, 2]), tf.constant([2, 2])
    got = pf.pfor(lambda i: prefix(x[i], k[i]), 2, fallback="loop")
    assert isinstance(got, tf.Tensor) and got.numpy().tolist() == [[0., 1.], [3., 4.]]


MODES = ["eager", "function", "chunked", "chunked_function"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("lengths", [[2, 0, 3], [0, 0], [], [1]])
def test_ragged_outputs(mode, lengths):
    x, k = rows_of(lengths), tf.constant(lengths, tf.int32)
    body = lambda i: prefix(x[i], k[i])  # noqa: E731
    chunk = 2 if "chunked" in mode else None
    run = lambda n: pf.pfor(body, n, fallback="loop", ragged_outputs=True,  # noqa: E731
                            parallel_iterations=chunk)
    got = tf.function(run)(tf.constant(len(lengths))) if "function" in mode else run(len(lengths))
    assert isinstance(got, tf.RaggedTensor)
    assert got.to_list() == [np.asarray(x)[i][:n].tolist() for i, n in enumerate(lengths)]


@pytest.mark.parametrize("mode", MODES)
def test_body_returning_a_ragged_tensor(mode):
    def body(i):
        values = tf.range(i * 2, dtype=tf.float32)
        return {"rt": tf.RaggedTensor.from_row_lengths(values, [i, i]), "n": i}

    chunk = 2 if "chunked" in mode else None
    run = lambda n: pf.pfor(body, n, fallback="loop", parallel_iterations=chunk)  # noqa: E731
    got = tf.function(run)(tf.constant(3)) if "function" in mode else run(3)
    want = tf.map_fn(lambda i: body(i)["rt"], tf.range(3),
                     fn_output_signature=tf.RaggedTensorSpec([2, None], tf.float32, 1))
    assert got["rt"].to_list() == want.to_list()
    assert got["n"].numpy().tolist() == [0, 1, 2]


def test_nested_pfor_with_a_ragged_fallback_value():
    x = tf.reshape(tf.range(12, dtype=tf.float32), [3, 4])

    def outer(i):
        inner = lambda j: tf.reduce_sum(prefix(x[i], i + j))  # noqa: E731
        return pf.pfor(inner, 2, fallback="loop")

    got = pf.pfor(outer, 3, fallback="loop")
    want = [[float(np.sum(np.asarray(x)[i][:i + j])) for j in range(2)] for i in range(3)]
    np.testing.assert_allclose(got.numpy(), want)

    def ragged_outer(i):
        return pf.pfor(lambda j: prefix(x[i], i + j), 2, fallback="loop", ragged_outputs=True)

    got = pf.pfor(ragged_outer, 3, fallback="loop")
    assert got.to_list() == [[np.asarray(x)[i][:i + j].tolist() for j in range(2)]
                             for i in range(3)]


# -- RaggedTensor inputs ----------------------------------------------------------------
RT = tf.ragged.constant([[1., 2.], [], [3., 4., 5.]])


def test_ragged_elems_in_every_mapping_entry_point():
    want = [3., 0., 12.]
    np.testing.assert_allclose(pf.vectorized_map(tf.reduce_sum, RT, fallback="loop"), want)
    np.testing.assert_allclose(pf.map_fn(tf.reduce_sum, RT, fallback="loop"), want)
    np.testing.assert_allclose(pf.vmap(tf.reduce_sum, fallback="loop")(RT), want)
    np.testing.assert_allclose(pf.pfor(lambda i: tf.reduce_sum(RT[i]), 3, fallback="loop"), want)


def test_map_fn_ragged_signature_like_tf_map_fn():
    spec = tf.RaggedTensorSpec([None], tf.float32)
    got = pf.map_fn(lambda r: r * 2., RT, fn_output_signature=spec, fallback="loop")
    want = tf.map_fn(lambda r: r * 2., RT, fn_output_signature=spec)
    assert got.to_list() == want.to_list()
    counts = tf.constant([2, 0, 1])
    spec = tf.RaggedTensorSpec([None], tf.int32)
    got = pf.map_fn(tf.range, counts, fn_output_signature=spec, fallback="loop")
    assert got.to_list() == tf.map_fn(tf.range, counts, fn_output_signature=spec).to_list()
    same = pf.map_fn(lambda c: tf.range(2), counts, fn_output_signature=spec, fallback="loop")
    assert isinstance(same, tf.RaggedTensor) and same.to_list() == [[0, 1]] * 3


def test_ragged_outputs_is_checked():
    with pytest.raises(TypeError, match="ragged_outputs must be True or False"):
        pf.pfor(lambda i: i, 2, ragged_outputs="yes")


# -- gradients and zero iterations -------------------------------------------------------
def test_gradient_through_a_ragged_fallback_value_equals_the_loop():
    x = tf.constant([[1., 2., 3.], [4., 5., 6.]])
    k = tf.constant([2, 0])

    def body(i, x):
        part = tf.gather(x, i)[:tf.gather(k, i)]  # converted or not, ragged
        return tf.reduce_sum(tf.square(part) * tf.exp(part))

    with tf.GradientTape() as tape:
        tape.watch(x)
        got = tf.reduce_sum(pf.pfor(lambda i: body(i, x), 2, fallback="loop"))
    with tf.GradientTape() as tape2:
        tape2.watch(x)
        want = tf.add_n([body(tf.constant(i), x) for i in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(tf.convert_to_tensor(tape.gradient(got, x)),
                               tf.convert_to_tensor(tape2.gradient(want, x)), rtol=1e-6)


def test_zero_iterations_with_ragged_outputs():
    x, k = rows_of([1]), tf.constant([1])
    got = pf.pfor(lambda i: prefix(x[i], k[i]), 0, fallback="loop", ragged_outputs=True)
    assert got.shape[0] == 0


def test_xla_pads_rows_of_static_shapes():
    x = tf.constant([[1., 2., 3.], [4., 5., 6.]])

    @tf.function(jit_compile=True)
    def run():
        # tf.range with a per-iteration limit known per unrolled row: ragged, padded.
        return pf.pfor(lambda i: tf.reduce_sum(x[i, :i + 1]), 2, fallback="loop")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(run(), [1., 9.])


def test_map_batched_over_elements_of_different_lengths():
    ds = tf.data.Dataset.from_tensor_slices(tf.constant([3, 0, 2, 1])).map(
        lambda k: tf.range(k, dtype=tf.float32))
    fn = lambda v: (tf.reduce_sum(v), v * 2.)  # noqa: E731
    got = list(ds.apply(pf.data.map_batched(fn, 3, fallback="loop")))
    want = list(ds.map(fn).ragged_batch(3))
    assert len(got) == len(want) == 2
    for (s, v), (ws, wv) in zip(got, want):
        np.testing.assert_allclose(s, ws)
        assert v.to_list() == wv.to_list()


# -- the testing kit draws ragged inputs --------------------------------------------------
@given(data=st.data())
def test_kit_draws_ragged_inputs_and_compares_rows(data):
    from pfor_core import testing
    from pfor_core.testing import strategies

    drawn = data.draw(strategies.inputs([[3, 2]], "float32",
                                        layouts_=strategies.layouts(1, choices=("R",))))
    (value,) = drawn.values
    assert isinstance(value, testing.RaggedArg) and drawn.stacked == [True]
    assert all(0 <= k <= 3 for k in value.lengths) and len(value.lengths) == drawn.n
    got = testing.check(data, lambda x: x[1:], list(drawn.values), stacked=drawn.stacked,
                        n=drawn.n, ragged_outputs=True)
    if drawn.n and len(set(value.lengths.tolist())) > 1:
        assert isinstance(got, tf.RaggedTensor)


def test_kit_compares_rows_of_different_shapes():
    from pfor_core import testing

    rows = tf.ragged.constant([[1., 2.], [3.]])
    testing.assert_allclose(rows, tf.ragged.constant([[1., 2.], [3. + 1e-7]]))
    with pytest.raises(AssertionError, match="rows of different shapes"):
        testing.assert_allclose(rows, tf.ragged.constant([[1.], [2., 3.]]))
