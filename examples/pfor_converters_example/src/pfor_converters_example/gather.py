"""The first version of gather (``tf.raw_ops.Gather(params, indices)``: rows of params).

One converter per input pattern, each with its own code path, so ``pfor ops --patterns``
can tell which inputs are vectorized without running anything:

- ``US`` (invariant params, stacked indices): gathering with ``[n, ...]`` indices is
  already every iteration's gather, stacked: the op is re-emitted as it is.
- ``SU`` (stacked params, invariant indices): rows of each iteration's params are axis 1
  of the stacked params: one ``GatherV2`` on axis 1.
- ``SS`` (both stacked): iteration j gathers from its own params: a batched gather.

The walk re-emits the op itself when both inputs are invariant, so no converter sees
``UU``. The math pack converts ``Gather`` too; like ``Dawsn`` (special.py), this pack's
converters are registered with a higher priority, so they are the ones tried first.
"""

import tensorflow as tf

from pfor_core.extend import Decline, Stacked

from pfor_converters_example.special import PRIORITY


def convert_gather_invariant_params(ctx):
    params, indices = ctx.inputs
    return ctx.emit_stacked(params.tensor, indices.tensor)


def _checked(ctx):
    """The stacked params, or decline (raise) if their rank is unknown."""
    params = ctx.inputs[0]
    if params.shape.rank is None:
        raise Decline("params of unknown rank")
    return params.tensor


def convert_gather_stacked_params(ctx):
    return Stacked(tensor=tf.gather(_checked(ctx), ctx.inputs[1].tensor, axis=1))


def convert_gather_stacked_both(ctx):
    return Stacked(tensor=tf.gather(_checked(ctx), ctx.inputs[1].tensor, axis=1,
                                    batch_dims=1))


def register(registry):
    """Add this family's converters to the pack's registrar: one per input pattern."""
    registry.add("Gather", convert_gather_invariant_params, inputs="US", priority=PRIORITY)
    registry.add("Gather", convert_gather_stacked_params, inputs="SU", priority=PRIORITY)
    registry.add("Gather", convert_gather_stacked_both, inputs="SS", priority=PRIORITY)
