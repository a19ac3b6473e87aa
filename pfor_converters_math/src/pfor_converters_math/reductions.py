"""Reduction and scan converters: Sum/Mean/Prod/Max/Min/All/Any/EuclideanNorm, ArgMax/
ArgMin, Cumsum/Cumprod/CumulativeLogsumexp.

A stacked input has the iteration axis in front, so the same op runs on it with every
axis moved one to the right (negative axes normalized first, since -1 of the stacked
tensor is still the last axis but a normalized axis must skip the stacked one). Axes
must be loop-invariant: static axes are shifted in Python, run-time ones with one
FloorMod and one add. A stacked axis would reduce different axes per iteration and is
declined (the fallback loop takes it).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

REDUCTIONS = ("Sum", "Mean", "Prod", "Max", "Min", "All", "Any", "EuclideanNorm")
ARG_REDUCTIONS = ("ArgMax", "ArgMin")
SCANS = ("Cumsum", "Cumprod", "CumulativeLogsumexp")


def _shifted_axes(axes, rank: int):
    """``axes`` (invariant) as axes of the stacked tensor, or a reason to decline."""
    static = tf.get_static_value(axes.tensor)
    if static is not None:
        static = np.asarray(static)
        if static.size and not (np.all(static >= -rank) and np.all(static < rank)):
            return None, f"axis {static.tolist()} out of range for rank {rank}"
        return tf.constant(static % max(rank, 1) + 1, dtype=axes.dtype), ""
    if rank == 0:
        return None, "run-time axis for a rank-0 input"
    return tf.math.floormod(axes.tensor, rank) + 1, ""


def convert_along_axes(ctx):
    """Ops of form (input, axes) -> output: the same op on the stacked input with
    shifted axes; other attrs (keep_dims, output_type, exclusive, reverse) are kept."""
    x, axes = ctx.inputs
    if x.shape.rank is None:
        return ctx.decline("the input's rank is unknown")
    shifted, reason = _shifted_axes(axes, x.shape.rank)
    if shifted is None:
        return ctx.decline(reason)
    return ctx.emit_stacked(x.tensor, shifted)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    # A stacked axis would reduce different axes per iteration: no converter, the
    # fallback loop takes it.
    registry.add(REDUCTIONS + ARG_REDUCTIONS + SCANS, convert_along_axes, inputs="SU")
