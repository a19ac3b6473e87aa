"""The eager values behind a traced function's inputs, for choices made while converting.

A ``tf.function`` traced for an eager call (``pf.vmap``, ``pf.vectorize_loops``) sees
its arguments as placeholders; the call's values are at hand all the same. While the
trace runs (``tracing``), a choice that reads values (a per-example while loop's trip
counts: masked or compacted) may fold them (``value_of``): the traced function keeps
that choice for its input signature, as it keeps its shapes. Values captured from the
eager context are found through the captures of the function graphs around a tensor.
"""

from __future__ import annotations

import contextlib
import threading

from tensorflow.python.framework import ops

_LOCAL = threading.local()


@contextlib.contextmanager
def tracing(pairs):
    """While a function is traced for an eager call: ``pairs`` of (its input
    placeholder, the call's eager value)."""
    stack = _stack()
    stack.append({id(inner): value for inner, value in pairs
                  if isinstance(value, ops.EagerTensor)})
    try:
        yield
    finally:
        stack.pop()


def active() -> bool:
    """Whether a trace for an eager call is running (``tracing``)."""
    return bool(_stack())


def value_of(tensor, calls: bool = True):
    """The eager value a placeholder stands for (what the function graphs around it
    captured, or with ``calls`` an eager call's argument being traced), else None."""
    while not isinstance(tensor, ops.EagerTensor):
        if calls:
            for values in reversed(_stack()):
                if id(tensor) in values:
                    return values[id(tensor)]
        outer = {id(inner): v for v, inner in getattr(tensor.graph, "captures", ())}
        if tensor.op.type != "Placeholder" or id(tensor) not in outer:
            return None
        tensor = outer[id(tensor)]
    return tensor


def _stack() -> list:
    if not hasattr(_LOCAL, "stack"):
        _LOCAL.stack = []
    return _LOCAL.stack
