"""Texts of the errors and warnings about ops that were not vectorized."""

from __future__ import annotations

import os

from pfor_core.errors import FALLBACK_PREFIX, FallbackWarning  # noqa: F401  (re-export)

_LIBRARY_DIRS = tuple(os.sep + d + os.sep for d in (
    "tensorflow", "keras", "pfor_core", "pfor_converters_math", "pfor_converters_nn",
    "pfor_converters_state", "pfor_controlflow", "site-packages", "dist-packages"))


def source_line(op) -> str:
    """The user's source line that created ``op`` (TensorFlow records a traceback)."""
    try:
        frames = op.traceback
    except Exception:  # pylint: disable=broad-except
        return ""
    user = [f for f in frames if not any(d in f.filename for d in _LIBRARY_DIRS)]
    if not user:
        return ""
    frame = user[-1]
    return f"{frame.filename}:{frame.lineno}"


def describe_inputs(layouts) -> str:
    parts = []
    for k, v in enumerate(layouts):
        kind = "stacked" if v.is_stacked else "invariant"
        parts.append(f"#{k} {kind} {v.dtype.name}{v.shape}")
    return ", ".join(parts) if parts else "no inputs"


def _where(op) -> str:
    line = source_line(op)
    return f" (created at {line})" if line else ""


def conversion_error(op, layouts, reasons) -> str:
    why = f" Converters declined: {'; '.join(reasons)}." if reasons else (
        " No installed pack has a converter for this op type.")
    return (
        f"pfor cannot vectorize op {op.type} '{op.name}'{_where(op)} with inputs "
        f"[{describe_inputs(layouts)}].{why} To go on: install a converter pack that "
        f"handles {op.type} (`pfor ops --missing` lists gaps), register one with "
        f"@pf.register_converter({op.type!r}), or pass fallback='loop' or 'warn' to run "
        "this op in a sequential loop.")


def fallback_warning(op, layouts, reasons) -> str:
    why = f" ({'; '.join(reasons)})" if reasons else " (no converter registered)"
    return (
        f"{FALLBACK_PREFIX} {op.type} '{op.name}'{_where(op)} runs in a sequential loop "
        f"over the iterations{why}; inputs [{describe_inputs(layouts)}]. Register a "
        f"converter with @pf.register_converter({op.type!r}) to vectorize it, or pass "
        "fallback='loop' to silence this warning.")
