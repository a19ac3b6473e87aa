"""Dawson's integral (``tf.math.special.dawsn``, op type ``Dawsn``), taken over from the
first-party math pack by priority.

The math pack already converts ``Dawsn`` (with the stock ``elementwise`` pattern, at the
default priority 0). A pack that has its own way to compute an op (a faster kernel, a
custom op, a different precision trade-off) registers its converter for the same op type
and pattern with a higher ``priority``: dispatch then tries it first, ``pfor ops`` names
it as the winner and lists the math pack's converter as shadowed, and ``pf.explain``
shows it converting the op. If it declines, the math pack's converter is the backup.

Here the converter computes what the loop computes, on the whole stacked input at once
(the op acts on each element alone); a real override would do something better there.
"""

from pfor_core.extend import Stacked

# Above the first-party packs' default of 0: this pack's converter is tried first.
PRIORITY = 10


def convert_dawsn(ctx):
    """One ``Dawsn`` on the stacked input ``[n, ...]``: every iteration's values."""
    (x,) = ctx.inputs
    (y,) = ctx.emit(x.tensor)
    return [Stacked(tensor=y)]


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("Dawsn", convert_dawsn, inputs="S", priority=PRIORITY)
