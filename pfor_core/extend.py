"""The converter API: everything a converter pack may use from the core.

A pack imports from the core only ``pfor_core`` (the user API), this module and
``pfor_core.testing``; an import-linter contract in pyproject.toml keeps it so for the
project's own packs. docs/extending.rst documents every name below.

- Layout values: ``Invariant``, ``Stacked``, ``View`` (a per-iteration value kept
  in another form, with ``materialize()``) and ``Ragged`` (a per-iteration value whose
  shape differs between iterations: padded, with per-iteration sizes; pattern letter
  ``R``), with ``ragged_from_flat`` (a ``tf.RaggedTensor`` from rows' elements and
  shapes) and ``usually_uniform`` (marks lengths equal in all but edge cases).
- The converter's one argument, ``ConvertContext`` (``ctx``), with ``Converted`` (what
  ``ctx.convert_function`` returns), and ``Decline``, the one way to decline.
- ``shapes``: shape helpers that stay static where shapes are known.
- Registration patterns, converters for whole families of ops: ``elementwise``,
  ``broadcasting``, ``batch_polymorphic``; and the pattern helpers ``fold_into_batch``
  / ``unfold_from_batch`` (the stacked axis folded into a kernel's batch axis and back).
- ``padded_operands``: the same for ragged (padded) operands: ``broadcast`` (operands
  lined up for numpy broadcasting, per-iteration sizes checked), ``sized`` (a value of sizes
  unknown statically as a ragged one), ``result`` (a converter's ragged result, its
  padding zeroed), ``per_iteration_rank`` and ``padded_dims``.
- ``thin_products``: sums of thin matrix products contracted once (``thin``,
  ``matmul_sizes``, ``summed``), for weight gradients over many steps.
- ``PackRegistrar`` (what the ``pfor_register_converters`` hook receives),
  ``op_types_of`` (the op types a registration function adds), the hook marker
  ``hookimpl`` and ``ConversionError`` (raise it when the body itself is wrong).

>>> import tensorflow as tf
>>> import pfor_core as pf
>>> from pfor_core import extend
>>> @pf.register_converter("Sinh", inputs="S", priority=10)
... def convert_sinh(ctx):
...     return ctx.emit_stacked(ctx.inputs[0].tensor)
>>> pf.pfor(lambda i: tf.sinh(tf.cast(i, tf.float32)), 2, fallback="error").numpy().round(3)
array([0.   , 1.175], dtype=float32)
>>> pf.default_registry().remove("Sinh", convert_sinh)
"""

from pfor_core import padded_operands, shapes, thin_products
from pfor_core.context import ConvertContext, Converted
from pfor_core.emit import find_function
from pfor_core.errors import ConversionError, Decline
from pfor_core.hookspecs import hookimpl
from pfor_core.layout import Invariant, Stacked, View
from pfor_core.loop_analysis import TripBound, trip_bounds
from pfor_core.patterns import (batch_polymorphic, broadcasting, elementwise, fold_into_batch,
                                unfold_from_batch)
from pfor_core.ragged import NotStacked, Ragged, usually_uniform
from pfor_core.ragged import from_flat as ragged_from_flat
from pfor_core.registry import PackRegistrar, op_types_of

__all__ = [
    "ConversionError", "ConvertContext", "Converted", "Decline", "Invariant", "NotStacked",
    "PackRegistrar", "Ragged", "Stacked", "TripBound", "View", "batch_polymorphic", "broadcasting",
    "elementwise", "find_function", "fold_into_batch", "hookimpl", "op_types_of",
    "padded_operands", "ragged_from_flat", "shapes", "thin_products", "trip_bounds",
    "unfold_from_batch",
    "usually_uniform",
]
