"""Running a drawn program under pfor in each mode and comparing with the loop.

Modes:
- ``eager``: ``pf.pfor(loop_fn, n)`` eagerly;
- ``function``: inside a ``tf.function`` whose ``iters`` is a run-time scalar int32;
- ``chunked``: ``parallel_iterations=2`` (collectives over all iterations must raise a
  ``pf.ConversionError`` naming ``parallel_iterations`` when there is more than one
  chunk; a draw under ``randomness="same"`` is shared by all chunks);
- ``xla``: inside ``tf.function(jit_compile=True)``, for bodies whose sequential loop
  compiles under XLA, i.e. the body with a run-time index (others are skipped); where
  pfor differs from the loop it may instead agree with the loop compiled by XLA too
  (XLA's integer arithmetic is not the kernels': int32 ``reduce_mean`` wraps around
  under XLA, not in the kernel; its stateless random draws are not the kernels');
- ``xla_chunked``: ``xla`` with ``parallel_iterations=2`` (chunks of static size in a
  compiled while loop; an odd ``n`` converts its last iteration once more, after it);
- ``iters0``: ``iters = 0``, static (eager) and at run time (``tf.function``): empty
  outputs of the loop's per-iteration shapes and dtypes;
- ``strict``: ``fallback="error"`` for bodies whose every op has a converter (the
  grammar says so); the other modes use ``fallback="loop"``.

Every mode but ``strict`` also fails when a converter raised and was only contained
(its RuntimeWarning): that is a converter bug the fallback hid.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import tensorflow as tf

import pfor_core as pf
import fuzz_ops_array
import fuzz_ops_math
from fuzz_ops_control import CONTROL
from fuzz_ops_nn import NN
from fuzz_program import Ctx, render

# The grammar, by family: a statement draws a family (by FAMILY_WEIGHTS, default 1),
# then one of its elements.
FAMILIES = {
    "elementwise": fuzz_ops_math.ELEMENTWISE, "reductions": fuzz_ops_math.REDUCTIONS,
    "contractions": fuzz_ops_math.CONTRACTIONS, "linalg": fuzz_ops_math.LINALG,
    "indexing": fuzz_ops_array.INDEXING, "shapes": fuzz_ops_array.SHAPES,
    "random": fuzz_ops_array.RANDOM, "nn": NN, "control": CONTROL,
}
OPS = [dataclasses.replace(op, family=family)
       for family, ops in FAMILIES.items() for op in ops]
# Control flow holds much of the converters' logic: drawn as often as three families.
FAMILY_WEIGHTS = {"control": 3, "elementwise": 2}
MODES = ("eager", "function", "chunked", "xla", "xla_chunked", "iters0", "strict")

# (rtol, atol); atol is relative to the largest finite magnitude of the loop's output,
# so a value computed as a difference of large terms is compared at their scale.
# Integers and booleans must be equal.
TOLERANCES = {tf.float32: (2e-4, 2e-5), tf.float64: (1e-9, 1e-11)}


class Skip(Exception):
    """The mode does not apply to this program (e.g. its loop does not compile under
    XLA)."""


def check(program, mode: str) -> None:
    """Raise AssertionError with a reproducer when pfor disagrees with the loop in
    ``mode``; Skip when the mode does not apply."""
    fallback = "error" if mode == "strict" else "loop"
    ctx = Ctx(tensors=program.tensors(), reference=False, fallback=fallback)
    loop_fn = program.loop_fn(ctx)
    kwargs = {"fallback": fallback, "randomness": program.randomness}
    if mode in ("xla", "xla_chunked"):
        _loop_compiles_under_xla(program)
    # All iterations at once: a collective (documented to raise with more than one
    # chunk).
    expect_error = mode in ("chunked", "xla_chunked") and program.n > 2 and any(
        s.lockstep is not None for s in program.body.stmts)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = _run(mode, loop_fn, program.n, kwargs)
        except pf.ConversionError as err:
            if expect_error and "parallel_iterations" in str(err):
                return
            _fail(program, mode, f"pfor raised {type(err).__name__} where the loop works", err)
        except Exception as err:  # noqa: BLE001 - any crash where the loop works fails
            _fail(program, mode, f"pfor raised {type(err).__name__} where the loop works", err)
    contained = [w for w in caught if issubclass(w.category, RuntimeWarning)
                 and "pfor: converter" in str(w.message)]
    if contained:
        _fail(program, mode, "a converter raised (contained, fell back)",
              contained[0].message)
    if expect_error:
        _fail(program, mode, "collectives with parallel_iterations=2 gave no "
              "ConversionError")
    if mode == "iters0":
        return _check_empty(program, mode, got)
    ctx_ref = Ctx(tensors=ctx.tensors, reference=True)
    _check_draws(program, mode, got, ctx_ref)
    try:
        want = program.reference(ctx_ref)
    except Exception as err:  # noqa: BLE001
        raise AssertionError(f"fuzzer bug: the sequential loop raised {err!r}\n"
                             f"{render(program, mode)}") from err
    try:
        for k in range(program.visible):
            _compare(program, mode, k, got[k], want[k])
    except AssertionError:
        compiled = _compiled_reference(program, mode, ctx_ref)
        if compiled is None:
            raise
        for k in range(program.visible):
            _compare(program, mode, k, got[k], compiled[k])


def _run(mode, loop_fn, n, kwargs):
    if mode in ("eager", "strict"):
        return pf.pfor(loop_fn, n, **kwargs)
    if mode == "chunked":
        return pf.pfor(loop_fn, n, parallel_iterations=2, **kwargs)
    if mode in ("xla", "xla_chunked"):
        if mode == "xla_chunked":
            kwargs = dict(kwargs, parallel_iterations=2)
        return tf.function(lambda: pf.pfor(loop_fn, n, **kwargs), jit_compile=True,
                           autograph=False)()
    at_run_time = tf.function(lambda k: pf.pfor(loop_fn, k, **kwargs), autograph=False,
                              input_signature=[tf.TensorSpec([], tf.int32)])
    if mode == "function":
        return at_run_time(tf.constant(n))
    assert mode == "iters0", mode
    return pf.pfor(loop_fn, 0, **kwargs), at_run_time(tf.constant(0))


def _compiled_reference(program, mode, ctx_ref):
    """Under ``xla``, the sequential loop with each iteration compiled too (None in other
    modes, and for bodies with a collective, which needs all iterations statement by
    statement): pfor may agree with it where XLA's arithmetic is not the kernels'."""
    if mode not in ("xla", "xla_chunked") or not program.n or any(
            s.lockstep is not None for s in program.body.walk()):
        return None
    body = tf.function(program.loop_fn(ctx_ref), jit_compile=True, autograph=False)
    rows = [body(tf.constant(j)) for j in range(program.n)]
    return [tf.stack([row[k] for row in rows]) for k in range(len(program.body.outputs))]


def _loop_compiles_under_xla(program):
    """Skip unless the body compiles under XLA with the index known only at run time
    (as in a tf.while_loop over the iterations; a Python loop would make the index a
    constant, and everything that depends on it too)."""
    ctx = Ctx(tensors=program.tensors(), reference=True)
    body = tf.function(program.loop_fn(ctx), jit_compile=True, autograph=False)
    try:
        body(tf.constant(0))
    except Exception as err:  # noqa: BLE001
        raise Skip(f"the loop does not compile under XLA: {type(err).__name__}") from err


def _check_draws(program, mode, got, ctx_ref):
    """randomness="same": every row holds the same draw; the loop then reuses it."""
    for k, stmt in enumerate(program.draws):
        rows = got[program.visible + k].numpy()
        if not all(np.array_equal(rows[0], r, equal_nan=True) for r in rows):
            _fail(program, mode, f"randomness='same' gave different draws of "
                  f"{stmt.out.name} in different iterations")
        ctx_ref.draws[stmt.out.name] = tf.constant(rows[0])


def _check_empty(program, mode, got):
    for where, outs in zip(("static iters=0", "run-time iters=0"), got):
        for k, value in enumerate(program.body.outputs[:program.visible]):
            t = outs[k]
            want = (0,) + value.shape
            ok = t.dtype == value.dtype and (
                tuple(t.shape) == want if value.static and not value.n_shaped
                else t.shape.rank == len(want) and t.shape[0] == 0)
            if not ok:
                _fail(program, mode, f"{where}: output {k} is {t.dtype.name}"
                      f"{list(t.shape)}, the loop's rows are {value.describe()}")


def _compare(program, mode, k, got, want):
    got = tf.convert_to_tensor(got)
    name = program.body.outputs[k].name
    what = f"output {k} ({name})"
    if got.dtype != want.dtype or got.shape != want.shape:
        _fail(program, mode, f"{what} is {got.dtype.name}{got.shape.as_list()}, the loop's is "
              f"{want.dtype.name}{want.shape.as_list()}")
    a, e = got.numpy(), want.numpy()
    try:
        if got.dtype in TOLERANCES:
            rtol, atol = TOLERANCES[got.dtype]
            finite = np.abs(e[np.isfinite(e)])
            scale = max(1.0, float(finite.max())) if finite.size else 1.0
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol * scale, equal_nan=True)
        else:
            np.testing.assert_array_equal(a, e)
    except AssertionError as err:
        _fail(program, mode, f"{what} differs from the loop's:{err}")


def _fail(program, mode, what, cause=None):
    detail = f": {type(cause).__name__}: {_first_lines(cause)}" if cause is not None else ""
    raise AssertionError(f"[{mode}] {what}{detail}\n--- reproducer ---\n"
                         f"{render(program, mode)}") from (
        cause if isinstance(cause, BaseException) else None)


def _first_lines(err, count=6):
    lines = str(err).strip().splitlines()
    return "\n".join(lines[:count]) + (" ..." if len(lines) > count else "")
