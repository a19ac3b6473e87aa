"""The fallback: run one op in a sequential ``tf.while_loop`` over the iterations.

Stacked inputs are sliced to one row per iteration, ragged ones to each iteration's
extent, invariant inputs are used as they are. An output whose per-iteration shape is
static is stacked through a ``TensorArray``; one whose shape the body does not know may
differ between iterations: its elements and shapes are collected, and it becomes a
ragged value (padded). One whose rank the body does not know either (a
``tf.numpy_function`` without ``set_shape``) is collected with each iteration's rank as
well, and becomes an ``Unranked`` value (whose ranks may differ too). A stacked variant
(a tensor list) is sliced, and a variant output collected, as the pack that makes such
values taught the registry (``PackRegistrar.variant_form``). The result is always
right, only slow; ``explain`` and the ``fallback`` option report it.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from pfor_core import emit, empty, ragged, unrolled
from pfor_core.errors import ConversionError
from pfor_core.errors import Decline
from pfor_core.layout import Invariant, Stacked, View


def run_sequentially(op, layouts, conversion, reasons=()) -> list:
    n = conversion.n
    # Outputs nobody reads are not collected (they may even differ in shape per
    # iteration, like UniqueV2's values when only its indices are used).
    used = [bool(t.consumers()) or not _placeholder_ok(t.dtype) for t in op.outputs]
    variants = _variant_rows(op, layouts, conversion, reasons)
    specs = [_spec(op, t, conversion, reasons) for t, u in zip(op.outputs, used) if u]
    layouts = [_materialized(op, v) for v in layouts]
    if unrolled.applies(conversion):  # under XLA (see unrolled.py)
        if variants or any(s.decode for s in specs):
            raise _no_form(op, reasons, " under XLA")
        return unrolled.run_unrolled(op, layouts, conversion, used)
    unrolled.check_loop(op, conversion)
    # Outputs of no static shape may differ in shape between iterations: collected
    # as elements and shapes (and ranks), they become ragged (or unranked).
    kinds = [_kind(s) for s in specs]
    # In the body of an outer pfor, elements are gathered by concatenation instead of
    # a TensorArray: the outer conversion cannot keep a list whose elements differ in
    # size between its own iterations, but a loop variable that does makes it run this
    # whole loop per outer iteration.
    nested = empty.in_body()
    arrays = tuple(_arrays(s, kind, n, nested) for s, kind in zip(specs, kinds))

    def body(i, arrays):
        row = [variants[k](i) if k in variants else _row(v, i)
               for k, v in enumerate(layouts)]
        new = emit.recreate(op, row)
        for t, original in zip(new.outputs, op.outputs):
            # Shapes the body set by hand (a py_function's) hold for each iteration.
            if t.shape.is_compatible_with(original.shape):
                t.set_shape(original.shape)
        if not specs:
            with tf.control_dependencies([new] + list(new.outputs)):
                return i + 1, arrays
        values = [s.encode(t) for t, s in zip([t for t, u in zip(new.outputs, used) if u],
                                              specs)]
        return i + 1, tuple(_write(a, i, t, kind) for a, t, kind in zip(arrays, values, kinds))

    # Stateful ops keep the sequential order of a real loop.
    parallel = 1 if op._is_stateful else 10  # pylint: disable=protected-access
    # maximum_iterations: under XLA, a gradient of the loop sizes its accumulators by it.
    _, arrays = tf.while_loop(lambda i, *_: i < n, body, (tf.constant(0), arrays),
                              shape_invariants=(tf.TensorShape([]), _invariants(arrays, kinds)),
                              parallel_iterations=parallel, maximum_iterations=n)
    collected = iter(zip(arrays, specs, kinds))
    results = []
    for t, u in zip(op.outputs, used):
        if not u:
            results.append(Invariant(tensor=tf.zeros([], t.dtype)))  # never read
            continue
        array, spec, kind = next(collected)
        value = _unranked(array) if kind == _UNRANKED else _result(array, spec, conversion)
        results.append(spec.decode(value) if spec.decode else value)
    return results


@dataclasses.dataclass(frozen=True)
class _Spec:
    """What the loop collects for one output: tensors of ``dtype`` and per-iteration
    ``shape``, made from the op's output by ``encode`` and, when ``decode`` is set (a
    variant's form, see ``Registry.variant_forms``), turned back into its value."""

    dtype: tf.DType
    shape: tf.TensorShape
    encode: object = staticmethod(lambda t: t)
    decode: object = None


def _spec(op, original, conversion, reasons) -> _Spec:
    if original.dtype != tf.variant:
        return _Spec(original.dtype, original.shape)
    for _, form in conversion.registry.variant_forms:
        found = form.collect(original)
        if found is not None:
            encode, dtype, shape, decode = found
            return _Spec(dtype, tf.TensorShape(shape), encode, decode)
    raise _no_form(op, reasons)


def _variant_rows(op, layouts, conversion, reasons) -> dict:
    """Per stacked variant input: a function of the iteration giving its handle."""
    rows = {}
    for k, value in enumerate(layouts):
        if not (value.is_stacked and value.dtype == tf.variant):
            continue
        for _, form in conversion.registry.variant_forms:
            rows[k] = form.rows(value, op.inputs[k])
            if rows[k] is not None:
                break
        else:
            raise _no_form(op, reasons)
    return rows


def _no_form(op, reasons, where="") -> ConversionError:
    why = f" Converters declined: {'; '.join(reasons)}." if reasons else ""
    return ConversionError(
        f"pfor: {op.type} '{op.name}' takes or makes a per-iteration variant (an optional, "
        f"or a tensor list of a kind no pack restacks) that the fallback loop{where} cannot "
        f"slice or stack, and no converter handles it here.{why} Keep such values "
        "loop-invariant, or create them inside the loop that uses them.")


_ROWS, _VARYING, _UNRANKED = "rows", "varying", "unranked"


def _kind(spec) -> str:
    """How the loop collects an output: as rows (its shape is the same in every
    iteration, or it is only checked so: under XLA, which has no run-time shapes), as
    elements and shapes (of known rank), or as elements, shapes and ranks."""
    shape = spec.shape
    if shape.rank is None:
        return _ROWS if unrolled.compiled() else _UNRANKED
    return _ROWS if shape.is_fully_defined() else _VARYING


def _materialized(op, value):
    """A view as the stacked value it stands for (its storage is its own)."""
    if not isinstance(value, View) or value.dtype == tf.variant:
        return value
    stacked = value.materialize()
    if isinstance(stacked, Decline):
        raise ConversionError(
            f"pfor: {op.type} '{op.name}' has no converter for an input held as "
            f"{type(value).__name__}, which has no stacked form: {stacked.reason}.")
    return stacked


def _row(value, i):
    if isinstance(value, (ragged.Ragged, ragged.Unranked)):
        return value.row(i)
    if value.is_stacked:
        return tf.gather(value.tensor, i)
    return _constant_or(value.tensor)


def _constant_or(tensor):
    """An invariant input: a small constant is made again inside the loop, where the
    op may need its value when it is built (RaggedTensorToTensor's shape, a Reshape's
    shape); the loop body would otherwise capture it as a placeholder."""
    if tensor.dtype.is_integer or tensor.dtype == tf.bool:
        known = tf.get_static_value(tensor)
        if known is not None and known.size <= 64:
            return tf.constant(known, tensor.dtype)
    return tensor


def _arrays(original, kind, n, nested) -> tuple:
    """Loop variables collecting one output: its rows, or (for an output whose shape
    may vary) its flattened elements and its shapes, or (of unknown rank) its elements,
    its shapes one after the other, its ranks and its sizes. Rows, shapes of known rank,
    ranks and sizes go to a ``TensorArray``, or when ``nested`` to a tensor of ``n``
    rows updated in place; elements and unranked shapes to a ``TensorArray``, or when
    ``nested`` to a growing tensor."""
    if kind == _UNRANKED:
        if nested:
            return (tf.zeros([0], original.dtype), tf.zeros([0], tf.int32),
                    tf.zeros([n], tf.int32), tf.zeros([n], tf.int32))
        return (tf.TensorArray(original.dtype, size=n, infer_shape=False, element_shape=[None]),
                tf.TensorArray(tf.int32, size=n, infer_shape=False, element_shape=[None]),
                tf.TensorArray(tf.int32, size=n, element_shape=[]),
                tf.TensorArray(tf.int32, size=n, element_shape=[]))
    if kind == _VARYING:
        if nested:
            return (tf.zeros([0], original.dtype), tf.zeros([n, original.shape.rank], tf.int32))
        return (tf.TensorArray(original.dtype, size=n, infer_shape=False, element_shape=[None]),
                tf.TensorArray(tf.int32, size=n, element_shape=[original.shape.rank]))
    shape = original.shape
    if nested and shape.is_fully_defined():
        return (tf.zeros(tf.concat([[n], tf.constant(shape.as_list(), tf.int32)], 0),
                         original.dtype),)
    return (tf.TensorArray(original.dtype, size=n, element_shape=shape,
                           infer_shape=shape.is_fully_defined()),)


# How many of an output's loop variables grow (when they are tensors), by kind.
_GROWING = {_ROWS: 0, _VARYING: 1, _UNRANKED: 2}


def _invariants(arrays, kinds):
    """Shape invariants of the loop variables: a growing tensor's is ``[None]``."""
    return tuple(tuple(tf.TensorShape([None]) if k < _GROWING[kind] and tf.is_tensor(a)
                       else None for k, a in enumerate(group))
                 for group, kind in zip(arrays, kinds))


def _put(collected, i, value):
    if tf.is_tensor(collected):
        return tf.tensor_scatter_nd_update(collected, [[i]], value[None])
    return collected.write(i, value)


def _grow(collected, i, flat):
    return tf.concat([collected, flat], 0) if tf.is_tensor(collected) else collected.write(i, flat)


def _write(arrays, i, value, kind) -> tuple:
    if kind == _ROWS:
        return (_put(arrays[0], i, value),)
    shape = tf.shape(value, out_type=tf.int32)
    values = _grow(arrays[0], i, tf.reshape(value, [-1]))
    if kind == _VARYING:
        return (values, _put(arrays[1], i, shape))
    return (values, _grow(arrays[1], i, shape), _put(arrays[2], i, tf.size(shape)),
            _put(arrays[3], i, tf.size(value, out_type=tf.int32)))


def _unranked(arrays):
    """The collected output of unknown rank as an ``Unranked`` value."""
    return ragged.Unranked.of(*(a if tf.is_tensor(a) else a.stack() if k >= 2 else a.concat()
                                for k, a in enumerate(arrays)))


def _result(arrays, original, conversion):
    """The collected output as a layout value."""
    n_static = conversion.n_static
    if len(arrays) == 1:
        value = arrays[0] if tf.is_tensor(arrays[0]) else _stack(arrays[0], original,
                                                                  conversion.n)
        value.set_shape(tf.TensorShape([n_static]).concatenate(original.shape))
        return Stacked(tensor=value)
    flat = arrays[0] if tf.is_tensor(arrays[0]) else arrays[0].concat()
    shapes = arrays[1] if tf.is_tensor(arrays[1]) else arrays[1].stack()
    static = original.shape.as_list()
    axes = [d for d, size in enumerate(static) if size is None]
    padded = ragged.from_flat(flat, shapes, axes, original.shape).to_tensor()
    padded.set_shape(tf.TensorShape([n_static]).concatenate(original.shape))
    lengths = tuple(shapes[:, d] if d in axes else None for d in range(len(static)))
    return ragged.Ragged(padded=padded, lengths=lengths)


def _stack(array, original, n):
    """The rows written to ``array``. With no iteration (a branch no row takes, a loop
    of none) a value of no static shape has no known shape: its unknown dimensions
    are taken as 0."""
    if original.shape.is_fully_defined():
        return array.stack()
    return tf.cond(n > 0, array.stack, lambda: empty.rows(original))


def _placeholder_ok(dtype) -> bool:
    return dtype.is_numpy_compatible and dtype != tf.string
