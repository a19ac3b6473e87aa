"""Activations and their gradient ops.

Activations act on each element alone, so the stacked tensor goes through the same op.
Softmax and LogSoftmax normalize over the last axis, which stays the last axis once the
iteration axis is put in front, so they too run on the stacked tensor as it is.

The gradient ops (ReluGrad(gradients, features), EluGrad(gradients, outputs), ...)
are elementwise too, but their kernels need both inputs of one shape and do not
broadcast: with both stacked they run as they are; an invariant operand is broadcast to
the stacked shape first (the kernel leaves no cheaper choice).

Ragged values (pattern letter R): an activation runs on the padded tensor, whose
padding is then zeroed again by a select (a gradient never crosses it), except after
those that map zero to zero (Relu, Elu, ...). Softmax and
LogSoftmax normalize over the last axis: when that axis varies per iteration the
padding is set to -inf first, so it gets probability 0 and the valid entries normalize
among themselves; a row with no valid entry (an empty iteration, or padding in another
dimension) comes out NaN and is masked like all padding.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from pfor_core.extend import Stacked, padded_operands
from pfor_converters_nn.unfolded import before_unfold

ACTIVATIONS = ["Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Softplus", "Softsign"]

# Normalize over the last axis; the kernels require per-iteration rank >= 1, so the
# iteration axis never becomes the normalized one.
LAST_AXIS = ["Softmax", "LogSoftmax"]

GRADIENTS = ["ReluGrad", "Relu6Grad", "EluGrad", "SeluGrad", "LeakyReluGrad",
             "SoftplusGrad", "SoftsignGrad"]


def convert_activation(ctx):
    """Elementwise: the stacked tensor through the same op (before an unfolding
    reshape, so that grappler can fuse it with the folded op: see unfolded.py)."""
    return Stacked(tensor=before_unfold(ctx.inputs[0].tensor, lambda t: ctx.emit(t)[0]))


def convert_last_axis(ctx):
    """Softmax-like ops: the last axis of each iteration is the stacked tensor's last."""
    if ctx.inputs[0].shape.rank == 0:
        return ctx.decline("a scalar has no axis to normalize")
    return ctx.emit_stacked(ctx.inputs[0].tensor)


def convert_equal_shapes(ctx):
    """Binary gradient ops of equal-shape operands: tile an invariant one (the kernel
    does not broadcast)."""
    tensors = [ctx.stacked(k) for k in range(len(ctx.inputs))]
    return ctx.emit_stacked(*tensors)


# f(0) == 0: zero padding stays zero without a mask (element by element, so a
# gradient reaching the padding goes to the input's padding only).
_ZERO_PRESERVING = frozenset({"Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Softsign"})


def convert_activation_ragged(ctx):
    """A ragged value: the op on the padded tensor, the padding zeroed after (unless
    the op keeps zero at zero)."""
    x = ctx.inputs[0]
    return padded_operands.result(ctx.emit(x.padded)[0], x.lengths,
                                  masked=ctx.op_type not in _ZERO_PRESERVING)


def convert_last_axis_ragged(ctx):
    """Softmax/LogSoftmax of a ragged value: the padding of a varying last axis gets
    -inf first."""
    x = ctx.inputs[0]
    padded = x.padded
    if x.lengths[-1] is not None:
        lowest = tf.constant(-np.inf, x.dtype)
        padded = tf.where(x.mask([x.rank - 1]), padded, lowest)
    return padded_operands.result(ctx.emit(padded)[0], x.lengths)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    for ops, fn, inputs in [
        (ACTIVATIONS, convert_activation, "S"),
        (LAST_AXIS, convert_last_axis, "S"),
        (GRADIENTS, convert_equal_shapes, "**"),
        (ACTIVATIONS, convert_activation_ragged, "R"),
        (LAST_AXIS, convert_last_axis_ragged, "R"),
    ]:
        registry.add(ops, fn, inputs=inputs)
