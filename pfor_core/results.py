"""Checking what a converter returns, before anything uses it.

A converter's result must hold one layout value per output of the op, each of the
output's dtype, with a per-iteration static shape compatible with the output's, and,
if stacked and both are static, as many rows as the conversion has iterations. A
result that breaks this would give wrong values silently (a broadcast hides a wrong
shape, a cast a wrong dtype), so the walk treats it like a converter that raised: the
converter is reported and the op goes to the next converter or falls back.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.layout import Invariant, Layout, Stacked
from pfor_core.ragged import Ragged, Unranked


def check(op, result, n_static: int | None) -> tuple[list[Layout] | None, str]:
    """``(values, "")`` for a good result, ``(None, what is wrong)`` otherwise."""
    if isinstance(result, (Stacked, Invariant, Ragged)):
        result = [result]
    if not isinstance(result, (list, tuple)):
        return None, f"returned {_short(result)} instead of a list of layout values"
    values = list(result)
    if len(values) != len(op.outputs) or not all(
            isinstance(v, (Stacked, Invariant, Ragged)) or isinstance(v, Unranked)
            and t.shape.rank is None for v, t in zip(values, op.outputs)):
        return None, (f"returned {_short(values)}: expected {len(op.outputs)} layout "
                      "values (Stacked / Invariant / Ragged), one per output")
    for k, (value, original) in enumerate(zip(values, op.outputs)):
        if isinstance(value, Ragged) and value.dtype == original.dtype:
            # Ragged in a dimension the op's output has of a static size (a size a
            # nested pfor's body knows that its outer pfor sees vary): TensorFlow's
            # static shape is its promise about every iteration, so the value is
            # uniform there (Ragged.fitted).
            value = values[k] = value.fitted(original.shape)
        wrong = _value_problem(value, original, n_static)
        if wrong:
            kind = ("ragged" if isinstance(value, Ragged) else
                    "stacked" if value.is_stacked else "invariant")
            return None, f"returned a {kind} value {wrong} (output {k})"
    return values, ""


def _value_problem(value, original, n_static) -> str:
    if isinstance(value, Unranked):
        return "" if value.dtype == original.dtype else (
            f"of dtype {value.dtype.name} where the op's output is {original.dtype.name}")
    if isinstance(value, Ragged):
        return _ragged_problem(value, original)
    plain = type(value) in (Stacked, Invariant)  # views compute their tensor on demand
    if plain and not tf.is_tensor(value.tensor):
        return f"holding a {type(value.tensor).__name__}, not a tensor"
    if value.dtype != original.dtype:
        return f"of dtype {value.dtype.name} where the op's output is {original.dtype.name}"
    if value.is_stacked and original.dtype == tf.variant:
        return ""  # a stacked tensor list keeps a scalar handle (see layout.py)
    if plain and value.is_stacked and value.tensor.shape.rank == 0:
        return "of rank 0: it has no axis of iterations"
    if not value.shape.is_compatible_with(original.shape):
        return (f"of per-iteration shape {value.shape} where the op's output has shape "
                f"{original.shape}")
    if plain and value.is_stacked and n_static is not None:
        shape = value.tensor.shape
        rows = shape[0] if shape.rank else None
        if rows is not None and rows != n_static:
            return f"with {rows} rows for {n_static} iterations"
    return ""


def _ragged_problem(value, original) -> str:
    if value.dtype != original.dtype:
        return f"of dtype {value.dtype.name} where the op's output is {original.dtype.name}"
    if original.shape.rank is not None and value.rank != original.shape.rank:
        return f"of rank {value.rank} where the op's output has rank {original.shape.rank}"
    for d in value.ragged_axes:
        if original.shape.rank is not None and original.shape[d] is not None:
            return (f"ragged in dimension {d}, which the op's output has of static size "
                    f"{original.shape[d]} in every iteration")
    return ""


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
