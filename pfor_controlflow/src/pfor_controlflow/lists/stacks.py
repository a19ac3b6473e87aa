"""Stacks of the first kind (StackV2, StackPushV2, StackPopV2, StackCloseV2), which v1
control flow's gradients use to keep forward values for the backward pass.

A stack the loop body creates (each iteration has its own) becomes one stack for all
iterations, pushed and popped in lock-step: every pushed element carries the iteration
axis (an invariant one is tiled), so every pop gives all iterations' values, stacked.
The emitted StackV2 is marked like the body's TensorArrays (tensor_arrays.py); a pop
checks that it got one row per iteration of its conversion, so a push or pop in a loop
or branch that only some iterations take fails instead of mixing rows.

A stack created outside the loop is one stack that the iterations push to and pop from
one after the other: those ops run in the fallback loop, in the loop's order.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Invariant, Stacked
from pfor_controlflow.lists.tensor_arrays import elements_stacked, mark


def convert_stack(ctx):
    """One stack; a per-iteration bound on its size becomes the largest (only a push
    past an iteration's own bound, an error in the loop, then goes through)."""
    (max_size,) = ctx.inputs
    bound = tf.reduce_max(max_size.tensor) if max_size.is_stacked else max_size.tensor
    (handle,) = ctx.emit(bound)
    mark(handle.op)
    return [Invariant(tensor=handle)]


def convert_push(ctx):
    handle, elem = ctx.inputs
    if not elements_stacked(ctx):
        return ctx.decline("a stack created outside the loop: pushed in the loop's order")
    (out,) = ctx.emit(handle.tensor, ctx.stack(elem))
    if elem.is_stacked:
        return [Stacked(tensor=out)]
    with tf.control_dependencies([out.op]):  # push returns its element: the invariant one
        return [Invariant(tensor=tf.identity(elem.tensor))]


def convert_pop(ctx):
    (handle,) = ctx.inputs
    if not elements_stacked(ctx):
        return ctx.decline("a stack created outside the loop: popped in the loop's order")
    (out,) = ctx.emit(handle.tensor)
    rows = tf.shape(out)[0]
    out = ctx.check(tf.equal(rows, ctx.n), "a stack created for all iterations of the "
                    "loop is pushed or popped in a loop or branch that only some "
                    "iterations take: not supported", tensor=out)
    return [Stacked(tensor=out)]


def convert_close(ctx):
    """StackCloseV2 / TensorArrayCloseV3: one shared stack or array, closed once."""
    if not elements_stacked(ctx):
        return ctx.decline("created outside the loop: closed by each iteration in turn")
    ctx.emit(*(v.tensor for v in ctx.inputs))
    return []
