"""Issue 33, values at the edges of a loop, as ``tf.vectorized_map`` treats them.

- ``tf.Variable`` values in ``elems`` (also nested) are mapped over as their value, read
  once before the loop (``vectorized_map``, ``map_fn``, ``vmap``).
- User-defined composite tensors whose type spec is a ``BatchableTypeSpec`` (the way
  before extension types; TensorFlow Probability's distributions are such) go in and
  out through their spec: created in the body and returned, mapped over, or used inside
  the body only. A composite whose spec is not batchable is a clear ``TypeError``.
- ``None`` in what the body returns comes back as ``None``; other non-tensor results
  are a ``TypeError`` that keeps TensorFlow's phrase "Failed to convert elements"
  (TensorFlow Probability recognizes it), beside pfor's own explanation.

``Masked`` is a stand-in written here: values and a mask, whose spec's batchable
encoding is not its components (the mask travels as int8), so passing means pfor went
through the spec's ``_to_tensor_list`` / ``_from_compatible_tensor_list``.
"""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import type_spec

import pfor_core as pf
from pfor_core import testing

X = tf.reshape(tf.range(12.0), [4, 3]) - 5.0


class Masked(tf.__internal__.CompositeTensor):
    """Values with a boolean mask of their shape."""

    def __init__(self, values, mask):
        self.values, self.mask = values, mask

    @property
    def _type_spec(self):
        return MaskedSpec(self.values.shape, self.values.dtype)


class MaskedSpec(type_spec.BatchableTypeSpec):
    """Components (values, mask); batchable encoding (values, mask as int8)."""

    value_type = property(lambda self: Masked)

    def __init__(self, shape, dtype=tf.float32):
        self.shape, self.dtype = tf.TensorShape(shape), tf.as_dtype(dtype)

    def _serialize(self):
        return (self.shape, self.dtype)

    @property
    def _component_specs(self):
        return (tf.TensorSpec(self.shape, self.dtype), tf.TensorSpec(self.shape, tf.bool))

    def _to_components(self, value):
        return (value.values, value.mask)

    def _from_components(self, components):
        return Masked(*components)

    @property
    def _flat_tensor_specs(self):
        return [tf.TensorSpec(self.shape, self.dtype), tf.TensorSpec(self.shape, tf.int8)]

    def _to_tensor_list(self, value):
        return [value.values, tf.cast(value.mask, tf.int8)]

    def _to_batched_tensor_list(self, value):
        if self.shape.rank == 0:  # as TensorFlow's own specs refuse
            raise ValueError("a scalar Masked has no rows to batch")
        return self._to_tensor_list(value)

    def _from_compatible_tensor_list(self, tensor_list):
        values, mask = tensor_list
        return Masked(values, tf.cast(mask, tf.bool))

    def _batch(self, batch_size):
        return MaskedSpec(tf.TensorShape([batch_size]).concatenate(self.shape), self.dtype)

    def _unbatch(self):
        return MaskedSpec(self.shape[1:], self.dtype)


class Plain(tf.__internal__.CompositeTensor):
    """A composite whose spec is not batchable."""

    def __init__(self, values):
        self.values = values

    @property
    def _type_spec(self):
        return PlainSpec(self.values.shape)


class PlainSpec(tf.TypeSpec):
    value_type = property(lambda self: Plain)

    def __init__(self, shape):
        self.shape = tf.TensorShape(shape)

    def _serialize(self):
        return (self.shape,)

    @property
    def _component_specs(self):
        return tf.TensorSpec(self.shape, tf.float32)

    def _to_components(self, value):
        return value.values

    def _from_components(self, components):
        return Plain(components)


def masked_of(row):
    return Masked(row * 2.0, row > 0.0)


def masked_mean(m):
    """Mean of the values the mask keeps (0 where it keeps none)."""
    kept = tf.cast(m.mask, m.values.dtype)
    return tf.reduce_sum(m.values * kept, -1) / tf.maximum(tf.reduce_sum(kept, -1), 1.0)


def assert_masked(got, values, mask):
    assert isinstance(got, Masked), type(got)
    testing.assert_allclose(got.values, values, what="values")
    testing.assert_allclose(got.mask, mask, what="mask")


def loop_masked(fn, n):
    """The loop's result for a body returning a Masked: its components stacked."""
    rows = [fn(tf.constant(i)) for i in range(n)]
    return tf.stack([r.values for r in rows]), tf.stack([r.mask for r in rows])


# -- composites with a batchable type spec ---------------------------------------------
def test_composite_created_in_the_body_and_returned():
    def loop_fn(i):
        return masked_of(tf.gather(X, i))

    values, mask = loop_masked(loop_fn, 4)
    assert_masked(pf.pfor(loop_fn, 4, fallback="error"), values, mask)
    run = tf.function(lambda n: pf.pfor(loop_fn, n, fallback="error"), autograph=False)
    assert_masked(run(tf.constant(4)), values, mask)
    reference = tf.vectorized_map(masked_of, X)
    assert_masked(pf.vectorized_map(masked_of, X, fallback="error"), reference.values,
                  reference.mask)
    assert_masked(pf.map_fn(masked_of, X, fallback="error"), values, mask)
    assert_masked(pf.map_fn(masked_of, X, fn_output_signature=MaskedSpec([3]),
                            fallback="error"), values, mask)
    with pytest.raises(TypeError, match="does not match fn_output_signature's MaskedSpec"):
        pf.map_fn(masked_of, X, fn_output_signature=MaskedSpec([2]))
    chunked = pf.pfor(loop_fn, 4, fallback="error", parallel_iterations=3)
    assert_masked(chunked, values, mask)


def test_composite_returned_with_no_iterations_or_a_runtime_count():
    empty = pf.pfor(lambda i: masked_of(tf.gather(X, i)), 0, fallback="error")
    assert isinstance(empty, Masked) and empty.values.shape == [0, 3]
    run = tf.function(lambda x: pf.vectorized_map(masked_of, x, fallback="error"),
                      input_signature=[tf.TensorSpec([None, 3])], autograph=False)
    assert_masked(run(X), X * 2.0, X > 0.0)
    assert run.get_concrete_function().structured_outputs.values.shape.as_list() == [None, 3]


@pytest.mark.parametrize("graph", [False, True])
def test_composite_mapped_over(graph):
    elems = Masked(X, X > -2.0)

    def vectorized(e):
        return pf.vectorized_map(masked_mean, e, fallback="error")

    def mapped(e):
        return pf.map_fn(lambda m: Masked(m.values + 1.0, tf.logical_not(m.mask)), e,
                         fallback="error")

    if graph:
        vectorized, mapped = (tf.function(f, autograph=False) for f in (vectorized, mapped))
    expected = tf.stack([masked_mean(Masked(X[j], X[j] > -2.0)) for j in range(4)])
    testing.assert_allclose(vectorized(elems), expected)
    testing.assert_allclose(vectorized(elems), tf.vectorized_map(masked_mean, elems))
    assert_masked(mapped(elems), X + 1.0, X <= -2.0)


def test_composite_nested_in_elems_and_broadcast():
    """A Masked beside a tensor in a dict; one of a single row is shared by all rows."""
    def fn(e):
        return masked_mean(e["m"]) + e["x"][0]

    for m in (Masked(X, X > 0.0), Masked(X[:1], X[:1] > -5.0)):
        elems = {"m": m, "x": X}
        got = pf.vectorized_map(fn, elems, fallback="error")
        testing.assert_allclose(got, tf.vectorized_map(fn, elems))


@tf.function(autograph=False)
def flipped(m):
    return Masked(-m.values, m.mask)


def through_ops(row):
    m = flipped(masked_of(row))
    return masked_mean(m), tf.reduce_sum(tf.cast(m.mask, tf.int32))


def test_composite_used_inside_the_body_only():
    """Its components flow through the body's ops, and through a tf.function called
    there (the composite crosses a function boundary as its tensors)."""
    testing.assert_matches_loop(lambda i: through_ops(tf.gather(X, i)), 4, graph=True)
    testing.assert_same_results(pf.vectorized_map(through_ops, X, fallback="error"),
                                tf.vectorized_map(through_ops, X))


@pytest.mark.parametrize("call, match", [
    (lambda: pf.pfor(lambda i: Plain(tf.gather(X, i)), 4),
     r"loop_fn returned a Plain at output, a composite tensor whose type spec PlainSpec "
     r"is not batchable.*BatchableTypeSpec"),
    (lambda: pf.vectorized_map(lambda r: {"p": Plain(r)}, X),
     r"loop_fn returned a Plain at output/p, .*not batchable"),
    (lambda: pf.vectorized_map(lambda p: p.values, Plain(X)),
     r"elems holds a Plain at elems, .*PlainSpec is not batchable: pfor maps over"),
    (lambda: pf.map_fn(lambda e: e[0], (X, Plain(X))),
     r"elems holds a Plain at elems\[1\], .*not batchable"),
    (lambda: pf.vectorized_map(lambda m: m.values, Masked(X[0, 0], X[0, 0] > 0)),
     r"elems holds a Masked at elems whose type spec cannot split it into rows.*scalar"),
])
def test_composites_that_cannot_be_batched_are_type_errors(call, match):
    with pytest.raises(TypeError, match=match):
        call()


# -- variables in elems --------------------------------------------------------------
MAPS = {
    "vectorized_map": lambda fn, elems: pf.vectorized_map(fn, elems, fallback="error"),
    "map_fn": lambda fn, elems: pf.map_fn(fn, elems, fallback="error"),
    "vmap": lambda fn, elems: pf.vmap(fn, fallback="error")(elems),
}


@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize("name", sorted(MAPS))
def test_variables_in_elems_are_mapped_over_their_value(name, graph):
    v = tf.Variable(X)
    w = tf.Variable(X[:, 0])

    def alone(row):
        return tf.reduce_sum(row * row)

    def nested(e):
        return e["v"] * e["rest"][1] + e["rest"][0]

    def run(fn, elems):
        call = lambda: MAPS[name](fn, elems)  # noqa: E731
        return tf.function(call, autograph=False)() if graph else call()

    elems = {"v": v, "rest": (X, w)}
    testing.assert_allclose(run(alone, v), tf.vectorized_map(alone, v))
    testing.assert_allclose(run(nested, elems), tf.vectorized_map(nested, elems))
    v.assign(X * 3.0)  # read when called: the new value
    testing.assert_allclose(run(alone, v), tf.vectorized_map(alone, v))


def test_a_mapped_variable_is_read_once_and_differentiable():
    v = tf.Variable(X)

    @tf.function(autograph=False)
    def grads():
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(pf.vectorized_map(lambda r: tf.reduce_sum(tf.sin(r) * r), v,
                                                fallback="error"))
        return tape.gradient(y, v)

    testing.assert_allclose(grads(), tf.sin(X) + X * tf.cos(X))
    graph = tf.function(lambda: pf.vectorized_map(lambda r: r * 2.0, v, fallback="error"),
                        autograph=False).get_concrete_function().graph
    reads = [op for op in graph.get_operations() if op.type == "ReadVariableOp"]
    assert len(reads) == 1, [op.name for op in reads]


def test_a_variable_returned_by_the_body_is_its_value():
    v = tf.Variable([1.0, 2.0])
    testing.assert_allclose(pf.pfor(lambda i: v, 3, fallback="error"), tf.stack([v] * 3))


# -- None and other non-tensor results ---------------------------------------------------
def with_nones(row):
    return {"x": row * 2.0, "none": None, "parts": [None, tf.reduce_sum(row)]}


@pytest.mark.parametrize("graph", [False, True])
def test_none_leaves_come_back_as_none(graph):
    reference = tf.vectorized_map(with_nones, X)
    calls = {
        "pfor": lambda: pf.pfor(lambda i: with_nones(tf.gather(X, i)), 4, fallback="error"),
        "chunked": lambda: pf.pfor(lambda i: with_nones(tf.gather(X, i)), 4,
                                   fallback="error", parallel_iterations=3),
        "vectorized_map": lambda: pf.vectorized_map(with_nones, X, fallback="error"),
        "map_fn": lambda: pf.map_fn(with_nones, X, fallback="error"),
        "vmap": lambda: pf.vmap(with_nones, fallback="error")(X),
    }
    for name, call in calls.items():
        got = tf.function(call, autograph=False)() if graph else call()
        testing.assert_same_results(got, reference, where=f" ({name})")
    testing.assert_matches_loop(lambda i: (None, tf.gather(X, i)), 4, graph=True)


def test_none_leaves_with_no_iterations_and_a_body_returning_none():
    got = pf.pfor(lambda i: (tf.gather(X, i), None), 0, fallback="error")
    assert got[1] is None and got[0].shape == [0, 3]
    assert pf.pfor(lambda i: None, 3, fallback="error") is None
    v = tf.Variable(0.0)

    def effect(i):  # returns nothing: the effect happens all the same
        v.assign_add(tf.cast(i, tf.float32))

    assert tf.function(lambda: pf.pfor(effect, 4, fallback="error"), autograph=False)() is None
    testing.assert_allclose(v, tf.constant(6.0))


class NotATensor:
    """What a body might return by mistake (a distribution that is no CompositeTensor)."""


@pytest.mark.parametrize("call, what", [
    (lambda: pf.pfor(lambda i: NotATensor(), 2), "NotATensor at output"),
    (lambda: pf.vectorized_map(lambda r: (r, NotATensor()), X), "NotATensor at output/1"),
    (lambda: pf.map_fn(lambda r: {"f": len}, X), "builtin_function_or_method at output/f"),
])
def test_other_non_tensor_results_keep_tensorflows_phrase(call, what):
    with pytest.raises(TypeError, match=rf"loop_fn returned {what}, which is not a tensor "
                                        r"\(Failed to convert elements .*or None"):
        call()
    try:
        tf.vectorized_map(lambda r: NotATensor(), X)
    except TypeError as err:  # the phrase is TensorFlow's own
        assert "Failed to convert elements" in str(err)
    else:
        raise AssertionError("tf.vectorized_map accepted a non-tensor result")


def test_sequential_reference_keeps_none():
    expected = testing.sequential(lambda i: (None, i * 2), 3)
    assert expected[0] is None
    np.testing.assert_array_equal(expected[1].numpy(), [0, 2, 4])
