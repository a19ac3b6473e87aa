"""Range (``tf.range``) with per-iteration bounds: a ragged value (each iteration's
length is ``ceil((limit - start) / delta)``, at least 0).

The padded rows are ``start + k * delta`` for ``k < W`` (``W`` the largest length),
masked past each iteration's length. Under XLA no static bound on the lengths exists:
the converter declines and the fallback, unrolled, compiles where the loop does.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Ragged


def _lengths(start, limit, delta, dtype):
    if dtype.is_integer:
        # ceil(a / b) for integers of either sign, as the kernel computes it.
        span = limit - start
        size = tf.where(tf.equal(span % delta, 0), span // delta, span // delta + 1)
    else:
        size = tf.math.ceil((limit - start) / delta)
    return tf.maximum(tf.cast(size, tf.int32), 0)


def convert_range_ragged(ctx):
    """Range with any stacked argument."""
    if ctx.compiled:
        return ctx.decline("the lengths have no static bound under XLA")
    dtype = ctx.output_dtypes[0]
    start, limit, delta = (tf.cast(ctx.stack(v), dtype) for v in ctx.inputs)
    checks = tf.reduce_all(tf.not_equal(delta, 0)) & tf.reduce_all(
        tf.where(delta > 0, start <= limit, start >= limit) | tf.equal(start, limit))
    lengths = _lengths(start, limit, delta, dtype)
    lengths = ctx.check(checks, "requires delta != 0 and start on the side of limit "
                        "that delta steps towards (as tf.range)", tensor=lengths)
    width = tf.maximum(tf.reduce_max(lengths), 0)
    steps = tf.cast(tf.range(width), dtype)
    padded = start[:, None] + steps[None, :] * delta[:, None]
    return Ragged.from_stacked(padded, [lengths])


def register(registry):
    """Add this family's converters to the pack's registrar."""
    for pattern in ("S**", "US*", "UUS"):
        registry.add("Range", convert_range_ragged, inputs=pattern)
