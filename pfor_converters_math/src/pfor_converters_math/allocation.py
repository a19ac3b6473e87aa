"""Empty (``inplace_ops.empty``, e.g. the output buffers of the scans ``tf.nn.ctc_loss``
builds): TensorFlow marks it stateful, so the walk shows it to us even when its shape is
loop-invariant. A fresh buffer of an invariant shape is the same in every iteration (its
contents are zeros, or undefined until written), so it is created once, invariant.
A per-iteration shape gives buffers of different shapes: the fallback loop makes those.
"""

from __future__ import annotations

from pfor_core.extend import Invariant


def convert_empty(ctx):
    return Invariant(tensor=ctx.emit(ctx.inputs[0].tensor)[0])


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("Empty", convert_empty, inputs="U")
