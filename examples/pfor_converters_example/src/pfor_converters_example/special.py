"""Dawson's integral (``tf.math.special.dawsn``, op type ``Dawsn``).

The op acts on each element alone, so on the stacked input ``[n, ...]`` it already is
the vectorized op: the stock ``elementwise`` pattern re-emits it once on the whole
batch. One line, registered for the one input pattern it handles: stacked (``"S"``).
"""

from pfor_core.extend import elementwise


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("Dawsn", elementwise, inputs="S")
