"""Bad input to every public function: a clear error that names the argument, or exactly
the loop's value.

Each row calls one public function with one kind of bad input (wrong types, wrong
ranks, negative or non-scalar ``iters``, mismatched structures, NaN/Inf values, empty
dimensions) and says what must happen:

- ``Raises(types, pattern)``: one of ``types`` (ValueError, TypeError or
  ``pf.ConversionError``; RuntimeError for a collective called outside a loop body, as
  API.md says) whose message matches ``pattern``, which names the argument. A bare
  TensorFlow error (``tf.errors.*``) is never one of these.
- ``Loop(reference)``: the call returns what ``reference()`` returns, where the
  reference computes the same thing with a Python loop (or TensorFlow's own loop-based
  derivative); NaN-aware.

A row for a known bug is ``xfail(strict=True)`` naming it (``row(..., bug=...)``), so a
fix shows up as an unexpected pass.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Callable

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf


@dataclasses.dataclass(frozen=True)
class Raises:
    types: tuple
    pattern: str


@dataclasses.dataclass(frozen=True)
class Loop:
    reference: Callable


ARG_ERRORS = (ValueError, TypeError)  # pf.ConversionError is a ValueError


def loop(fn, n):
    """The sequential loop: ``fn(i)`` for each i, stacked (nest-aware)."""
    rows = [fn(tf.constant(i)) for i in range(n)]
    return tf.nest.map_structure(lambda *xs: tf.stack(xs), *rows)


def rows_of(fn, *elems):
    """The loop over rows: ``fn`` applied to row j of every tensor in ``elems``."""
    n = int(tf.shape(tf.nest.flatten(elems)[0])[0])
    return loop(lambda i: fn(*tf.nest.map_structure(lambda e: e[int(i)], elems)), n)


def assert_same(got, want):
    tf.nest.assert_same_structure(got, want)
    for a, e in zip(tf.nest.flatten(got), tf.nest.flatten(want)):
        if a is None or e is None:
            assert a is e, (a, e)
            continue
        a, e = tf.convert_to_tensor(a), tf.convert_to_tensor(e)
        assert a.dtype == e.dtype, (a.dtype, e.dtype)
        assert a.shape == e.shape, (a.shape, e.shape)
        if a.dtype.is_floating:
            np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-5, atol=1e-6,
                                       equal_nan=True)
        else:
            np.testing.assert_array_equal(a.numpy(), e.numpy())


# -- inputs ---------------------------------------------------------------------------
X = tf.constant([[1., 2., 3.], [4., 5., 6.]])
NAN = tf.constant([[np.nan, 1., np.inf], [-np.inf, 2., np.nan]])
EMPTY_ROWS = tf.zeros([0, 3])
EMPTY_COLS = tf.zeros([2, 0])
INTS = tf.constant([[1, 2], [3, 4]])


def ident(i):
    return i


def row_of(x):
    return lambda i: tf.gather(x, i)


def jacobian_loop(f, x):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = f(x)
    return tape.jacobian(y, x, experimental_use_pfor=False)


def batch_jacobian_loop(f, x):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = f(x)
    return tape.batch_jacobian(y, x, experimental_use_pfor=False)


def hessian_loop(f, x):
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = f(x)
        g = inner.gradient(y, x)
    return outer.jacobian(g, x, experimental_use_pfor=False)


def tape_call(fn, x, f=lambda v: v * v, batch=False):
    """Record ``f(x)`` on a tape, then call ``fn(tape, f(x), x)``."""
    x = tf.convert_to_tensor(x)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = f(x)
    return fn(tape, y, x)


W = tf.Variable([1., -1., 2.])


def example_loss(row):
    return tf.reduce_sum(W * row) ** 2


def per_example_loop(loss, variables, batch):
    def one(i):
        with tf.GradientTape() as tape:
            value = loss(batch[int(i)])
        return tape.gradient(value, variables, unconnected_gradients="zero")
    return loop(one, int(batch.shape[0]))


def map_batched(fn, data, batch_size, **kwargs):
    ds = tf.data.Dataset.from_tensor_slices(data).apply(
        pf.data.map_batched(fn, batch_size, **kwargs))
    return [b for b in ds]


def map_then_batch(fn, data, batch_size):
    return [b for b in tf.data.Dataset.from_tensor_slices(data).map(fn).batch(batch_size)]


def collective(kind, x):
    return pf.pfor(lambda i: getattr(pf, kind)(tf.gather(x, i)), int(x.shape[0]),
                   fallback="error")


def run_time(fn, n, dtype=tf.int32):
    """``fn(n)`` inside a tf.function where ``n`` is known only at run time."""
    return tf.function(fn, input_signature=[tf.TensorSpec([], dtype)], autograph=False)(
        tf.constant(n, dtype))


def unknown_shape(fn, *args, rank=True):
    """``fn(*args)`` in a tf.function whose inputs have unknown dimensions (and an
    unknown rank with ``rank=False``)."""
    signature = [tf.TensorSpec([None] * a.shape.rank if rank else None, a.dtype)
                 for a in args]
    return tf.function(fn, input_signature=signature, autograph=False)(*args)


def registered(op_type, converter, body, n, **kwargs):
    """``pf.pfor(body, n)`` with ``converter`` registered for ``op_type`` meanwhile."""
    pf.register_converter(op_type, priority=1000)(converter)
    try:
        return pf.pfor(body, n, **kwargs)
    finally:
        pf.default_registry().remove(op_type, converter)


def register_and_remove(op_type, **kwargs):
    """``pf.register_converter(op_type, **kwargs)`` on a converter; removed again if it
    was registered."""
    def converter(ctx):
        return NotImplemented
    pf.register_converter(op_type, **kwargs)(converter)
    pf.default_registry().remove(op_type, converter)


def polymorphic_and_remove(op_type, **kwargs):
    converter = pf.register_batch_polymorphic(op_type, **kwargs)
    pf.default_registry().remove(op_type, converter)


def wrong_dtype(ctx):
    return pf.Stacked(tensor=tf.cast(tf.sinh(ctx.inputs[0].tensor), tf.float64))


def wrong_rows(ctx):
    return pf.Stacked(tensor=tf.sinh(ctx.inputs[0].tensor)[:1])


def sinh_body(i):
    return tf.sinh(tf.cast(i, tf.float32))


def warned(name, call):
    """``call()``, which must warn once naming ``name`` (a skipped broken converter)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    assert any(name in str(w.message) for w in caught), [str(w.message) for w in caught]
    return out


def same_draw_spread():
    """Every row minus row 0 of a randomness="same" draw in chunks (zeros if shared)."""
    got = pf.pfor(lambda i: tf.random.uniform([3]), 5, randomness="same",
                  parallel_iterations=2, fallback="error")
    return got - got[:1]


def custom(batched=None):
    """A custom-vectorized doubling with the batched rule ``batched`` (or none)."""
    fn = pf.custom_vectorization(lambda x: x * 2.)
    if batched is not None:
        fn.def_vectorized(batched)
    return fn


# -- the table ------------------------------------------------------------------------
def dag_cell(x, child_states, child_mask):
    return x + tf.reduce_sum(child_states, 0)


def row(name, call, expect, bug=None):
    marks = [pytest.mark.xfail(strict=True, reason=bug)] if bug else []
    return pytest.param(call, expect, id=name, marks=marks)


ROWS = [
    # pf.pfor: iters
    row("pfor-iters-negative", lambda: pf.pfor(ident, -1), Raises(ARG_ERRORS, "iters")),
    row("pfor-iters-negative-tensor", lambda: pf.pfor(ident, tf.constant(-2)),
        Raises(ARG_ERRORS, "iters")),
    row("pfor-iters-float", lambda: pf.pfor(ident, 2.0), Raises(ARG_ERRORS, "iters")),
    row("pfor-iters-str", lambda: pf.pfor(ident, "2"), Raises(ARG_ERRORS, "iters")),
    row("pfor-iters-none", lambda: pf.pfor(ident, None), Raises(ARG_ERRORS, "iters")),
    row("pfor-iters-bool", lambda: pf.pfor(ident, True), Raises(ARG_ERRORS, "iters")),
    row("pfor-iters-list", lambda: pf.pfor(ident, [2]), Raises(ARG_ERRORS, "iters")),
    row("pfor-iters-float-tensor", lambda: pf.pfor(ident, tf.constant(2.0)),
        Raises(ARG_ERRORS, "iters")),
    row("pfor-iters-vector", lambda: pf.pfor(ident, tf.constant([2, 3])),
        Raises(ARG_ERRORS, "iters")),
    row("pfor-iters-matrix-numpy", lambda: pf.pfor(ident, np.array([[2]])),
        Raises(ARG_ERRORS, "iters")),
    row("pfor-iters-vector-run-time",
        lambda: tf.function(lambda n: pf.pfor(ident, n), autograph=False,
                            input_signature=[tf.TensorSpec([None], tf.int32)])(
            tf.constant([2])),
        Raises(ARG_ERRORS, "iters")),
    row("pfor-iters-int64-tensor", lambda: pf.pfor(ident, tf.constant(3, tf.int64)),
        Loop(lambda: loop(ident, 3))),
    row("pfor-iters-numpy-int64", lambda: pf.pfor(ident, np.int64(3)),
        Loop(lambda: loop(ident, 3))),
    row("pfor-iters-numpy-negative", lambda: pf.pfor(ident, np.int32(-1)),
        Raises(ARG_ERRORS, "iters")),
    row("pfor-iters-variable", lambda: pf.pfor(ident, tf.Variable(3)),
        Loop(lambda: loop(ident, 3))),
    row("pfor-iters-zero", lambda: pf.pfor(row_of(X), 0), Loop(lambda: tf.zeros([0, 3]))),
    row("pfor-iters-zero-run-time", lambda: run_time(lambda n: pf.pfor(row_of(X), n), 0),
        Loop(lambda: tf.zeros([0, 3]))),
    row("pfor-iters-int64-run-time",
        lambda: run_time(lambda n: pf.pfor(ident, n), 3, tf.int64),
        Loop(lambda: loop(ident, 3))),
    # No rows for counts beyond the int32 range: pfor may support them, and then such a
    # row would allocate gigabytes.
    # pf.pfor: other arguments
    row("pfor-loop-fn-not-callable", lambda: pf.pfor(3, 2), Raises(ARG_ERRORS, "loop_fn")),
    row("pfor-loop-fn-returns-object", lambda: pf.pfor(lambda i: object(), 2),
        Raises(ARG_ERRORS, "loop_fn")),
    # (None comes back as None, as from tf.vectorized_map and TensorFlow's pfor.)
    row("pfor-loop-fn-returns-none", lambda: pf.pfor(lambda i: (None, i), 2),
        Loop(lambda: (None, tf.constant([0, 1])))),
    row("pfor-loop-fn-returns-str", lambda: pf.pfor(lambda i: "a", 2),
        Raises(ARG_ERRORS, "loop_fn")),
    row("pfor-fallback-unknown", lambda: pf.pfor(ident, 2, fallback="never"),
        Raises(ARG_ERRORS, "fallback")),
    row("pfor-randomness-unknown", lambda: pf.pfor(ident, 2, randomness=0),
        Raises(ARG_ERRORS, "randomness")),
    row("pfor-parallel-iterations-zero", lambda: pf.pfor(ident, 2, parallel_iterations=0),
        Raises(ARG_ERRORS, "parallel_iterations")),
    row("pfor-randomness-same-parallel-iterations", same_draw_spread,
        Loop(lambda: tf.zeros([5, 3]))),
    row("pfor-parallel-iterations-float",
        lambda: pf.pfor(ident, 2, parallel_iterations=1.5),
        Raises(ARG_ERRORS, "parallel_iterations")),
    row("pfor-different-shapes-per-iteration",
        lambda: pf.pfor(lambda i: tf.range(i), 3, fallback="loop"),
        Raises(ARG_ERRORS, "different shapes")),
    # pf.pfor: values
    row("pfor-nan-inf", lambda: pf.pfor(lambda i: tf.gather(NAN, i) * 2.0, 2),
        Loop(lambda: loop(lambda i: tf.gather(NAN, i) * 2.0, 2))),
    row("pfor-nan-reductions",
        lambda: pf.pfor(lambda i: tf.reduce_max(tf.gather(NAN, i)) + tf.reduce_sum(NAN), 2),
        Loop(lambda: loop(lambda i: tf.reduce_max(tf.gather(NAN, i)) + tf.reduce_sum(NAN),
                          2))),
    row("pfor-nan-matmul",
        lambda: pf.pfor(lambda i: tf.linalg.matvec(NAN, tf.gather(X, i)), 2),
        Loop(lambda: loop(lambda i: tf.linalg.matvec(NAN, tf.gather(X, i)), 2))),
    row("pfor-empty-dimension", lambda: pf.pfor(row_of(EMPTY_COLS), 2, fallback="error"),
        Loop(lambda: loop(row_of(EMPTY_COLS), 2))),
    row("pfor-empty-reduction",
        lambda: pf.pfor(lambda i: tf.reduce_max(tf.gather(EMPTY_COLS, i)), 2),
        Loop(lambda: loop(lambda i: tf.reduce_max(tf.gather(EMPTY_COLS, i)), 2))),
    # pf.vectorized_map
    row("vectorized-map-fn-not-callable", lambda: pf.vectorized_map("f", X),
        Raises(ARG_ERRORS, "fn")),
    row("vectorized-map-elems-scalar", lambda: pf.vectorized_map(tf.abs, tf.constant(1.)),
        Raises(ARG_ERRORS, "elems")),
    row("vectorized-map-elems-empty-structure", lambda: pf.vectorized_map(tf.abs, []),
        Raises(ARG_ERRORS, "elems")),
    row("vectorized-map-elems-object", lambda: pf.vectorized_map(tf.abs, object()),
        Raises(ARG_ERRORS, "elems")),
    row("vectorized-map-sizes-differ",
        lambda: pf.vectorized_map(lambda e: e[0] + e[1][0], (X, tf.zeros([3, 2]))),
        Raises(ARG_ERRORS, "elems")),
    row("vectorized-map-sizes-differ-run-time",
        lambda: tf.function(lambda a, b: pf.vectorized_map(lambda e: e[0] + e[1], (a, b)),
                            autograph=False,
                            input_signature=[tf.TensorSpec([None], tf.float32)] * 2)(
            tf.zeros([2]), tf.zeros([3])),
        Raises(ARG_ERRORS + (tf.errors.InvalidArgumentError,), "elems")),
    row("vectorized-map-unknown-rank",
        lambda: unknown_shape(lambda x: pf.vectorized_map(tf.reduce_mean, x, fallback="error"),
                              X, rank=False),
        Loop(lambda: rows_of(tf.reduce_mean, X))),
    row("vectorized-map-leading-one-broadcasts",
        lambda: pf.vectorized_map(lambda e: e[0] + e[1], (X, tf.ones([1, 3]))),
        Loop(lambda: X + 1.0)),
    row("vectorized-map-nan", lambda: pf.vectorized_map(tf.reduce_max, NAN),
        Loop(lambda: rows_of(tf.reduce_max, NAN))),
    row("vectorized-map-zero-rows", lambda: pf.vectorized_map(lambda r: r * 2., EMPTY_ROWS),
        Loop(lambda: tf.zeros([0, 3]))),
    row("vectorized-map-empty-dimension",
        lambda: pf.vectorized_map(lambda r: r * 2., EMPTY_COLS),
        Loop(lambda: rows_of(lambda r: r * 2., EMPTY_COLS))),
    # pf.map_fn
    row("map-fn-fn-not-callable", lambda: pf.map_fn(None, X), Raises(ARG_ERRORS, "fn")),
    row("map-fn-signature-dtype",
        lambda: pf.map_fn(lambda r: r, X, fn_output_signature=tf.int32),
        Raises(ARG_ERRORS, "fn_output_signature")),
    row("map-fn-signature-structure",
        lambda: pf.map_fn(lambda r: r, X, fn_output_signature=(tf.float32, tf.float32)),
        Raises(ARG_ERRORS, "fn_output_signature")),
    row("map-fn-signature-shape",
        lambda: pf.map_fn(lambda r: r, X, fn_output_signature=tf.TensorSpec([2], tf.float32)),
        Raises(ARG_ERRORS, "fn_output_signature")),
    row("map-fn-sizes-differ", lambda: pf.map_fn(lambda e: e[0], (X, tf.zeros([3]))),
        Raises(ARG_ERRORS, "elems")),
    row("map-fn-sizes-differ-run-time",
        lambda: unknown_shape(lambda a, b: pf.map_fn(lambda e: e[0] + e[1], (a, b)),
                              tf.zeros([2]), tf.zeros([3])),
        Raises(ARG_ERRORS + (tf.errors.InvalidArgumentError,), "elems")),
    row("map-fn-inf", lambda: pf.map_fn(lambda r: tf.reduce_min(r), NAN),
        Loop(lambda: rows_of(tf.reduce_min, NAN))),
    row("map-fn-zero-rows", lambda: pf.map_fn(lambda r: r + 1., EMPTY_ROWS),
        Loop(lambda: tf.zeros([0, 3]))),
    # pf.vmap
    row("vmap-fn-not-callable", lambda: pf.vmap(1), Raises(ARG_ERRORS, "fn")),
    row("vmap-no-arguments", lambda: pf.vmap(tf.abs)(), Raises(ARG_ERRORS, "argument")),
    row("vmap-in-axes-out-of-range", lambda: pf.vmap(tf.abs, in_axes=2)(X),
        Raises(ARG_ERRORS, "in_axes")),
    row("vmap-in-axes-not-int", lambda: pf.vmap(tf.abs, in_axes=[1.5])(X),
        Raises(ARG_ERRORS, "in_axes")),
    row("vmap-in-axes-structure",
        lambda: pf.vmap(lambda a, b: a + b, in_axes=(0, 0, 0))(X, X),
        Raises(ARG_ERRORS, "in_axes")),
    row("vmap-in-axes-all-none", lambda: pf.vmap(tf.abs, in_axes=None)(X),
        Raises(ARG_ERRORS, "in_axes")),
    row("vmap-in-axes-dict-keys",
        lambda: pf.vmap(lambda d: d["a"] + d["b"], in_axes=({"a": 0, "c": None},))(
            {"a": X, "b": X}),
        Raises(ARG_ERRORS, "in_axes")),
    row("vmap-sizes-differ", lambda: pf.vmap(lambda a, b: a[0] + b[0])(X, tf.zeros([3, 1])),
        Raises(ARG_ERRORS, "size")),
    row("vmap-sizes-differ-run-time",
        lambda: unknown_shape(pf.vmap(lambda a, b: a + b), tf.zeros([2]), tf.zeros([3])),
        Raises(ARG_ERRORS + (tf.errors.InvalidArgumentError,), "size")),
    row("vmap-out-axes-out-of-range", lambda: pf.vmap(tf.abs, out_axes=3)(X),
        Raises(ARG_ERRORS, "out_axes")),
    row("vmap-chunk-size-zero", lambda: pf.vmap(tf.abs, chunk_size=0),
        Raises(ARG_ERRORS, "chunk_size")),
    row("vmap-chunk-size-float", lambda: pf.vmap(tf.abs, chunk_size=2.5),
        Raises(ARG_ERRORS, "chunk_size")),
    row("vmap-chunk-size-memory-budget", lambda: pf.vmap(tf.abs, chunk_size=2,
                                                        memory_budget=2**20),
        Raises(ARG_ERRORS, "chunk_size")),
    row("vmap-nan", lambda: pf.vmap(lambda r: tf.reduce_sum(r * r))(NAN),
        Loop(lambda: rows_of(lambda r: tf.reduce_sum(r * r), NAN))),
    row("vmap-empty-dimension", lambda: pf.vmap(lambda r: tf.reduce_sum(r))(EMPTY_COLS),
        Loop(lambda: rows_of(tf.reduce_sum, EMPTY_COLS))),
    # pf.jacobian, batch_jacobian, hessian
    row("jacobian-f-not-callable", lambda: pf.jacobian(None, X), Raises(ARG_ERRORS, "f")),
    row("jacobian-x-int", lambda: pf.jacobian(lambda v: v, INTS), Raises(ARG_ERRORS, "x")),
    row("jacobian-x-list", lambda: pf.jacobian(lambda v: v, [1., 2.]),
        Raises(ARG_ERRORS, "x")),
    row("jacobian-f-returns-none", lambda: pf.jacobian(lambda v: None, X),
        Raises(ARG_ERRORS, "f")),
    row("jacobian-f-returns-int", lambda: pf.jacobian(lambda v: tf.cast(v, tf.int32), X),
        Raises(ARG_ERRORS, "int")),
    row("jacobian-nan", lambda: pf.jacobian(lambda v: v * v, NAN),
        Loop(lambda: jacobian_loop(lambda v: v * v, NAN))),
    # (TensorFlow's own loop-based jacobian raises here; the loop's value is empty.)
    row("jacobian-empty", lambda: pf.jacobian(lambda v: v * 2., tf.zeros([0])),
        Loop(lambda: tf.zeros([0, 0]))),
    row("batch-jacobian-scalar-x", lambda: pf.batch_jacobian(lambda v: v * v, tf.constant(1.)),
        Raises(ARG_ERRORS, "batch")),
    row("batch-jacobian-rows-differ",
        lambda: pf.batch_jacobian(lambda v: tf.concat([v, v], 0), X),
        Raises(ARG_ERRORS, "rows")),
    row("batch-jacobian-x-int", lambda: pf.batch_jacobian(lambda v: v, INTS),
        Raises(ARG_ERRORS, "x")),
    row("batch-jacobian-inf", lambda: pf.batch_jacobian(lambda v: tf.exp(v), NAN),
        Loop(lambda: batch_jacobian_loop(tf.exp, NAN))),
    row("batch-jacobian-zero-rows", lambda: pf.batch_jacobian(lambda v: v * 3., EMPTY_ROWS),
        Loop(lambda: tf.zeros([0, 3, 3]))),
    row("hessian-structure", lambda: pf.hessian(lambda v: tf.reduce_sum(v[0]), (X, X)),
        Raises(ARG_ERRORS, "single")),
    row("hessian-x-int", lambda: pf.hessian(lambda v: v, INTS), Raises(ARG_ERRORS, "x")),
    row("hessian-nan", lambda: pf.hessian(lambda v: tf.reduce_sum(v ** 3), NAN[0]),
        Loop(lambda: hessian_loop(lambda v: tf.reduce_sum(v ** 3), NAN[0]))),
    row("jacobian-jit-compile-not-bool", lambda: pf.jacobian(lambda v: v, X, jit_compile="yes"),
        Raises(ARG_ERRORS, "jit_compile")),
    row("hessian-jit-compile-not-bool",
        lambda: pf.hessian(lambda v: tf.reduce_sum(v), X[0], jit_compile=1),
        Raises(ARG_ERRORS, "jit_compile")),
    row("jacobian-jit-compile-nan", lambda: pf.jacobian(lambda v: v * v, NAN, jit_compile=True),
        Loop(lambda: jacobian_loop(lambda v: v * v, NAN))),
    # pf.tape_jacobian, tape_batch_jacobian
    row("tape-jacobian-sources-int",
        lambda: pf.tape_jacobian(tf.GradientTape(), X, INTS), Raises(ARG_ERRORS, "sources")),
    row("tape-jacobian-tape-not-a-tape", lambda: pf.tape_jacobian("tape", X, X),
        Raises(ARG_ERRORS, "tape")),
    row("tape-jacobian-tape-none", lambda: pf.tape_jacobian(None, X, X),
        Raises(ARG_ERRORS, "tape")),
    row("tape-jacobian-nan", lambda: tape_call(pf.tape_jacobian, NAN),
        Loop(lambda: jacobian_loop(lambda v: v * v, NAN))),
    row("tape-batch-jacobian-scalar-target",
        lambda: tape_call(pf.tape_batch_jacobian, X, f=tf.reduce_sum),
        Raises(ARG_ERRORS, "batch")),
    row("tape-batch-jacobian-source-int",
        lambda: pf.tape_batch_jacobian(tf.GradientTape(), X, INTS),
        Raises(ARG_ERRORS, "source")),
    row("tape-batch-jacobian-tape-not-a-tape", lambda: pf.tape_batch_jacobian("t", X, X),
        Raises(ARG_ERRORS, "tape")),
    row("tape-batch-jacobian-nan", lambda: tape_call(pf.tape_batch_jacobian, NAN),
        Loop(lambda: batch_jacobian_loop(lambda v: v * v, NAN))),
    # pf.per_example_gradients
    row("per-example-loss-not-callable", lambda: pf.per_example_gradients(1, [W], X),
        Raises(ARG_ERRORS, "loss_fn")),
    row("per-example-jit-compile-not-bool",
        lambda: pf.per_example_gradients(lambda r: tf.reduce_sum(r * W), [W], X,
                                         jit_compile=None),
        Raises(ARG_ERRORS, "jit_compile")),
    row("per-example-no-batch", lambda: pf.per_example_gradients(example_loss, [W]),
        Raises(ARG_ERRORS, "batch")),
    row("per-example-variables-int",
        lambda: pf.per_example_gradients(example_loss, [INTS], X),
        Raises(ARG_ERRORS, "variables")),
    row("per-example-batch-scalar",
        lambda: pf.per_example_gradients(example_loss, [W], tf.constant(1.)),
        Raises(ARG_ERRORS, "batch")),
    row("per-example-sizes-differ",
        lambda: pf.per_example_gradients(lambda a, b: example_loss(a) + b, [W], X,
                                         tf.zeros([3])),
        Raises(ARG_ERRORS, "batch")),
    row("per-example-sizes-differ-run-time",
        lambda: unknown_shape(lambda a, b: pf.per_example_gradients(
            lambda r, c: example_loss(r) + c, [W], a, b), X, tf.zeros([3])),
        Raises(ARG_ERRORS + (tf.errors.InvalidArgumentError,), "batch")),
    row("per-example-loss-not-scalar",
        lambda: pf.per_example_gradients(lambda r: W * r, [W], X), Raises(ARG_ERRORS, "scalar")),
    row("per-example-nan", lambda: pf.per_example_gradients(example_loss, [W], NAN),
        Loop(lambda: per_example_loop(example_loss, [W], NAN))),
    row("per-example-zero-rows",
        lambda: pf.per_example_gradients(example_loss, [W], EMPTY_ROWS),
        Loop(lambda: [tf.zeros([0, 3])])),
    # pf.explain
    row("explain-loop-fn-not-callable", lambda: pf.explain("f", 2),
        Raises(ARG_ERRORS, "loop_fn")),
    row("explain-iters-negative", lambda: pf.explain(ident, -3), Raises(ARG_ERRORS, "iters")),
    row("explain-iters-vector", lambda: pf.explain(ident, tf.constant([1, 2])),
        Raises(ARG_ERRORS, "iters")),
    row("explain-budget-negative", lambda: pf.explain(ident, 2, memory_budget=-1),
        Raises(ARG_ERRORS, "memory_budget")),
    row("explain-budget-with-a-chunk-size",
        lambda: pf.explain(ident, 2, memory_budget=1 << 20, parallel_iterations=2),
        Raises(ARG_ERRORS, "memory_budget")),
    # pf.data.map_batched
    row("map-batched-fn-not-callable", lambda: pf.data.map_batched(None, 2),
        Raises(ARG_ERRORS, "fn")),
    row("map-batched-batch-size-zero", lambda: pf.data.map_batched(tf.abs, 0),
        Raises(ARG_ERRORS, "batch_size")),
    row("map-batched-batch-size-float", lambda: pf.data.map_batched(tf.abs, 2.5),
        Raises(ARG_ERRORS, "batch_size")),
    row("map-batched-batch-size-tensor", lambda: pf.data.map_batched(tf.abs, tf.constant(2)),
        Raises(ARG_ERRORS, "batch_size")),
    row("map-batched-drop-remainder-str",
        lambda: pf.data.map_batched(tf.abs, 2, drop_remainder="yes"),
        Raises(ARG_ERRORS, "drop_remainder")),
    row("map-batched-not-a-dataset", lambda: pf.data.map_batched(tf.abs, 2)([1, 2]),
        Raises(ARG_ERRORS, "dataset")),
    row("map-batched-unknown-keyword",
        lambda: pf.data.map_batched(tf.abs, 2, batched_inputs="x"),
        Raises(ARG_ERRORS, "batched_inputs")),
    row("map-batched-nan", lambda: map_batched(lambda r: r * 2., NAN, 1),
        Loop(lambda: map_then_batch(lambda r: r * 2., NAN, 1))),
    row("map-batched-empty", lambda: map_batched(lambda r: r * 2., EMPTY_ROWS, 2),
        Loop(lambda: [])),
    # collectives
    row("all-sum-outside-a-loop", lambda: pf.all_sum(X),
        Raises((RuntimeError,) + ARG_ERRORS, "inside the loop body")),
    row("all-gather-outside-a-loop", lambda: pf.all_gather(X),
        Raises((RuntimeError,) + ARG_ERRORS, "inside the loop body")),
    row("all-sum-none", lambda: pf.pfor(lambda i: pf.all_sum(None), 2),
        Raises(ARG_ERRORS, r"\bx must\b")),
    row("all-sum-object", lambda: pf.pfor(lambda i: pf.all_sum(object()), 2),
        Raises(ARG_ERRORS, r"\bx must\b")),
    row("all-sum-nan", lambda: collective("all_sum", NAN),
        Loop(lambda: tf.stack([tf.reduce_sum(NAN, 0)] * 2))),
    row("all-max-nan", lambda: collective("all_max", NAN),
        Loop(lambda: tf.stack([tf.reduce_max(NAN, 0)] * 2))),
    row("all-mean-empty", lambda: collective("all_mean", EMPTY_COLS),
        Loop(lambda: tf.zeros([2, 0]))),
    row("all-gather-ints", lambda: collective("all_gather", INTS),
        Loop(lambda: tf.stack([INTS] * 2))),
    row("all-sum-in-per-iteration-cond",
        lambda: pf.pfor(lambda i: tf.cond(i > 0, lambda: pf.all_sum(tf.gather(X, i)),
                                          lambda: tf.gather(X, i)), 2),
        Raises(ARG_ERRORS, "cond")),
    # pf.register_converter
    row("register-converter-op-type-int", lambda: register_and_remove(3),
        Raises(ARG_ERRORS, "op_type")),
    row("register-converter-op-type-int-undecorated", lambda: pf.register_converter(3),
        Raises(ARG_ERRORS, "op_type")),
    row("register-converter-op-type-list-of-int",
        lambda: pf.register_converter(["Sinh", 3]), Raises(ARG_ERRORS, "op_type")),
    row("register-converter-op-type-empty-list", lambda: pf.register_converter([]),
        Raises(ARG_ERRORS, "op_type")),
    row("register-converter-op-type-empty", lambda: register_and_remove(""),
        Raises(ARG_ERRORS, "op_type")),
    row("register-converter-priority-str", lambda: register_and_remove("Sinh", priority="hi"),
        Raises(ARG_ERRORS, "priority")),
    row("register-converter-pattern-bad", lambda: register_and_remove("Sinh", inputs="XY"),
        Raises(ARG_ERRORS, "inputs")),
    row("register-converter-not-callable", lambda: pf.register_converter("Sinh")(3),
        Raises(ARG_ERRORS, "callable")),
    row("register-batch-polymorphic-op-type-int", lambda: polymorphic_and_remove(3),
        Raises(ARG_ERRORS, "op_type")),
    row("register-batch-polymorphic-op-type-int-direct",
        lambda: pf.register_batch_polymorphic(3), Raises(ARG_ERRORS, "op_type")),
    row("register-batch-polymorphic-batched-inputs-negative",
        lambda: polymorphic_and_remove("Softsign", batched_inputs=[-1]),
        Raises(ARG_ERRORS, "batched_inputs")),
    row("register-batch-polymorphic-priority-str",
        lambda: polymorphic_and_remove("Softsign", priority="hi"),
        Raises(ARG_ERRORS, "priority")),
    row("register-batch-polymorphic-batched-inputs-str",
        lambda: polymorphic_and_remove("Softsign", batched_inputs="x"),
        Raises(ARG_ERRORS, "batched_inputs")),
    # A broken converter is skipped with a warning naming it; the next one (the math
    # pack's) takes the op, also with fallback="error" (issue 17 items 2 and 6).
    row("register-converter-wrong-dtype",
        lambda: warned("wrong_dtype", lambda: registered("Sinh", wrong_dtype, sinh_body, 3,
                                                         fallback="error")),
        Loop(lambda: loop(sinh_body, 3))),
    row("register-converter-wrong-rows",
        lambda: warned("wrong_rows", lambda: registered("Sinh", wrong_rows, sinh_body, 3,
                                                        fallback="error")),
        Loop(lambda: loop(sinh_body, 3))),
    row("register-converter-wrong-rows-fallback",
        lambda: warned("wrong_rows", lambda: registered("Sinh", wrong_rows, sinh_body, 3,
                                                        fallback="loop")),
        Loop(lambda: loop(sinh_body, 3))),
    # pf.custom_vectorization
    row("custom-vectorization-not-callable", lambda: pf.custom_vectorization(3),
        Raises(ARG_ERRORS, "callable")),
    row("custom-vectorization-rule-not-callable", lambda: custom().def_vectorized("f"),
        Raises(ARG_ERRORS, "def_vectorized")),
    row("custom-vectorization-no-rule",
        lambda: pf.pfor(lambda i: custom()(tf.gather(X, i)), 2, fallback="error"),
        Raises(ARG_ERRORS, "def_vectorized")),
    row("custom-vectorization-rule-wrong-rows",
        lambda: pf.pfor(lambda i: custom(lambda s, x: x[:1] * 2.)(tf.gather(X, i)), 2,
                        fallback="error"),
        Raises(ARG_ERRORS, "rows")),
    row("custom-vectorization-rule-wrong-structure",
        lambda: pf.pfor(lambda i: custom(lambda s, x: (x, x))(tf.gather(X, i)), 2,
                        fallback="error"),
        Raises(ARG_ERRORS, "structure")),
    row("custom-vectorization-nan",
        lambda: pf.pfor(lambda i: custom(lambda s, x: x * 2.)(tf.gather(NAN, i)), 2,
                        fallback="error"),
        Loop(lambda: NAN * 2.)),
    # pf.dag_map
    row("dag-map-cell-not-callable", lambda: pf.dag_map(3, X, [[-1], [0]]),
        Raises(ARG_ERRORS, "`cell` must be callable")),
    row("dag-map-children-float", lambda: pf.dag_map(dag_cell, X, [[-1.], [0.]]),
        Raises(ARG_ERRORS, "`children` must be an integer")),
    row("dag-map-children-rank-1", lambda: pf.dag_map(dag_cell, X, [-1, 0]),
        Raises(ARG_ERRORS, r"`children` must be \[n_nodes, k\]")),
    row("dag-map-rows-differ", lambda: pf.dag_map(dag_cell, X, [[-1], [0], [1]]),
        Raises(ARG_ERRORS, "`inputs` has 2 rows but `children` has 3")),
    row("dag-map-no-inputs", lambda: pf.dag_map(dag_cell, [], [[-1], [0]]),
        Raises(ARG_ERRORS, "`inputs` holds no tensor")),
    row("dag-map-cycle", lambda: pf.dag_map(dag_cell, X, [[1], [0]]),
        Raises((tf.errors.InvalidArgumentError,), "cycle")),
    row("dag-map-child-out-of-range", lambda: pf.dag_map(dag_cell, X, [[-1], [2]]),
        Raises((tf.errors.InvalidArgumentError,), r"node\W+1\W+has a child outside")),
    row("dag-map-nan", lambda: pf.dag_map(dag_cell, NAN, [[-1], [0]], fallback="error"),
        Loop(lambda: tf.stack([NAN[0], NAN[1] + NAN[0]]))),
    # pf.vectorize_loops
    row("vectorize-loops-not-callable", lambda: pf.vectorize_loops(3),
        Raises(ARG_ERRORS, "fn must be callable")),
    row("vectorize-loops-check-str", lambda: pf.vectorize_loops(abs, check="yes"),
        Raises(ARG_ERRORS, "check must be True or False")),
    row("vectorize-loops-budget-negative", lambda: pf.vectorize_loops(abs, memory_budget=-1),
        Raises(ARG_ERRORS, "memory_budget")),
    row("vectorize-loops-nan",
        lambda: pf.vectorize_loops(lambda x: tf.map_fn(lambda r: r * 2., x), check=True)(NAN),
        Loop(lambda: NAN * 2.)),
    row("vectorize-loops-no-rows",
        lambda: pf.vectorize_loops(lambda x: tf.map_fn(lambda r: r * 2., x))(X[:0]),
        Loop(lambda: X[:0])),
]


@pytest.mark.parametrize("call, expect", ROWS)
def test_bad_input(call, expect):
    if isinstance(expect, Raises):
        with pytest.raises(expect.types, match=expect.pattern):
            call()
        return
    assert_same(call(), expect.reference())


# Row-id prefixes of each public function; default_registry takes no argument.
COVERED = {
    "pfor": "pfor-", "vectorized_map": "vectorized-map-", "map_fn": "map-fn-",
    "vmap": "vmap-", "jacobian": "jacobian-", "batch_jacobian": "batch-jacobian-",
    "hessian": "hessian-", "tape_jacobian": "tape-jacobian-",
    "tape_batch_jacobian": "tape-batch-jacobian-", "per_example_gradients": "per-example-",
    "explain": "explain-", "data.map_batched": "map-batched-", "all_sum": "all-sum-",
    "all_max": "all-max-", "all_mean": "all-mean-", "all_gather": "all-gather-",
    "register_converter": "register-converter-",
    "register_batch_polymorphic": "register-batch-polymorphic-",
    "custom_vectorization": "custom-vectorization-", "dag_map": "dag-map-",
    "vectorize_loops": "vectorize-loops-",
}


def test_every_public_function_has_rows():
    public = {name for name in pf.__all__ if callable(getattr(pf, name))
              and not isinstance(getattr(pf, name), type)}
    public |= {"data.map_batched"}
    missing = public - set(COVERED) - {"default_registry", "all_min", "hookimpl", "data"}
    assert not missing, f"no bad-input rows for {sorted(missing)}"
    for name, prefix in COVERED.items():
        assert any(p.id.startswith(prefix) for p in ROWS), name
