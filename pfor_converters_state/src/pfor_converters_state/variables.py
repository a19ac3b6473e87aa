"""Variable reads: an idempotent read of an invariant handle runs once, invariant.

Every iteration of the loop would read the same value (the body writes nothing before
it, or the write's control dependencies order it), so one read serves them all.
"""

from __future__ import annotations

from pfor_core import Invariant


def convert_read_variable(ctx):
    (handle,) = ctx.inputs
    if handle.is_stacked:
        return ctx.decline("a stacked resource handle (one variable per iteration)")
    return Invariant(tensor=ctx.emit(handle.tensor)[0])


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("ReadVariableOp", convert_read_variable, inputs="U")
