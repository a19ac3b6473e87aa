"""The equivalence check: pfor against the same loop run sequentially.

Pack authors and the project's own tests use it (through ``pfor_core.testing``)::

    from pfor_core import testing

    testing.assert_matches_loop(lambda i: tf.exp(tf.gather(x, i)), 4)
    testing.check_op(tf.matmul, [a, b], stacked=[True, False], n=3)

``check_op`` builds the loop body from an op and its arguments: a stacked argument
carries one row per iteration (row ``i`` is fed to iteration ``i``), an invariant one is
shared. ``invariance_combinations`` enumerates every stacked/invariant mix. Both run
with ``fallback="error"`` by default, so a passing check means no fallback happened.
"""

from __future__ import annotations

import dataclasses
import itertools
import warnings

import numpy as np
import tensorflow as tf

from pfor_core import api

# Tolerances by dtype: (rtol, atol).
TOLERANCES = {
    tf.float16: (1e-2, 1e-2), tf.bfloat16: (2e-2, 2e-2),
    tf.float32: (1e-4, 1e-5), tf.float64: (1e-9, 1e-12),
    tf.complex64: (1e-4, 1e-5), tf.complex128: (1e-9, 1e-12),
}


def tolerance(dtype) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing values of ``dtype`` (exact for other dtypes)."""
    return TOLERANCES.get(tf.as_dtype(dtype), (0.0, 0.0))


@dataclasses.dataclass(frozen=True)
class RaggedArg:
    """An argument whose rows differ in length: iteration i gets
    ``padded[i][:lengths[i]]`` (a slice with a per-iteration bound, so the body holds a
    ragged value). What beyond ``lengths`` is in ``padded`` is never read by the loop."""

    padded: object  # [n, width, ...]
    lengths: object  # [n] ints <= width

    def row(self, i):
        return tf.gather(tf.convert_to_tensor(self.padded), i)[
            :tf.gather(tf.convert_to_tensor(self.lengths, tf.int32), i)]


def sequential(loop_fn, iters: int):
    """The reference: ``loop_fn(i)`` run eagerly for each i, stacked (as a
    ``tf.RaggedTensor`` where the rows differ in shape); a ``None`` it returns stays
    ``None``, as pfor gives it."""
    rows = [loop_fn(tf.constant(i, tf.int32)) for i in range(iters)]
    if not rows:
        return None
    return tf.nest.map_structure(
        lambda *xs: None if xs[0] is None else _stack_rows([tf.convert_to_tensor(x)
                                                            for x in xs]), *rows)


def _stack_rows(rows):
    if len({tuple(r.shape.as_list()) for r in rows}) <= 1:
        return tf.stack(rows)
    if rows[0].shape.rank > 1:
        # Rows may differ in any dimension (tf.ragged.stack of dense rows takes only
        # the first): ragged in all of them.
        rows = [tf.RaggedTensor.from_tensor(r, ragged_rank=r.shape.rank - 1) for r in rows]
    return tf.ragged.stack(rows)


def assert_allclose(actual, expected, *, rtol=None, atol=None, what="output"):
    """Equal dtypes and shapes, and values close within the dtype's tolerance (exactly
    equal for integers, strings and booleans); ragged values row by row."""
    if isinstance(actual, tf.RaggedTensor) or isinstance(expected, tf.RaggedTensor):
        _assert_rows_close(actual, expected, rtol, atol, what)
        return
    actual = tf.convert_to_tensor(actual)
    expected = tf.convert_to_tensor(expected)
    if actual.dtype != expected.dtype:
        raise AssertionError(f"{what}: dtype {actual.dtype.name} != {expected.dtype.name}")
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {actual.shape} != {expected.shape}")
    default_rtol, default_atol = tolerance(actual.dtype)
    a, e = actual.numpy(), expected.numpy()
    if actual.dtype.is_floating or actual.dtype.is_complex:
        np.testing.assert_allclose(a, e, rtol=default_rtol if rtol is None else rtol,
                                   atol=default_atol if atol is None else atol,
                                   equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(a, e, err_msg=what)


def _rows(value):
    """Nested lists of a ragged or dense tensor, and its dtype."""
    if isinstance(value, tf.RaggedTensor):
        return value.to_list(), value.dtype
    value = tf.convert_to_tensor(value)
    return value.numpy().tolist(), value.dtype


def _assert_rows_close(actual, expected, rtol, atol, what):
    (a, a_dtype), (e, e_dtype) = _rows(actual), _rows(expected)
    if a_dtype != e_dtype:
        raise AssertionError(f"{what}: dtype {a_dtype.name} != {e_dtype.name}")

    def shape_of(rows):
        return [shape_of(r) for r in rows] if isinstance(rows, list) else None

    if shape_of(a) != shape_of(e):
        raise AssertionError(f"{what}: rows of different shapes: {a!r:.300} != {e!r:.300}")

    def flat(rows):
        return [x for r in rows for x in flat(r)] if isinstance(rows, list) else [rows]

    assert_allclose(tf.constant(flat(a), a_dtype), tf.constant(flat(e), e_dtype), rtol=rtol,
                    atol=atol, what=what)


# How the kit runs pfor: eagerly; inside a tf.function with iters a run-time tensor;
# inside one whose inputs also have unknown dimensions (``check_op`` only: it knows the
# inputs); in chunks (``parallel_iterations=2``); compiled by XLA (``jit_compile=True``);
# nested, as the body of an outer ``pf.pfor`` over two iterations.
MODES = ("eager", "graph", "unknown_shapes", "chunked", "xla", "nested")
# What ``check`` draws from by default: the modes every converter must pass.
DRAWN_MODES = MODES[:3]
# The ways to run one graph of the body (no XLA, no other shapes): what a check of a
# body with ragged values runs by default.
RUN_MODES = ("eager", "graph", "chunked")


def run_in_mode(loop_fn, iters: int, mode: str, **pfor_kwargs):
    """``pf.pfor(loop_fn, iters, **pfor_kwargs)`` run the way ``mode`` says (one of
    ``MODES`` but ``unknown_shapes``). For ``nested`` the result is the outer loop's:
    one leading axis of 2 more."""
    if mode == "eager":
        return api.pfor(loop_fn, iters, **pfor_kwargs)
    if mode == "chunked":
        return api.pfor(loop_fn, iters, **{"parallel_iterations": 2, **pfor_kwargs})
    if mode == "graph":
        return tf.function(lambda k: api.pfor(loop_fn, k, **pfor_kwargs),
                           autograph=False)(tf.constant(iters))
    if mode == "xla":
        return tf.function(lambda: api.pfor(loop_fn, iters, **pfor_kwargs),
                           autograph=False, jit_compile=True)()
    if mode == "nested":
        return api.pfor(lambda _: api.pfor(loop_fn, iters, **pfor_kwargs), 2,
                        fallback=pfor_kwargs.get("fallback", "error"))
    raise ValueError(f"mode={mode!r} is not one of {MODES} (unknown_shapes: use check_op)")


def assert_matches_loop(loop_fn, iters: int, *, modes=("eager",), ragged: bool = False,
                        fallback: str = "error", rtol=None, atol=None, graph: bool = False,
                        **pfor_kwargs):
    """Assert ``pf.pfor(loop_fn, iters)`` equals the sequential loop in every mode of
    ``modes`` (see ``MODES``; the loop runs once for all of them).

    With ``fallback="error"`` (the default) a conversion that would need the fallback
    raises, so passing also means nothing fell back. ``graph=True`` adds the mode
    ``"graph"``. ``ragged=True``: the body returns one tensor whose shape may differ
    per iteration, compared row by row (pfor with ``ragged_outputs=True``). With
    ``iters == 0`` the result's dtype and per-iteration shape are checked against the
    body's. Returns the result of the first mode.

    >>> import tensorflow as tf
    >>> from pfor_core import testing
    >>> x, n = tf.ones([3, 4]), tf.constant([2, 0, 4])
    >>> _ = testing.assert_matches_loop(lambda i: tf.reduce_sum(testing.rows(x, n, i)), 3,
    ...                                 modes=("eager", "graph", "chunked"))
    """
    modes = tuple(modes) + (("graph",) if graph and "graph" not in modes else ())
    if not modes or any(m not in MODES or m == "unknown_shapes" for m in modes):
        raise ValueError(f"modes={modes!r}: give modes of {MODES} but unknown_shapes "
                         "(which check_op runs)")
    if ragged:
        pfor_kwargs["ragged_outputs"] = True
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=_fallback_warning())
        for mode in modes:
            results.append(run_in_mode(loop_fn, iters, mode, fallback=fallback, **pfor_kwargs))
    if ragged:
        expected = [loop_fn(tf.constant(j)) for j in range(iters)]
    else:
        expected = sequential(loop_fn, iters)
    for mode, got in zip(modes, results):
        where = f" ({mode})"
        for outer in ([got[0], got[1]] if mode == "nested" and iters else [got]):
            if ragged:
                assert_rows_match(outer, expected, rtol=rtol, atol=atol, where=where)
            elif expected is None:
                _assert_empty_like_body(outer, loop_fn, where)
            else:
                assert_same_results(outer, expected, rtol=rtol, atol=atol, where=where)
    return results[0]


def _assert_empty_like_body(got, loop_fn, where: str) -> None:
    """At ``iters == 0``: no rows, and each output has the body's dtype and a shape the
    body's per-iteration shape allows."""
    traced = tf.function(loop_fn, autograph=False).get_concrete_function(
        tf.TensorSpec([], tf.int32)).structured_outputs
    got_leaves = tf.nest.flatten(got, expand_composites=False)
    want_leaves = tf.nest.flatten(traced, expand_composites=False)
    assert len(got_leaves) == len(want_leaves), (
        f"iters=0 gave {len(got_leaves)} outputs, the body returns {len(want_leaves)}{where}")
    for k, (a, e) in enumerate(zip(got_leaves, want_leaves)):
        if a is None or e is None:
            assert a is e, f"output {k}{where}: {a!r:.100} where the body gives {e!r:.100}"
            continue
        assert int(a.shape[0]) == 0, f"iters=0 gave leading dimension {a.shape[0]}{where}"
        assert a.dtype == e.dtype, (f"output {k}{where}: dtype {a.dtype.name} where the body's "
                                    f"is {e.dtype.name}")
        if not isinstance(a, tf.RaggedTensor) and e.shape.rank is not None:
            assert e.shape.is_compatible_with(a.shape[1:]), (
                f"output {k}{where}: per-iteration shape {a.shape[1:]} where the body's is "
                f"{e.shape}")


def random_values(rng, shape, dtype=np.float32) -> np.ndarray:
    """Random values of ``shape`` from a numpy ``Generator``: normal for floating and
    complex dtypes, small integers (-5 to 4) for integer ones."""
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 5, size=shape).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def rows(x, lengths, i):
    """Iteration i's ragged value: the first ``lengths[i]`` rows of ``x[i]`` (a body
    makes a value whose shape differs between iterations with it)."""
    return tf.gather(x, i)[:tf.gather(lengths, i)]


def assert_rows_match(got, expected_rows, *, rtol=None, atol=None, where=""):
    """A (ragged) pfor result against the loop's values, one per iteration (rows with no
    element are compared by their number of elements only)."""
    count = int(got.nrows() if isinstance(got, tf.RaggedTensor) else got.shape[0])
    assert count == len(expected_rows), f"{count} rows, {len(expected_rows)} iterations{where}"
    for j, e in enumerate(expected_rows):
        e = tf.convert_to_tensor(e)
        row = got[j]
        if isinstance(row, tf.RaggedTensor):
            size = row.flat_values.shape.num_elements()
            assert size == e.shape.num_elements(), (
                f"row {j}: {size} elements, the loop's has shape {e.shape}{where}")
            if size == 0:
                continue
            row = row.to_tensor()
        assert_allclose(row, e, rtol=rtol, atol=atol, what=f"row {j}{where}")


def assert_gradients_match(loop_fn, sources, iters: int, *, chunked: bool = False,
                           ragged: bool = False, rtol=1e-4, atol=1e-5):
    """Gradients of ``sum(w * loop_fn(i))`` (fixed weights by position) with respect to
    ``sources`` (tensors the body captures), through pfor and through the loop: equal,
    and NaN-free wherever the loop's are. The body returns one shape in every
    iteration, or with ``ragged=True`` any structure whose shapes may differ per
    iteration (pfor with ``ragged_outputs=True``; its floating outputs are weighed)."""
    sources = list(sources)
    kwargs = {"parallel_iterations": 2} if chunked else {}

    def loss(got):
        if ragged:
            return tf.add_n([_weighed(v) for v in _flat_floats(got)] + [tf.constant(0.)])
        return _weighed(got)

    # pfor's side in one graph function: a tape around an eager call of the converted
    # graph would build a forward and a backward function per call, 3x the time.
    @tf.function(autograph=False)
    def pfor_gradients():
        with tf.GradientTape() as tape:
            tape.watch(sources)
            l_got = loss(api.pfor(loop_fn, iters, fallback="error", ragged_outputs=ragged,
                                  **kwargs))
        return tape.gradient(l_got, sources)

    g_got = pfor_gradients()
    with tf.GradientTape() as tape:
        tape.watch(sources)
        if ragged:
            rows = [_flat_floats(loop_fn(tf.constant(j))) for j in range(iters)]
            l_expected = tf.add_n([_weighed(tf.concat(leaf, 0)) for leaf in zip(*rows)]
                                  + [tf.constant(0.)])
        else:
            l_expected = _weighed(tf.stack([loop_fn(tf.constant(j)) for j in range(iters)]))
    g_expected = tape.gradient(l_expected, sources)
    for k, (a, e) in enumerate(zip(g_got, g_expected)):
        a = tf.zeros_like(sources[k]) if a is None else tf.convert_to_tensor(a)
        e = tf.zeros_like(sources[k]) if e is None else tf.convert_to_tensor(e)
        finite = np.isfinite(e.numpy())
        assert np.all(np.isfinite(a.numpy())[finite]), (
            f"gradient {k}: NaN/inf where the loop's is finite")
        assert_allclose(a, e, rtol=rtol, atol=atol, what=f"gradient {k}")


def _weighed(values) -> tf.Tensor:
    """``sum(w * values)`` with weights fixed by position."""
    values = tf.convert_to_tensor(values)
    weights = tf.cos(tf.reshape(tf.range(tf.size(values), dtype=tf.float32) * 0.7,
                                tf.shape(values)))
    return tf.reduce_sum(tf.cast(values, tf.float32) * weights)


def _flat_floats(value) -> list:
    """The floating leaves of ``value``, each flattened (a ragged one's values, which
    are its rows' values one after the other)."""
    leaves = tf.nest.flatten(value, expand_composites=False)
    return [tf.reshape(leaf.flat_values if isinstance(leaf, tf.RaggedTensor) else leaf, [-1])
            for leaf in leaves if leaf.dtype.is_floating]


def assert_fails_like_loop(loop_fn, iters: int, *, error=tf.errors.InvalidArgumentError,
                           match: str | None = None, fallback: str = "error",
                           **pfor_kwargs):
    """Assert that the sequential loop raises ``error`` on bad data and that pfor does
    too: eagerly, and inside a ``tf.function`` with ``iters`` known only at run time
    (pfor's message must match ``match`` when given). For validation that a rewrite
    could lose, e.g. an index out of range that lands in another iteration's block."""
    import re

    try:
        sequential(loop_fn, iters)
    except error:
        pass
    else:
        raise AssertionError(f"the sequential loop did not raise {error.__name__}")
    runs = {
        "eager": lambda: api.pfor(loop_fn, iters, fallback=fallback, **pfor_kwargs),
        "tf.function": lambda: tf.function(
            lambda n: api.pfor(loop_fn, n, fallback=fallback, **pfor_kwargs),
            autograph=False)(tf.constant(iters)),
    }
    for where, run in runs.items():
        try:
            run()
        except error as err:
            if match is not None and not re.search(match, str(err)):
                raise AssertionError(f"pfor ({where}) raised {err!s:.300} not matching "
                                     f"{match!r}") from err
        else:
            raise AssertionError(f"pfor ({where}) did not raise {error.__name__} where "
                                 "the loop does")


def assert_rows(got, n: int) -> None:
    """Every tensor of a pfor result has ``n`` rows (iterations)."""
    for leaf in tf.nest.flatten(got, expand_composites=False):
        rows = leaf.nrows() if isinstance(leaf, tf.RaggedTensor) else leaf.shape[0]
        assert int(rows) == n, f"{int(rows)} rows for {n} iterations"


def assert_same_results(got, expected, *, rtol=None, atol=None, where=""):
    """Compare pfor's result with ``sequential``'s (None: no iteration ran)."""
    if expected is None:
        for leaf in tf.nest.flatten(got):
            if leaf is None:
                continue
            assert leaf.shape[0] == 0, f"iters=0 gave leading dimension {leaf.shape[0]}{where}"
        return
    tf.nest.assert_same_structure(got, expected)
    for k, (a, e) in enumerate(zip(tf.nest.flatten(got), tf.nest.flatten(expected))):
        if a is None or e is None:
            assert a is e, f"output {k}{where}: {a!r:.100} where the loop gives {e!r:.100}"
            continue
        assert_allclose(a, e, rtol=rtol, atol=atol, what=f"output {k}{where}")


def _fallback_warning():
    from pfor_core.errors import FallbackWarning

    return FallbackWarning


def loop_fn_for(op_fn, args, stacked, **kwargs):
    """A loop body that calls ``op_fn`` on row ``i`` of stacked args and on invariant
    args as they are."""
    tensors = [a if isinstance(a, RaggedArg) else tf.convert_to_tensor(a) if s else a
               for a, s in zip(args, stacked)]

    def loop_fn(i):
        row = [a.row(i) if isinstance(a, RaggedArg) else tf.gather(a, i) if s else a
               for a, s in zip(tensors, stacked)]
        return op_fn(*row, **kwargs)

    return loop_fn


def check_op(op_fn, args, *, stacked, n: int, rtol=None, atol=None, mode: str = "eager",
             ragged_outputs: bool = False, **kwargs):
    """Check ``op_fn(*args)`` under pfor for one invariance combination.

    ``stacked[k]`` says whether ``args[k]`` has a leading dimension of size ``n`` to be
    sliced per iteration. Non-tensor args (ints, lists) must be marked False. A
    ``RaggedArg`` (marked True) gives each iteration a row of its own length. ``mode``
    is one of ``MODES``. With ``ragged_outputs=True`` a result whose shape differs
    between iterations comes back as a ``tf.RaggedTensor`` and is compared row by row.
    """
    if len(stacked) != len(args):
        raise ValueError(f"stacked has {len(stacked)} entries for {len(args)} args")
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not one of {MODES}")
    if mode == "unknown_shapes":
        return check_op_unknown_shapes(op_fn, args, stacked=stacked, n=n, rtol=rtol,
                                       atol=atol, ragged_outputs=ragged_outputs, **kwargs)
    return assert_matches_loop(loop_fn_for(op_fn, args, stacked, **kwargs), n,
                               rtol=rtol, atol=atol, modes=(mode,),
                               ragged_outputs=ragged_outputs)


def draw_stacked(data, count: int) -> list[bool]:
    """Hypothesis helper: which of ``count`` inputs are stacked (at least one)."""
    from hypothesis import strategies as st

    out = [data.draw(st.booleans()) for _ in range(count)]
    if not any(out):
        out[data.draw(st.integers(0, count - 1))] = True
    return out


def invariance_combinations(count: int, *, require_stacked: bool = True):
    """Every stacked/invariant mix of ``count`` inputs (as tuples of bools)."""
    combos = itertools.product((True, False), repeat=count)
    return [c for c in combos if any(c) or not require_stacked]


def check_op_all_combinations(op_fn, make_arg, shapes, *, n: int, **kwargs):
    """``check_op`` for every invariance combination; ``make_arg(shape)`` makes one input
    value (called with ``[n] + shape`` for stacked inputs)."""
    for combo in invariance_combinations(len(shapes)):
        args = [make_arg([n] + list(s) if st else list(s)) for s, st in zip(shapes, combo)]
        check_op(op_fn, args, stacked=combo, n=n, **kwargs)


def check_op_unknown_shapes(op_fn, args, *, stacked, n: int, known_rank: bool = True,
                            rtol=None, atol=None, ragged_outputs: bool = False, **kwargs):
    """Like ``check_op``, but pfor runs inside a ``tf.function`` whose inputs have
    unknown dimensions (and rank, with ``known_rank=False``) and unknown values, with
    ``iters`` known only at run time: this exercises converters' dynamic paths."""
    if len(stacked) != len(args):
        raise ValueError(f"stacked has {len(stacked)} entries for {len(args)} args")
    # A RaggedArg travels as its two tensors.
    tensors = [t for a in args for t in ([tf.convert_to_tensor(a.padded),
                                          tf.convert_to_tensor(a.lengths, tf.int32)]
                                         if isinstance(a, RaggedArg) else
                                         [tf.convert_to_tensor(a)])]
    specs = [tf.TensorSpec([None] * t.shape.rank if known_rank else None, t.dtype)
             for t in tensors]

    def rebuilt(values):
        values, out = list(values), []
        for a in args:
            out.append(RaggedArg(values.pop(0), values.pop(0)) if isinstance(a, RaggedArg)
                       else values.pop(0))
        return out

    @tf.function(input_signature=specs + [tf.TensorSpec([], tf.int32)], autograph=False)
    def run(*inputs):
        *values, iters = inputs
        return api.pfor(loop_fn_for(op_fn, rebuilt(values), stacked, **kwargs), iters,
                        fallback="error", ragged_outputs=ragged_outputs)

    got = run(*tensors, tf.constant(n, tf.int32))
    expected = sequential(loop_fn_for(op_fn, rebuilt(tensors), stacked, **kwargs), n)
    assert_same_results(got, expected, rtol=rtol, atol=atol, where=" (unknown shapes)")
    return got
