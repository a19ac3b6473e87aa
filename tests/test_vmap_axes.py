"""pf.vmap's in_axes / out_axes: any nesting that matches the arguments (outputs) as a
prefix, tuples and lists alike, as JAX's do; checked against a Python loop that slices
each argument along its axis and stacks each output along its axis."""

import collections

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf

A = tf.reshape(tf.range(6.0), [3, 2])      # mapped over axis 0 (3 rows)
B = tf.reshape(tf.range(6.0) - 2.0, [2, 3])  # mapped over axis 1 (3 columns)
C = tf.constant([0.5, -1.0])               # shared

Pair = collections.namedtuple("Pair", "s t")


def _loop(fn, args, in_axes_flat, out_axes_flat, n=3):
    """The sequential reference: iteration i gets slice i of every mapped argument."""
    flat = tf.nest.flatten(args)
    rows = []
    for i in range(n):
        sliced = [a if ax is None else tf.gather(a, i, axis=ax)
                  for a, ax in zip(flat, in_axes_flat)]
        rows.append(tf.nest.flatten(fn(*tf.nest.pack_sequence_as(args, sliced))))
    return [tf.stack([r[k] for r in rows], axis=ax) for k, ax in enumerate(out_axes_flat)]


def _assert_same(got, want_flat, structure_type):
    assert type(got) is structure_type
    for g, w in zip(tf.nest.flatten(got), want_flat):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)


def _pair(ab, c):
    return (ab[0] * c, ab[1] + tf.reduce_sum(c))


@pytest.mark.parametrize("in_outer", [tuple, list])
@pytest.mark.parametrize("in_inner", [tuple, list])
@pytest.mark.parametrize("out_kind", [tuple, list])
def test_tuple_and_list_axes_for_a_tuple_output(in_outer, in_inner, out_kind):
    in_axes = in_outer([in_inner([0, 1]), None])
    g = pf.vmap(_pair, in_axes=in_axes, out_axes=out_kind([1, 0]), fallback="error")
    got = g((A, B), C)
    _assert_same(got, _loop(_pair, ((A, B), C), [0, 1, None], [1, 0]), tuple)


def _nested(ab, c):
    return {"u": [ab[0] * c, ab[1]], "v": (tf.reduce_sum(ab[0]), ab[0] - c)}


@pytest.mark.parametrize("out_axes, flat", [
    ({"u": [1, 0], "v": (0, 1)}, [1, 0, 0, 1]),
    ({"u": (1, 0), "v": [0, 1]}, [1, 0, 0, 1]),  # sequence kinds swapped
    ({"u": 1, "v": 0}, [1, 1, 0, 0]),  # an int for a whole subtree (a prefix)
    ({"u": 1, "v": (-1, 1)}, [1, 1, -1, 1]),  # negative axes count from the end
])
def test_nested_out_axes_as_a_prefix(out_axes, flat):
    g = pf.vmap(_nested, in_axes=((0, 1), None), out_axes=out_axes, fallback="error")
    got = g((A, B), C)
    assert isinstance(got["u"], list) and isinstance(got["v"], tuple)
    want = _loop(_nested, ((A, B), C), [0, 1, None], flat)
    for g_, w in zip(tf.nest.flatten(got), want):
        np.testing.assert_allclose(g_.numpy(), w.numpy(), rtol=1e-6)


def test_namedtuple_output_with_plain_tuple_out_axes():
    def f(a):
        return Pair(s=a * 2.0, t=tf.reduce_sum(a))

    g = pf.vmap(f, in_axes=1, out_axes=(1, 0), fallback="error")
    got = g(B)
    assert isinstance(got, Pair)
    want = _loop(f, (B,), [1], [1, 0])
    np.testing.assert_allclose(got.s.numpy(), want[0].numpy())
    np.testing.assert_allclose(got.t.numpy(), want[1].numpy())


def test_in_axes_list_for_a_tuple_argument_and_dict_arguments():
    def f(d, pair):
        return d["x"] * pair[0] + pair[1]

    g = pf.vmap(f, in_axes=[{"x": None}, [0, 1]], fallback="error")
    got = g({"x": C}, (A, tf.transpose(A)))
    want = _loop(f, ({"x": C}, (A, tf.transpose(A))), [None, 0, 1], [0])
    np.testing.assert_allclose(got.numpy(), want[0].numpy())


@pytest.mark.parametrize("out_axes, match", [
    ((1, 0, 0), r"out_axes=\(1, 0, 0\) does not match the structure of the outputs"),
    ({"s": 0}, r"out_axes=\{'s': 0\} is a dict"),
    ((None, 0), r"out_axes gives None for output 0"),
    (("a", 0), r"out_axes entries must be ints or None"),
])
def test_out_axes_that_do_not_fit_the_outputs_name_out_axes(out_axes, match):
    g = pf.vmap(_pair, in_axes=((0, 1), None), out_axes=out_axes, fallback="error")
    with pytest.raises((ValueError, TypeError), match=match):
        g((A, B), C)


def test_composite_and_none_outputs_keep_axis_0():
    """A composite output (here a SparseTensor) and a None leaf pass through; a
    composite cannot move its mapped axis, which is an error naming out_axes."""
    def f(a):
        sparse = tf.SparseTensor(tf.constant([[0], [1]], tf.int64), a * 2.0, [2])
        return (sparse, None, a + 1.0)

    got = pf.vmap(f, out_axes=(0, 0, 1), fallback="error")(A)
    np.testing.assert_allclose(tf.sparse.to_dense(got[0]).numpy(), A.numpy() * 2.0)
    assert got[1] is None
    np.testing.assert_allclose(got[2].numpy(), tf.transpose(A).numpy() + 1.0)
    with pytest.raises(ValueError, match="out_axes gives 1 for output 0, a SparseTensor"):
        pf.vmap(f, out_axes=1, fallback="error")(A)
