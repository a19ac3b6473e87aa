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

import copy

import tensorflow as tf
from tensorflow.python.ops import array_ops, handle_data_util

from pfor_core import Invariant, Stacked
from pfor_controlflow.conditionals import truth
from pfor_controlflow.functions import function_graph, scratch_graph, with_effects
from pfor_controlflow.list_views import ListView, right_align


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
            if isinstance(value, (Stacked, Invariant)):
                values[k] = value
            else:
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


def _placeholder(like, shape, stacked=False):
    """A stand-in for a loop variable in a trial conversion; a tensor list keeps the
    element type its handle data records (a stacked one forgets the element shape,
    which gains the iteration axis)."""
    value = array_ops.placeholder(like.dtype, shape)
    data = handle_data_util.get_handle_data(like) if like.dtype == tf.variant else None
    if data is not None and data.is_set:
        if stacked:
            data = copy.deepcopy(data)
            for entry in data.shape_and_type:
                entry.shape.Clear()
                entry.shape.unknown_rank = True
        handle_data_util.set_handle_data(value, data)
    return value


def _find_stacked(loop, stacked) -> list[bool]:
    """Convert the body on trial until the stacked variables no longer change."""
    ctx, body = loop.ctx, loop.body
    stacked = list(stacked)
    for _ in range(len(stacked) + 1):
        with scratch_graph().as_default():
            values = [_placeholder(body.inputs[k], loop.shape_of(k, stacked), stacked[k])
                      for k in loop.carried]
            trial = ctx.convert_function(body, loop.layouts(values, stacked), trial=True)
        grown = [s or v.is_stacked for s, v in zip(stacked, trial.outputs)]
        if grown == stacked:
            return stacked
        stacked = grown
    raise AssertionError("the loop-variable layouts did not settle")  # pragma: no cover


def _cond_is_stacked(loop) -> bool:
    with scratch_graph().as_default():
        values = [_placeholder(loop.body.inputs[k], loop.shape_of(k), loop.stacked[k])
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


def _keep_finished(final, exited, value):
    """Rows that just finished take ``value`` (an invariant variable's current value)."""
    rows = tf.reshape(exited, tf.concat([tf.shape(exited), tf.ones_like(tf.shape(value))], 0))
    return tf.where(rows, value[None], final)


class _Step:
    """One step of a loop with per-iteration trip counts, on the active rows (or, with
    ``masked``, on all rows, keeping finished rows' values)."""

    def __init__(self, loop, active, masked):
        self.loop, self.active, self.masked = loop, active, masked
        self.positions = None if masked else tf.cast(tf.where(active)[:, 0], tf.int32)

    def view(self, handle) -> ListView:
        return ListView(tensor=handle, width=self.loop.ctx.n, rows=self.positions,
                        mask=self.active if self.masked else None)

    def rows(self, value):
        """A stacked value of the whole loop as the rows this step converts."""
        if not value.is_stacked:
            return value
        if value.dtype == tf.variant:
            return self.view(value.tensor)
        if self.masked:
            return value
        return Stacked(tensor=tf.gather(value.tensor, self.positions))

    def add(self, whole, rows):
        """The whole loop's value plus this step's increments in its rows."""
        if self.masked:
            return whole + _select(self.active, rows, tf.zeros_like(rows))
        return tf.tensor_scatter_nd_add(whole, self.positions[:, None], rows)

    def put_back(self, whole, rows):
        """The whole loop's value with this step's rows replaced."""
        if self.masked:
            return _select(self.active, rows, whole)
        return tf.tensor_scatter_nd_update(whole, self.positions[:, None], rows)


def _increment(loop, k):
    """For a variable the body only adds to (``v + delta``, as the gradient loop
    accumulates the gradients of the weights) and the condition does not read: the
    body tensor ``delta``. Such a variable is updated with a scatter-add of the active
    rows' increments: it is never gathered, and its rows are never copied back."""
    body = loop.body
    source, out = body.inputs[k], _through_identities(body.outputs[k])
    if out.op.type not in ("AddV2", "Add", "AddN") or len(out.op.inputs) != 2:
        return None
    if loop.cond.inputs[k].consumers() or source.dtype in (tf.variant, tf.resource):
        return None
    a, b = (_through_identities(t) for t in out.op.inputs)
    if (a is source) == (b is source) or not _only_feeds(source, out.op):
        return None
    delta = out.op.inputs[1] if a is source else out.op.inputs[0]
    return delta if delta.shape == out.shape else None  # no broadcasting in the add


def _through_identities(tensor):
    while tensor.op.type == "Identity":
        tensor = tensor.op.inputs[0]
    return tensor


def _only_feeds(tensor, op) -> bool:
    """Whether ``tensor`` reaches nothing but ``op`` (through identities)."""
    for consumer in tensor.consumers():
        if consumer is op:
            continue
        if consumer.type != "Identity" or not _only_feeds(consumer.outputs[0], op):
            return False
    return True


def _run_stacked(loop, parallel, masked):
    ctx = loop.ctx
    carried = loop.carried
    sums = {k: d for k in carried if loop.stacked[k]
            for d in [_increment(loop, k)] if d is not None}
    body_outputs = [sums.get(k, t) for k, t in enumerate(loop.body.outputs)]
    changing = [k for k in carried if not loop.stacked[k]]
    lists = [k for k in carried if loop.stacked[k] and loop.body.inputs[k].dtype == tf.variant]
    init = [_stack_value(ctx, loop.inputs[k]) if loop.stacked[k] else loop.inputs[k].tensor
            for k in carried]
    start = ctx.convert_function(loop.cond, loop.layouts(init))
    active = truth(start.stacked(0))
    finals = [ctx.stack(loop.inputs[k]) for k in changing]
    by_k = dict(zip(carried, init))
    lengths = [tf.fill([ctx.n], tf.raw_ops.TensorListLength(input_handle=by_k[k]))
               for k in lists]

    def body(active, values, finals, lengths):
        step = _Step(loop, active, masked)
        outside = [step.rows(v) for v in loop.inputs]
        mine = [Invariant(tensor=v) if k in sums else  # unread: see _increment
                step.rows(Stacked(tensor=v)) if loop.stacked[k] else v
                for k, v in zip(carried, values)]
        converted = ctx.convert_function(loop.body, loop.layouts(mine, outside=outside),
                                         positions=step.positions, outputs=body_outputs)
        outs = [_list_out(converted, k) if k in lists else _carried_out(loop, converted, k)
                for k in carried]
        check = ctx.convert_function(loop.cond, loop.layouts(outs, outside=outside),
                                     positions=step.positions)
        still = truth(check.stacked(0))
        if masked:
            still = tf.logical_and(still, active)
        else:
            still = tf.tensor_scatter_nd_update(tf.zeros_like(active),
                                                step.positions[:, None], still)
        new = [o.tensor if k in lists else step.add(v, o) if k in sums else
               step.put_back(v, o) if loop.stacked[k] else o
               for k, o, v in zip(carried, outs, values)]
        exited = tf.logical_and(active, tf.logical_not(still))
        by_k = dict(zip(carried, new))
        finals = [_keep_finished(f, exited, by_k[k]) for f, k in zip(finals, changing)]
        lengths = [tf.where(exited, tf.raw_ops.TensorListLength(input_handle=by_k[k]), n)
                   for n, k in zip(lengths, lists)]
        effects = converted.side_effects + check.side_effects
        return with_effects([still], effects)[0], new, finals, lengths

    shapes = (tf.TensorShape([ctx.n_static]), [loop.shape_of(k) for k in carried],
              [tf.TensorShape([ctx.n_static]).concatenate(loop.body.inputs[k].shape)
               for k in changing], [tf.TensorShape([ctx.n_static]) for _ in lists])
    _, values, finals, lengths = tf.while_loop(
        lambda active, *_: tf.reduce_any(active), body, (active, init, finals, lengths),
        parallel_iterations=parallel, shape_invariants=shapes)
    layouts = loop.layouts(values)
    for k, final in zip(changing, finals):
        layouts[k] = Stacked(tensor=final)
    for k, length in zip(lists, lengths):
        pushed = _pushed_by(loop.body, k)
        if pushed is not None:  # a stack (e.g. a gradient's accumulator): see list_views
            layouts[k] = Stacked(tensor=right_align(layouts[k].tensor, length, pushed))
    return layouts


def _list_out(converted, k):
    value = converted.outputs[k]
    if not isinstance(value, ListView):
        raise RuntimeError(f"loop variable {k}: the body replaced a tensor list carried "
                           "through a loop with per-iteration trip counts by a new list")
    return value


def _pushed_by(body, k):
    """The element dtype if the body's output ``k`` is a TensorListPushBack, else None."""
    out = body.outputs[k]
    while out.op.type == "Identity":
        out = out.op.inputs[0]
    return out.op.get_attr("element_dtype") if out.op.type == "TensorListPushBack" else None


def _select(active, new, old):
    rows = tf.reshape(active, tf.concat([tf.shape(active), tf.ones_like(tf.shape(new))[1:]], 0))
    return tf.where(rows, new, old)


def convert_while(ctx):
    cond = function_graph(ctx.op, ctx.attr("cond").name)
    body = function_graph(ctx.op, ctx.attr("body").name)
    if cond is None or body is None:
        return ctx.decline("the condition or body function is not in the graph")
    loop = _Loop(ctx, cond, body)
    loop.stacked = _find_stacked(loop, loop.stacked)
    parallel = ctx.attr("parallel_iterations") if ctx.has_attr("parallel_iterations") else 10
    if not _cond_is_stacked(loop):
        return _run_invariant(loop, parallel)
    if any(ctx.op.inputs[k].dtype == tf.resource for k in loop.carried):
        return ctx.decline("per-iteration trip counts with a resource carried through the loop")
    # Lists carried through such a loop end with per-iteration lengths: stacked.
    lists = [ctx.op.inputs[k].dtype == tf.variant and k in loop.carried
             for k in range(len(loop.stacked))]
    if any(l and not s for l, s in zip(lists, loop.stacked)):
        loop.stacked = _find_stacked(loop, [s or l for s, l in zip(loop.stacked, lists)])
    return _run_stacked(loop, parallel, masked=ctx.compiled or ctx.nested)


def register(registry):
    registry.add(["While", "StatelessWhile"], convert_while)
