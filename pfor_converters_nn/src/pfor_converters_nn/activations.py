"""Activations and their gradient ops.

Activations act on each element alone, so the stacked tensor goes through the same op.
Softmax and LogSoftmax normalize over the last axis, which stays the last axis once the
iteration axis is put in front, so they too run on the stacked tensor as it is.

The gradient ops (ReluGrad(gradients, features), EluGrad(gradients, outputs), ...)
are elementwise too, but their kernels need both inputs of one shape and do not
broadcast: with both stacked they run as they are; an invariant operand is broadcast to
the stacked shape first (the kernel leaves no cheaper choice).
"""

from __future__ import annotations

from pfor_core.extend import Stacked
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


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add(ACTIVATIONS, convert_activation, inputs="S")
    registry.add(LAST_AXIS, convert_last_axis, inputs="S")
    registry.add(GRADIENTS, convert_equal_shapes, inputs="**")
