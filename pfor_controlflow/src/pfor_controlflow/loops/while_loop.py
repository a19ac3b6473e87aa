"""While loops: While and StatelessWhile (what tf.while_loop emits).

Which loop variables are stacked is found first: trial conversions of the body, each
starting from the layouts the previous one produced, until no variable changes (a
variable is stacked if its initial value or any body output for it is). Variables the
body passes through unchanged are not carried at all: the converted body reads them
from outside the loop.

Then the condition decides the strategy:
- invariant: every iteration runs the same number of steps, so one ``tf.while_loop``
  runs the converted body on all iterations;
- stacked (trip counts differ per iteration): the active subset, or the masked loop
  (trip_counts.py) for small bodies of total ops, where it is clearly faster, and
  under XLA and inside an outer pfor, which need its static shapes (masking.py says
  when masking is safe and when it pays). A masked loop that a nested pfor emitted
  (trip_counts.run_masked marks it) runs masked over this pfor's iterations too, its
  tensor lists kept as long as the longest iteration's (``_run_uniform``).
"""

from __future__ import annotations

import copy

import tensorflow as tf
from tensorflow.python.ops import array_ops, handle_data_util

from pfor_controlflow import total_ops
from pfor_controlflow.conditionals.cond import truth
from pfor_controlflow.functions import function_graph, scratch_graph, stand_in, with_effects
from pfor_controlflow.lists import ragged_items
from pfor_controlflow.lists.loop_views import ListView
from pfor_controlflow.lists.with_lengths import ListWithLengths
from pfor_controlflow.loops import deferred_sums, masking, trip_counts
from pfor_controlflow.loops.loop_vars import (Loop, carried_out, length_change, list_dtypes,
                                              ragged_value, stack_value)
from pfor_controlflow.loops.records import same_items


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


def _stand_ins(loop, stacked):
    """Placeholders for the carried variables (a list of ragged items: a pair)."""
    return [ragged_items.placeholder(loop.ragged_lists[k]) if k in loop.ragged_lists
            else _placeholder(loop.body.inputs[k], loop.shape_of(k, stacked), stacked[k])
            for k in loop.carried]


def _find_stacked(loop, stacked) -> list[bool]:
    """Convert the body on trial until the stacked variables (and the tensor lists
    that hold ragged items, ``loop.ragged_lists``) no longer change."""
    ctx, body = loop.ctx, loop.body
    stacked = list(stacked)
    for _ in range(2 * len(stacked) + 1):
        with scratch_graph().as_default():
            values = _stand_ins(loop, stacked)
            trial = ctx.convert_function(body, loop.layouts(values, stacked), trial=True)
        grown = [s or v.is_stacked for s, v in zip(stacked, trial.outputs)]
        ragged = {k: v.rank for k, v in enumerate(trial.outputs)
                  if isinstance(v, ragged_items.RaggedList) and k in loop.carried}
        if grown == stacked and ragged.keys() <= loop.ragged_lists.keys():
            return stacked
        stacked = grown
        loop.ragged_lists.update(ragged)
    raise AssertionError("the loop-variable layouts did not settle")  # pragma: no cover


def _cond_is_stacked(loop) -> bool:
    with scratch_graph().as_default():
        values = _stand_ins(loop, loop.stacked)
        trial = loop.ctx.convert_function(loop.cond, loop.layouts(values), trial=True)
    return trial.outputs[0].is_stacked


def _run_invariant(loop, parallel):
    ctx = loop.ctx
    deferred = _deferrable(loop)
    if deferred:
        return _run_invariant_deferring(loop, parallel, deferred)

    def cond(*values):
        converted = ctx.convert_function(loop.cond, loop.layouts(values))
        return truth(with_effects([converted.outputs[0].tensor], converted.side_effects)[0])

    def body(*values):
        converted = ctx.convert_function(loop.body, loop.layouts(values))
        outs = [carried_out(loop, converted, k) for k in loop.carried]
        return with_effects(outs, converted.side_effects)[:-1]

    init = [_initial(loop, k) for k in loop.carried]
    result = tf.while_loop(cond, body, init, parallel_iterations=parallel,
                           maximum_iterations=loop.maximum_iterations,
                           shape_invariants=[loop.shape_of(k) for k in loop.carried])
    return loop.layouts(result if loop.carried else [])


def _deferrable(loop) -> dict:
    """The loop variables whose sums wait until after the loop (deferred_sums.find).
    Under XLA the steps' operands go to arrays of a size known when compiling, the
    loop's step bound, whatever steps run: only where that many steps hold no more
    than the sum does. Not inside an outer pfor, nor beside lists of ragged items."""
    if loop.ctx.nested or loop.ragged_lists:
        return {}
    if not loop.ctx.compiled:
        return deferred_sums.find(loop)
    bound = loop.step_bound
    if bound is None:
        return {}
    return {k: products for k, products in deferred_sums.find(loop).items()
            if deferred_sums.cheaper_for(products, bound)}


def _initial(loop, k):
    """The value the converted loop starts carried variable ``k`` with."""
    ctx = loop.ctx
    if k in loop.ragged_lists:
        return ragged_value(loop, k, loop.inputs[k])
    if k in loop.ragged_values:
        return loop.inputs[k].padded
    if loop.stacked[k]:
        return stack_value(ctx, loop.inputs[k], dtypes=list_dtypes(loop.body, k, ctx.op.inputs[k]))
    return loop.inputs[k].tensor


def _run_invariant_deferring(loop, parallel, deferred):
    """``_run_invariant`` that keeps the operands of the ``deferred`` loop variables'
    products step by step and sums them after the loop (deferred_sums.py)."""
    ctx = loop.ctx
    kept = [k for k in loop.carried if k not in deferred]
    extra = [t for k in deferred for t in deferred_sums.operands(deferred[k])]
    init = {k: _initial(loop, k) for k in kept}

    def all_values(values):
        # A deferred sum is unread in the body: its start stays as it came (an
        # invariant zero start is not tiled to [n, p, q] only to pass through).
        by_k = dict(zip(kept, values))
        return [by_k[k] if k in by_k else loop.inputs[k] for k in loop.carried]

    def cond(values, arrays, step):
        converted = ctx.convert_function(loop.cond, loop.layouts(all_values(values)))
        return truth(with_effects([converted.outputs[0].tensor], converted.side_effects)[0])

    def body(values, arrays, step):
        outputs = [loop.body.inputs[k] if k in deferred else t
                   for k, t in enumerate(loop.body.outputs)] + extra
        converted = ctx.convert_function(loop.body, loop.layouts(all_values(values)),
                                         outputs=outputs)
        outs = [carried_out(loop, converted, k) for k in kept]
        steps = [ctx.stack(v) for v in converted.outputs[len(loop.body.outputs):]]
        arrays = [a.write(step, v) for a, v in zip(arrays, steps)]
        return with_effects(outs, converted.side_effects)[:-1], arrays, step + 1

    # Under XLA the arrays have the loop's step bound as their size; steps it did not
    # run stay zero there, which adds nothing to the sums.
    bound = loop.step_bound if ctx.compiled else None
    arrays = [tf.TensorArray(t.dtype, size=bound or 0, dynamic_size=bound is None,
                             element_shape=ctx.stacked_shape(t.shape))
              for t in extra]
    shapes = ([loop.shape_of(k) for k in kept], [tf.TensorShape(None) for _ in arrays],
              tf.TensorShape([]))
    values, arrays, ran = tf.while_loop(cond, body, ([init[k] for k in kept], arrays, 0),
                                        parallel_iterations=parallel,
                                        maximum_iterations=loop.maximum_iterations,
                                        shape_invariants=shapes)
    result = dict(zip(kept, values))
    arrays = iter(arrays)
    for k, products in deferred.items():
        mine = [next(arrays) for _ in range(2 * len(products))]
        start = loop.inputs[k]
        result[k] = tf.cond(ran > 0,
                            lambda p=products, m=mine, s=start:
                            deferred_sums.plus(s, deferred_sums.total(p, [a.stack() for a in m])),
                            lambda s=start: ctx.stack(s))
        result[k].set_shape(loop.shape_of(k))
    return loop.layouts([result[k] for k in loop.carried])


def convert_while(ctx):
    cond = function_graph(ctx.op, ctx.attr("cond").name)
    body = function_graph(ctx.op, ctx.attr("body").name)
    if cond is None or body is None:
        return ctx.decline("the condition or body function is not in the graph")
    if any(isinstance(v, ListView) for v in ctx.inputs):
        return ctx.decline("a tensor list of an enclosing loop with per-iteration trip "
                           "counts enters a nested loop")
    loop = Loop(ctx, cond, body)
    loop.stacked = _find_stacked(loop, loop.stacked)
    parallel = ctx.attr("parallel_iterations") if ctx.has_attr("parallel_iterations") else 10
    per_iteration = _cond_is_stacked(loop)
    if per_iteration and not ctx.compiled and trip_counts.masked_by_pfor(ctx.op):
        return _run_uniform(loop, parallel)
    refused = _lists_refused(loop, per_iteration)
    if refused:
        return ctx.decline(refused)
    if ctx.trial:
        return _layouts_only(loop, per_iteration)
    if not per_iteration:
        return _run_invariant(loop, parallel)
    if any(ctx.op.inputs[k].dtype == tf.resource for k in loop.carried):
        return ctx.decline("per-iteration trip counts with a resource carried through the loop")
    # Lists carried through such a loop end with per-iteration lengths: stacked (but
    # for those of the same items, records.same_items).
    lists = _carried_lists(loop)
    if any(l and not s for l, s in zip(lists, loop.stacked)):
        loop.stacked = _find_stacked(loop, [s or l for s, l in zip(loop.stacked, lists)])
    if ctx.compiled or ctx.nested:
        if loop.ragged_lists and ctx.compiled:
            return ctx.decline("a loop with per-iteration trip counts under XLA runs "
                               "masked, which does not carry tensor lists of items whose "
                               "shape differs between iterations (their padded size is "
                               "not known when compiling)")
        # (an Assert is no effect to repeat here: rows that should not run check the
        # values of a row that runs, total_ops.stand_ins, as an Assert is not total)
        repeated = [e for e in total_ops.effects(loop.body, loop.cond) if e != "Assert"]
        if repeated:
            return ctx.decline(total_ops.refusal(
                ctx, "a loop with per-iteration trip counts", repeated))
        refused = trip_counts.masked_lists_refused(loop)
        if refused:
            return ctx.decline(refused)
        ctx.report_strategy("masked", "under XLA, which needs static shapes" if ctx.compiled
                            else "inside an outer pfor, which needs static shapes")
        return trip_counts.run_masked(loop, parallel)
    masked = masking.pays(loop)
    choice = masking.choose(loop)
    ctx.report_strategy("masked" if masked else "compacted", choice.reason
                        if masked == choice.masked else "forced")  # (tests patch pays)
    if masked:
        return trip_counts.run_masked(loop, parallel)
    return trip_counts.run_subset(loop, parallel)


def _run_uniform(loop, parallel):
    """A masked loop that a pfor nested in this one emitted, run masked over this
    pfor's iterations too, its tensor lists kept as long as the longest iteration's
    (trip_counts.run_masked says why that is exact): plain stacked lists, also where
    the items pushed differ in shape between iterations (they are pushed padded)."""
    ctx = loop.ctx
    if any(isinstance(v, ragged_items.RaggedList) for v in loop.inputs):
        return ctx.decline("a list of ragged items enters a masked loop of a nested pfor")
    refused = _lists_refused(loop, True)
    if refused:
        return ctx.decline(refused)
    loop.ragged_lists.clear()  # (what the trials found: pushed padded instead)
    lists = _carried_lists(loop)
    loop.stacked = [s or l for s, l in zip(loop.stacked, lists)]
    if ctx.trial:
        return _layouts_only(loop, True)
    if any(ctx.op.inputs[k].dtype == tf.resource for k in loop.carried):
        return ctx.decline("per-iteration trip counts with a resource carried through the loop")
    ctx.report_strategy("masked", "a nested pfor made it masked: it runs masked over this "
                                  "pfor's iterations too")
    return trip_counts.run_masked(loop, parallel, uniform=True)


def _carried_lists(loop) -> list[bool]:
    """Per loop variable, whether it is a tensor list that a loop with per-iteration
    trip counts must carry stacked."""
    return [loop.ctx.op.inputs[k].dtype == tf.variant and k in loop.carried
            and not same_items(loop, k) for k in range(len(loop.stacked))]


def _layouts_only(loop, per_iteration):
    """The loop's output layouts, for a trial conversion: a carried variable ends
    stacked if it is stacked in the loop or the trip counts differ per iteration
    (each iteration stops with its own value; not a list of the same items, which
    stays invariant); the others are the loop's inputs."""
    ctx = loop.ctx
    return [loop.inputs[k] if k not in loop.carried or k in loop.ragged_values
            else ragged_items.placeholder(loop.ragged_lists[k]) if k in loop.ragged_lists
            else stand_in(t, loop.stacked[k] or (per_iteration and t.dtype != tf.variant),
                          ctx.n_static)
            for k, t in enumerate(ctx.op.outputs)]


def _lists_refused(loop, per_iteration):
    """Why the loop cannot take a tensor list whose rows hold their own numbers of
    items (with_lengths.py), or None. A loop with per-iteration trip counts pops such
    a list as a gradient loop pops its accumulators; nothing else keeps each row's
    items where that row's steps look for them."""
    for k, value in enumerate(loop.inputs):
        if isinstance(value, ragged_items.RaggedList) and (
                value.counts is not None or not value.counts_known):
            refused = _ragged_counts_refused(loop, k, value, per_iteration)
            if refused:
                return refused
            continue
        if not isinstance(value, ListWithLengths):
            continue
        if value.right_aligned:
            if per_iteration and k in loop.carried and length_change(loop.body, k) == "pops":
                continue
            return ("a tensor list whose iterations hold different numbers of items (grown "
                    "by a loop with per-iteration trip counts) enters a loop that does "
                    "more than pop it")
        if value.lengths is not None and length_change(loop.body, k) == "same":
            continue  # read and written in place: every row keeps its own length
        return ("a tensor list whose iterations hold different numbers of items (made "
                "with a per-iteration size, or grown by a loop with per-iteration trip "
                "counts) enters a loop that grows or resizes it; give the list a size "
                "that covers every write (a TensorArray of fixed size), or make it in "
                "the loop")
    return None


# What a loop may do to a list whose rows hold their own numbers of items where every
# row's items stay where that row's steps look for them: address items by index (and
# add lists item by item, as a gradient loop adds a read's gradient).
_BY_INDEX = frozenset({"Identity", "TensorListSetItem", "TensorListGetItem",
                       "TensorListResize", "TensorListElementShape", "AddN"})


def _ragged_counts_refused(loop, k, value, per_iteration):
    """Why a list of ragged items whose rows hold their own numbers of items
    (ragged_items.py) cannot enter the loop, or None: the loop may pop it (right-aligned,
    as a gradient loop pops its accumulators) or address its items by index (left-aligned:
    a row's item t is at t, as a gradient loop reads the gradient of a concat)."""
    uses = _list_ops(loop.body, k)
    if value.right_aligned:
        if per_iteration and k in loop.carried and length_change(loop.body, k) == "pops":
            return None
    elif value.counts_known and uses <= _BY_INDEX and length_change(loop.body, k) != "writes":
        return None  # (a write that grows one row's list would lose the others' counts)
    return ("a tensor list of ragged items whose iterations hold different numbers of "
            "items (grown by a loop with per-iteration trip counts) enters a loop that "
            "does more than read and write it by index or pop it")


def _list_ops(body, k) -> set:
    """The op types that use tensor list ``k`` of ``body`` (through its updates)."""
    found, pending, seen = set(), [body.inputs[k]], set()
    while pending:
        tensor = pending.pop()
        for op in tensor.consumers():
            if id(op) in seen:
                continue
            seen.add(id(op))
            found.add(op.type)
            if op.type in ("Identity", "TensorListSetItem", "TensorListResize",
                           "TensorListPushBack", "TensorListPopBack", "AddN"):
                pending.append(op.outputs[0])
    return found
