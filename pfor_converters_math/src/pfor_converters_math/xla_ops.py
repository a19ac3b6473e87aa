"""XLA's own ops that bodies written for TPUs and for XLA meet: XlaEinsum and XlaSharding.

- ``XlaEinsum`` (two operands, an explicit ``->``): the iteration axis becomes one more
  label, a letter the equation does not use, in front of each stacked operand's and the
  output's labels; invariant operands keep theirs, so nothing is tiled.
- ``XlaSharding`` annotates a value with how XLA should split it over devices; the value
  itself passes through. A tiled sharding lists one tile count per dimension, so the
  stacked value's sharding gets a count of 1 for the iteration axis (the iterations are
  not split); replicated, maximal and manual shardings name no dimension and stay as
  they are. Dimensions listed as unspecified shift by one.
"""

from __future__ import annotations

import string

from tensorflow.compiler.tf2xla.ops import gen_xla_ops
from tensorflow.compiler.xla import xla_data_pb2
from tensorflow.core.framework import attr_value_pb2

from pfor_core.extend import Stacked

_SHARDING_ATTR = "_XlaSharding"  # the op-level copy TensorFlow's sharding helpers set


def convert_xla_einsum(ctx):
    a, b = ctx.inputs
    equation = ctx.attr("equation").decode()
    if "->" not in equation or equation.count(",") != 1:
        return ctx.decline("an equation without an explicit output ('->')")
    free = [c for c in string.ascii_letters if c not in equation]
    if not free:
        return ctx.decline("the equation uses every letter: none left for the iterations")
    lhs, out = equation.replace(" ", "").split("->")
    specs = lhs.split(",")
    batched = [free[0] + spec if v.is_stacked else spec for spec, v in zip(specs, ctx.inputs)]
    equation = f"{','.join(batched)}->{free[0]}{out}"
    return ctx.emit_stacked(a.tensor, b.tensor, attrs={"equation": equation})


def _with_iteration_axis(proto) -> None:
    """Give a sharding (in place) a first dimension that is not split."""
    if proto.type == xla_data_pb2.OpSharding.OTHER:  # tiled: counts per dimension
        counts = list(proto.tile_assignment_dimensions)
        del proto.tile_assignment_dimensions[:]
        proto.tile_assignment_dimensions.extend([1] + counts)


def _shifted(serialized: bytes) -> bytes:
    if not serialized:
        return serialized
    proto = xla_data_pb2.OpSharding.FromString(serialized)
    _with_iteration_axis(proto)
    return proto.SerializeToString()


def convert_xla_sharding(ctx):
    (x,) = ctx.inputs
    unspecified = [d + 1 for d in ctx.attr("unspecified_dims")]
    out = gen_xla_ops.xla_sharding(x.tensor, sharding=_shifted(ctx.attr("sharding")),
                                   unspecified_dims=unspecified)
    if ctx.has_attr(_SHARDING_ATTR):
        out.op._set_attr(_SHARDING_ATTR, attr_value_pb2.AttrValue(  # pylint: disable=protected-access
            s=_shifted(ctx.attr(_SHARDING_ATTR))))
    return Stacked(tensor=out)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("XlaEinsum", convert_xla_einsum, inputs="**")
    registry.add("XlaSharding", convert_xla_sharding, inputs="S")
