"""Run-time checks that pass their input through: EnsureShape, CheckNumerics(V2).

- EnsureShape of a stacked value checks the stacked tensor against the per-iteration
  shape with the iteration axis in front (``n`` where static, else unknown): it fails
  exactly when some iteration's value has the wrong shape.
- CheckNumerics runs once, on the stacked tensor, with the body's message: it fails if
  any iteration's value holds a NaN or Inf, which is when the loop would fail. The op
  is stateful, so it also comes here with an invariant input; the loop checks that
  value only if it runs at all, so with no iterations nothing is checked (with ``n``
  known only at run time, the check sees ``min(n, 1)`` copies of the value).
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Invariant


def convert_ensure_shape(ctx):
    shape = ctx.stacked_shape(tf.TensorShape(ctx.attr("shape")))
    return ctx.emit_stacked(ctx.inputs[0].tensor, attrs={"shape": shape})


def convert_check_numerics(ctx):
    """A stacked value: one check of the stacked tensor."""
    return ctx.emit_stacked(ctx.inputs[0].tensor)


def convert_check_numerics_invariant(ctx):
    """An invariant value (the op is stateful, so it comes here): checked once if the
    loop runs at all."""
    (x,) = ctx.inputs
    if ctx.n_static is not None:
        return Invariant(tensor=ctx.emit(x.tensor)[0] if ctx.n_static else x.tensor)
    # n known at run time only: check a [min(n, 1), ...] view (nothing when n == 0) and
    # order the value after that check.
    rows = tf.expand_dims(x.tensor, 0)[:tf.minimum(ctx.n, 1)]
    checked = ctx.emit(rows)[0]
    with tf.control_dependencies([checked.op]):
        return Invariant(tensor=tf.identity(x.tensor))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("EnsureShape", convert_ensure_shape, inputs="S")
    registry.add(["CheckNumerics", "CheckNumericsV2"], convert_check_numerics, inputs="S")
    registry.add(["CheckNumerics", "CheckNumericsV2"], convert_check_numerics_invariant,
                 inputs="U")
