"""While loops: While and StatelessWhile (what tf.while_loop emits).

Which loop variables are stacked is found first: trial conversions of the body, each
starting from the layouts the previous one produced, until no variable changes (a
variable is stacked if its initial value or any body output for it is). Variables the
body passes through unchanged are not carried at all: the converted body reads them
from outside the loop.

Then the condition decides the strategy:
- invariant: every iteration runs the same number of steps, so one ``tf.while_loop``
  runs the converted body on all iterations;
- stacked (trip counts differ per iteration), "active subset": each step gathers the
  rows of the still-active iterations, runs the body and the condition for those rows
  only and scatters the results back, until no iteration is active;
- stacked under XLA (``jit_compile=True``) or inside an outer pfor's body, "masked":
  each step runs the body on all rows and keeps the old value of finished rows. XLA
  needs the static shapes that masking keeps, and an outer pfor could not vectorize
  the data-dependent shapes of the active subset. Elsewhere masking is not the
  default: the body would also run on finished rows, whose values (e.g. an index one
  past the end of a sequence) may make an op fail on the CPU, and it wastes the work
  the active subset saves.

Under a stacked condition an invariant variable can still end differently per
iteration (e.g. the step counter): its value when each iteration finishes is kept in
a stacked copy, which becomes the loop's output.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.ops import array_ops

from pfor_core import Invariant, Stacked
from pfor_controlflow.conditionals import truth
from pfor_controlflow.functions import function_graph, scratch_graph, with_effects


class _Loop:
    """What the converter knows about one While op."""

    def __init__(self, ctx, cond, body):
        self.ctx, self.cond, self.body = ctx, cond, body
        self.inputs = list(ctx.inputs)
        self.passed = [_passes_through(body, k) for k in range(len(self.inputs))]
        self.carried = [k for k, p in enumerate(self.passed) if not p]
        self.stacked = [v.is_stacked for v in self.inputs]

    def layouts(self, carried_values, stacked=None, outside=None):
        """Layouts of all loop variables: carried ones from ``carried_values``,
        passed-through ones from ``outside`` (default: the loop's inputs)."""
        stacked = self.stacked if stacked is None else stacked
        outside = self.inputs if outside is None else outside
        values = list(outside)
        for k, value in zip(self.carried, carried_values):
            values[k] = Stacked(tensor=value) if stacked[k] else Invariant(tensor=value)
        return values

    def shape_of(self, k, stacked=None) -> tf.TensorShape:
        """Shape invariant of carried variable ``k``, stacked or not."""
        stacked = self.stacked if stacked is None else stacked
        shape = self.body.inputs[k].shape
        if not stacked[k] or self.body.inputs[k].dtype == tf.variant:
            return shape
        return tf.TensorShape([self.ctx.n_static]).concatenate(shape)


def _passes_through(body, k) -> bool:
    out = body.outputs[k]
    while out.op.type == "Identity" and out is not body.inputs[k]:
        out = out.op.inputs[0]
    return out is body.inputs[k]


def _stack_value(ctx, value) -> tf.Tensor:
    if value.dtype == tf.variant:
        from pfor_controlflow import tensor_lists  # pylint: disable=import-outside-toplevel
        return tensor_lists.stack_list(ctx, value)
    return ctx.stack(value)


def _find_stacked(loop) -> list[bool]:
    """Convert the body on trial until the stacked variables no longer change."""
    ctx, body = loop.ctx, loop.body
    stacked = list(loop.stacked)
    for _ in range(len(stacked) + 1):
        with scratch_graph().as_default():
            values = [array_ops.placeholder(body.inputs[k].dtype, loop.shape_of(k, stacked))
                      for k in loop.carried]
            trial = ctx.convert_function(body, loop.layouts(values, stacked), trial=True)
        grown = [s or v.is_stacked for s, v in zip(stacked, trial.outputs)]
        if grown == stacked:
            return stacked
        stacked = grown
    raise AssertionError("the loop-variable layouts did not settle")  # pragma: no cover


def _cond_is_stacked(loop) -> bool:
    with scratch_graph().as_default():
        values = [array_ops.placeholder(loop.body.inputs[k].dtype, loop.shape_of(k))
                  for k in loop.carried]
        trial = loop.ctx.convert_function(loop.cond, loop.layouts(values), trial=True)
    return trial.outputs[0].is_stacked


def _carried_out(loop, converted, k):
    """The body's output for carried variable ``k`` in its loop layout."""
    value = converted.outputs[k]
    if loop.stacked[k]:
        return converted.stacked(k)
    if value.is_stacked:  # the trial said otherwise: a converter is inconsistent
        raise RuntimeError(f"loop variable {k} became per-iteration in the real conversion")
    return value.tensor


def _run_invariant(loop, parallel):
    ctx = loop.ctx

    def cond(*values):
        converted = ctx.convert_function(loop.cond, loop.layouts(values))
        return truth(with_effects([converted.outputs[0].tensor], converted.side_effects)[0])

    def body(*values):
        converted = ctx.convert_function(loop.body, loop.layouts(values))
        outs = [_carried_out(loop, converted, k) for k in loop.carried]
        return with_effects(outs, converted.side_effects)[:-1]

    init = [_stack_value(ctx, loop.inputs[k]) if loop.stacked[k] else loop.inputs[k].tensor
            for k in loop.carried]
    result = tf.while_loop(cond, body, init, parallel_iterations=parallel,
                           shape_invariants=[loop.shape_of(k) for k in loop.carried])
    return loop.layouts(result if loop.carried else [])


def _rows(values, positions):
    return [Stacked(tensor=tf.gather(v.tensor, positions)) if v.is_stacked else v
            for v in values]


def _scatter(full, positions, rows):
    return tf.tensor_scatter_nd_update(full, positions[:, None], rows)


def _keep_finished(final, exited, value):
    """Rows that just finished take ``value`` (an invariant variable's current value)."""
    rows = tf.reshape(exited, tf.concat([tf.shape(exited), tf.ones_like(tf.shape(value))], 0))
    return tf.where(rows, value[None], final)


def _run_stacked(loop, parallel, masked):
    ctx = loop.ctx
    changing = [k for k in loop.carried if not loop.stacked[k]]
    init = [_stack_value(ctx, loop.inputs[k]) if loop.stacked[k] else loop.inputs[k].tensor
            for k in loop.carried]
    start = ctx.convert_function(loop.cond, loop.layouts(init))
    active = truth(start.stacked(0))
    finals = [ctx.stack(loop.inputs[k]) for k in changing]

    def step(active, values, finals):
        positions = None if masked else tf.cast(tf.where(active)[:, 0], tf.int32)
        outside = loop.inputs if masked else _rows(loop.inputs, positions)
        mine = values if masked else [tf.gather(v, positions) if s else v for v, s in
                                      zip(values, (loop.stacked[k] for k in loop.carried))]
        converted = ctx.convert_function(loop.body, loop.layouts(mine, outside=outside),
                                         positions=positions)
        outs = [_carried_out(loop, converted, k) for k in loop.carried]
        check = ctx.convert_function(loop.cond, loop.layouts(outs, outside=outside),
                                     positions=positions)
        still = truth(check.stacked(0))
        effects = converted.side_effects + check.side_effects
        if masked:
            still = tf.logical_and(still, active)
            new = [_select(active, o, v) if loop.stacked[k] else o
                   for k, o, v in zip(loop.carried, outs, values)]
        else:
            still = _scatter(tf.zeros_like(active), positions, still)
            new = [_scatter(v, positions, o) if loop.stacked[k] else o
                   for k, o, v in zip(loop.carried, outs, values)]
        exited = tf.logical_and(active, tf.logical_not(still))
        by_k = dict(zip(loop.carried, new))
        finals = [_keep_finished(f, exited, by_k[k]) for f, k in zip(finals, changing)]
        return with_effects([still], effects)[0], new, finals

    def cond(active, values, finals):
        return tf.reduce_any(active)

    shapes = (tf.TensorShape([ctx.n_static]), [loop.shape_of(k) for k in loop.carried],
              [tf.TensorShape([ctx.n_static]).concatenate(loop.body.inputs[k].shape)
               for k in changing])
    _, values, finals = tf.while_loop(cond, step, (active, init, finals),
                                      parallel_iterations=parallel,
                                      shape_invariants=shapes)
    layouts = loop.layouts(values)
    for k, final in zip(changing, finals):
        layouts[k] = Stacked(tensor=final)
    return layouts


def _select(active, new, old):
    rows = tf.reshape(active, tf.concat([tf.shape(active), tf.ones_like(tf.shape(new))[1:]], 0))
    return tf.where(rows, new, old)


def convert_while(ctx):
    cond = function_graph(ctx.op, ctx.attr("cond").name)
    body = function_graph(ctx.op, ctx.attr("body").name)
    if cond is None or body is None:
        return ctx.decline("the condition or body function is not in the graph")
    loop = _Loop(ctx, cond, body)
    loop.stacked = _find_stacked(loop)
    parallel = ctx.attr("parallel_iterations") if ctx.has_attr("parallel_iterations") else 10
    if not _cond_is_stacked(loop):
        return _run_invariant(loop, parallel)
    if any(ctx.op.inputs[k].dtype in (tf.variant, tf.resource) for k in loop.carried):
        return ctx.decline("per-iteration trip counts with a tensor list or resource "
                           "carried through the loop")
    return _run_stacked(loop, parallel, masked=ctx.compiled or ctx.nested)


def register(registry):
    registry.add(["While", "StatelessWhile"], convert_while)
