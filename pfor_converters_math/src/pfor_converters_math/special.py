"""Special functions: Bessel functions, Dawson's integral, exponential integral,
Fresnel integrals, Spence's function, and the derivative of the incomplete gamma
function in ``a``.

All are elementwise, so nothing here is new: the unary ones run as they are on the
stacked tensor (``extend.elementwise``) and IgammaGradA, whose kernel broadcasts like
Igamma's, lines up a lower-rank stacked operand with size-1 axes and leaves an
invariant one untiled (``extend.broadcasting``). BesselI0e and BesselI1e are older
and live with the elementwise family. The example third-party pack
(examples/pfor_converters_example) overrides the Dawsn converter here with a higher
priority, to show how a pack takes an op over from a first-party one.
"""

from __future__ import annotations

from pfor_core.extend import broadcasting, elementwise

UNARY = (
    "BesselI0", "BesselI1", "BesselJ0", "BesselJ1", "BesselK0", "BesselK0e", "BesselK1",
    "BesselK1e", "BesselY0", "BesselY1", "Dawsn", "Expint", "FresnelCos", "FresnelSin", "Spence",
)

BINARY = ("IgammaGradA",)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(UNARY, elementwise, inputs="S")
    registry.add(BINARY, broadcasting, inputs="**")
