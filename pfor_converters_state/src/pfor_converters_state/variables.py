"""Resource variables under SIMD semantics: the iterations run in lock-step.

- Handles (``VarHandleOp``), reads (``ReadVariableOp``) and ``VarIsInitializedOp`` (what
  Keras and v1 code check) are idempotent: emitted once,
  invariant. ``ResourceGather`` with stacked indices is one gather with all of them.
- Commutative updates (``AssignAdd/SubVariableOp``, ``ResourceScatterAdd/Sub``) are
  applied once with all iterations' updates: a stacked value is summed over the
  iteration axis (scatters fold that axis into their indices, so duplicates add up); an
  invariant value is applied ``n`` times' worth (``n * value``). The final state equals
  the sequential loop's.
- Other writes (``AssignVariableOp``, ``ResourceScatterUpdate``) of an invariant value
  run once (same final state as the loop); a stacked value has no lock-step meaning
  (the loop's last-writer-wins is not SIMD), so it is refused with a ConversionError.

Ordering differs from the sequential loop: a read that the body orders after an update
(auto control dependencies) runs after the one combined update, so in every iteration
it sees *all* iterations' updates, where the loop's iteration j would see only those of
iterations 0..j. Reads before the update see the value from before the loop.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import ConversionError, Decline, Invariant, shapes


def convert_var_handle(ctx):
    """A handle created in the body names the same variable in every iteration."""
    return Invariant(tensor=ctx.emit()[0])


def convert_read_variable(ctx):
    (handle,) = ctx.inputs
    if handle.is_stacked:
        return ctx.decline("a stacked resource handle (one variable per iteration)")
    return Invariant(tensor=ctx.emit(handle.tensor)[0])


def convert_var_is_initialized(ctx):
    """Whether the variable holds a value: the same for every iteration at any point."""
    return Invariant(tensor=ctx.emit(ctx.inputs[0].tensor)[0])


def convert_variable_shape(ctx):
    """A variable's shape is the same in every iteration (assigns keep it)."""
    return Invariant(tensor=ctx.emit(ctx.inputs[0].tensor)[0])


def convert_resource_gather(ctx):
    """Stacked indices [n, ...] with batch_dims=0: one gather gives [n, ..., rest]."""
    handle, indices = ctx.inputs
    if ctx.attr("batch_dims") != 0:
        raise Decline("batch_dims != 0 with stacked indices")
    return ctx.emit_stacked(handle.tensor, indices.tensor)


def convert_resource_gather_invariant(ctx):
    """Invariant indices: one gather, invariant (a read, like ReadVariableOp)."""
    handle, indices = ctx.inputs
    return Invariant(tensor=ctx.emit(handle.tensor, indices.tensor)[0])


def _times_n(ctx, value):
    """``value`` added n times: n * value (n cast to the value's dtype)."""
    return value * tf.cast(ctx.n, value.dtype)


def convert_assign_add(ctx):
    """AssignAdd/Sub of a stacked value: sum over iterations, apply once."""
    handle, value = ctx.inputs
    ctx.emit(handle.tensor, tf.reduce_sum(value.tensor, axis=0))
    return []


def convert_assign_add_invariant(ctx):
    """AssignAdd/Sub of an invariant value: applied once, n times the value."""
    handle, value = ctx.inputs
    ctx.emit(handle.tensor, _times_n(ctx, value.tensor))
    return []


def convert_scatter_add(ctx):
    """Scatter-add/sub: fold the iteration axis into indices and updates, one scatter.

    Per iteration, indices have shape I and updates I + rest; stacked, [n] + I and
    [n] + I + rest, which merge to [n*prod(I)] and [n*prod(I)] + rest.
    """
    handle, indices, updates = ctx.inputs
    index_rank, update_rank = indices.shape.rank, updates.shape.rank
    if index_rank is None or update_rank is None or update_rank < index_rank:
        raise Decline("updates of unknown rank or broadcast (scalar) updates")
    # Tiling an invariant side is unavoidable here: each iteration's pairs are distinct.
    flat_indices = shapes.merge_leading(ctx.stacked(1), index_rank + 1, ctx.n)
    flat_updates = shapes.merge_leading(ctx.stacked(2), index_rank + 1, ctx.n)
    ctx.emit(handle.tensor, flat_indices, flat_updates)
    return []


def convert_scatter_add_invariant(ctx):
    """Invariant indices and updates: one scatter of n times the updates."""
    handle, indices, updates = ctx.inputs
    ctx.emit(handle.tensor, indices.tensor, _times_n(ctx, updates.tensor))
    return []


def convert_overwrite(ctx):
    """Assign / scatter-update: an invariant value is written once (same final state
    as the loop); a stacked one has no SIMD meaning and is refused."""
    if any(v.is_stacked for v in ctx.inputs[1:]):
        raise ConversionError(
            f"pfor: {ctx.op_type} '{ctx.op.name}' writes a value that differs between "
            "iterations. pfor runs the iterations in lock-step (SIMD), so there is no "
            "'last iteration wins' order to reproduce. Return the values from the loop "
            "body and assign after pfor (e.g. var.assign(result[-1])), or accumulate "
            "with assign_add / scatter_add, which pfor vectorizes. For a Keras layer "
            "in training mode (e.g. BatchNormalization's moving statistics), call "
            "layer.stateless_call(trainable, non_trainable, x, training=True) in the "
            "body and assign the statistics it returns after pfor.")
    ctx.emit(*(v.tensor for v in ctx.inputs))
    return []


def register(registry):
    """Add this family's converters to the pack's registrar. Every pattern starts with
    U: a stacked handle (one variable per iteration) is left to the fallback."""
    registry.add("VarHandleOp", convert_var_handle, inputs="")
    registry.add("ReadVariableOp", convert_read_variable, inputs="U")
    registry.add("VariableShape", convert_variable_shape, inputs="U")
    registry.add("VarIsInitializedOp", convert_var_is_initialized, inputs="U")
    registry.add("ResourceGather", convert_resource_gather, inputs="US")
    registry.add("ResourceGather", convert_resource_gather_invariant, inputs="UU")
    adds = ["AssignAddVariableOp", "AssignSubVariableOp"]
    registry.add(adds, convert_assign_add, inputs="US")
    registry.add(adds, convert_assign_add_invariant, inputs="UU")
    scatters = ["ResourceScatterAdd", "ResourceScatterSub"]
    registry.add(scatters, convert_scatter_add, inputs="US*")
    registry.add(scatters, convert_scatter_add, inputs="UUS")
    registry.add(scatters, convert_scatter_add_invariant, inputs="UUU")
    registry.add("AssignVariableOp", convert_overwrite, inputs="U*")
    registry.add("ResourceScatterUpdate", convert_overwrite, inputs="U**")
