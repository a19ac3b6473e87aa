"""While loops whose trip count differs per iteration (a stacked condition).

Active subset (the default): the loop carries the still-active iterations' rows only,
compactly (``[m, ...]``, with their row numbers), and runs body and condition on them.
When some rows finish, their final values are set aside and the carried values are
compacted to the rows still running; nothing is gathered or scattered in a step where
no row finishes, and a variable the body adds to (a gradient accumulator) is updated
in place on its ``m`` rows. At the end the finished rows' values are put back in
order over the initial values (rows that never ran keep those).

Masked (under XLA, which needs static shapes, inside an outer ``pfor``, which
cannot vectorize data-dependent shapes, and for small bodies of total ops, where it
is faster; see masking.py): every step runs on all rows and keeps the old values of
finished rows.

Either way an invariant variable can end differently per iteration (e.g. the step
counter): its value when each iteration finishes becomes the loop's stacked output.
Tensor lists stay whole (see loop_views.py; lists of ragged items: ragged_item_views.py)
and are right-aligned at the end when the body pushes to them; a list every step pushes
the same value onto for all rows (a gradient's record of a weight or a shape), or that
the loop only pops, stays one invariant list (records.same_items).
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

from pfor_core.extend import Invariant, Ragged, Stacked
from pfor_controlflow import total_ops
from pfor_controlflow.conditionals.cond import truth
from pfor_controlflow.functions import select_rows, with_effects
from pfor_controlflow.lists import ragged_item_views, ragged_items
from pfor_controlflow.lists.loop_views import ListView, right_align
from pfor_controlflow.lists.with_lengths import ListWithLengths
from pfor_controlflow.loops import deferred_sums, masking, row_views
from pfor_controlflow.loops.loop_vars import (carried_out, length_change, list_dtypes,
                                              list_out, pushed_by, pushed_parts,
                                              pushes_per_step,
                                              ragged_value, stack_value, starts_empty,
                                              written_shape)
from pfor_controlflow.loops.records import shapes_record
from pfor_controlflow.loops.row_views import RowView

_LENGTH = tf.raw_ops.TensorListLength


class _Kinds:
    """The loop's variables sorted by how a per-iteration loop carries them."""

    def __init__(self, loop, deferred=()):
        variant = [t.dtype == tf.variant for t in loop.body.inputs]
        self.rows = [k for k in loop.carried if loop.stacked[k] and not variant[k]
                     and k not in deferred]  # deferred sums: deferred_sums.py
        self.lists = [k for k in loop.carried if loop.stacked[k] and variant[k]]
        self.change = {k: length_change(loop.body, k) for k in self.lists}
        # Lists whose running rows hold as many items as the whole list (loop_views.py).
        self.aligned = {k for k, v in enumerate(loop.inputs) if variant[k]
                        and (type(v) in (Stacked, Invariant) or (
                            isinstance(v, ragged_items.RaggedList) and v.counts is None))
                        and self.change.get(k, "same") in ("same", "pushes", "writes")}
        self.changing = [k for k in loop.carried if not loop.stacked[k] and not variant[k]]
        # Lists that hold handles of lists read for their shapes only, by variable:
        # those lists' rows' lengths (records.shapes_record: pushed, or popped).
        self.records = dict(loop.records)
        for k in self.lists:
            j = shapes_record(loop, k)
            if j is not None:
                self.records[k] = loop.lengths.get(j)
        # Lists of the same items for all rows (records.same_items): carried as they
        # are, invariant after the loop.
        self.same = [k for k in loop.carried if not loop.stacked[k] and variant[k]]
        # Per-iteration values read from outside the loop: compacted with the rows,
        # or seen through a row view where the body reads one item of them.
        outside = [k for k, p in enumerate(loop.passed)
                   if p and loop.inputs[k].is_stacked and not variant[k]
                   and not isinstance(loop.inputs[k], Ragged)]
        # Ragged values read from outside: the body's rows gathered from them each step.
        self.ragged = [k for k, p in enumerate(loop.passed)
                       if p and isinstance(loop.inputs[k], Ragged)]
        self.viewed = [k for k in outside
                       if row_views.only_read_by_item(loop.body, loop.body.inputs[k])]
        self.outside = [k for k in outside if k not in self.viewed]


def _initial(loop, deferred=()):
    """The carried variables' starting values (deferred sums' as they came: only their
    sums read them) and which rows start running."""
    ctx = loop.ctx
    # Under XLA a new list needs its element shape before the masked loop reads it.
    shape = (lambda k: written_shape(loop.body, k)) if ctx.compiled else (lambda k: None)
    init = {k: loop.inputs[k] if k in deferred
            else loop.inputs[k].padded if k in loop.ragged_values
            else ragged_value(loop, k, loop.inputs[k]) if k in loop.ragged_lists
            else stack_value(ctx, loop.inputs[k], shape(k), list_dtypes(loop.body, k, ctx.op.inputs[k]))
            if loop.stacked[k]
            else loop.inputs[k].tensor for k in loop.carried}
    start = ctx.convert_function(loop.cond, loop.layouts([init[k] for k in loop.carried]))
    return init, truth(start.stacked(0))


def ragged_rows(value: Ragged, rows) -> Ragged:
    """The ragged ``value``'s ``rows``, in that order."""
    return Ragged(padded=tf.gather(value.padded, rows), lengths=tuple(
        None if length is None else tf.gather(length, rows) for length in value.lengths))


def _where(mask):
    """The positions where the bool vector ``mask`` holds (int32)."""
    return tf.cast(tf.reshape(tf.where(mask), [-1]), tf.int32)


def _effects(converted, check):
    return converted.side_effects + check.side_effects


def _list_view(loop, kinds, k, value, rows):
    """Tensor list ``k`` (a handle, the pair of a list of ragged items, or a layout
    value) as the body of the loop sees it when it converts ``rows``."""
    if isinstance(value, tuple):
        value = ragged_items.from_pair(value, loop.ragged_lists[k],
                                       element_shapes=loop.element_shapes.get(k))
    if isinstance(value, ragged_items.RaggedList):
        return ragged_item_views.view_of(value, loop.ctx.n, rows, aligned=k in kinds.aligned,
                                         lengths=loop.lengths.get(k))
    handle = value if isinstance(value, tf.Tensor) else value.tensor
    return ListView(tensor=handle, width=loop.ctx.n, rows=rows, aligned=k in kinds.aligned,
                    lengths=loop.lengths.get(k), records=k in kinds.records,
                    held_lengths=kinds.records.get(k))


def _masked_view(loop, kinds, k, value, active, uniform=False, reads=None):
    """Tensor list ``k`` as the body of the masked loop sees it (``active``: the rows
    whose writes count; ``uniform``: see ``run_masked``; ``reads``: per row, the row
    whose items it reads, total_ops.stand_ins)."""
    if isinstance(value, tuple):
        value = ragged_items.from_pair(value, loop.ragged_lists[k],
                                       element_shapes=loop.element_shapes.get(k))
    if isinstance(value, ragged_items.RaggedList):
        return ragged_item_views.view_of(value, loop.ctx.n, None, aligned=k in kinds.aligned,
                                         mask=active, lengths=loop.lengths.get(k),
                                         reads=reads)
    handle = value if isinstance(value, tf.Tensor) else value.tensor
    return ListView(tensor=handle, width=loop.ctx.n, mask=active, aligned=k in kinds.aligned,
                    padded_items=uniform, lengths=loop.lengths.get(k), reads=reads,
                    records=k in kinds.records, held_lengths=kinds.records.get(k))


def _list_carry(loop, converted, k):
    """What the loop carries for tensor list ``k`` after the converted body."""
    if k not in loop.ragged_lists:
        return list_out(converted, k).tensor
    value = converted.outputs[k]
    if not isinstance(value, ragged_item_views.RaggedListView):
        raise RuntimeError(f"loop variable {k}: the body replaced a tensor list carried "
                           "through a loop with per-iteration trip counts by a new list")
    return value.pair()


def _handle(carried):
    """The list handle of a carried list (of a pair: its items' list)."""
    return carried[0] if isinstance(carried, tuple) else carried


# -- active subset ------------------------------------------------------------------------
class _Finished:
    """The rows that finished, step by step, with their final values: the rows' own
    variables, the invariant variables' values then, and tensor-list lengths."""

    def __init__(self, loop, kinds):
        body = loop.body
        self.specs = ([(body.inputs[k].dtype, body.inputs[k].shape)
                       for k in kinds.rows + kinds.changing]
                      + [(tf.int32, tf.TensorShape([])) for _ in kinds.lists])

    def _all(self):
        return [(tf.int32, tf.TensorShape([]))] + self.specs

    def start(self):
        return [tf.TensorArray(dtype, size=0, dynamic_size=True, infer_shape=False,
                               element_shape=tf.TensorShape([None]).concatenate(shape))
                for dtype, shape in self._all()]

    @staticmethod
    def record(arrays, step, pieces):
        return [a.write(step, p) for a, p in zip(arrays, pieces)]

    def finish(self, arrays, bases):
        """Per array, everything written ([total, ...]); empty if no row ever ran, with
        the per-row dimensions of the values it stands for (``bases``: the loop's
        values of all rows, None for a scalar per row), which the stitch that merges
        them needs also where the static shape does not tell them."""
        def empty():
            out = []
            for (dtype, shape), base in zip(self._all(), [None] + bases):
                if base is not None:
                    dims = tf.concat([[0], tf.shape(base)[1:]], 0)
                else:
                    dims = [0] + [d if d is not None else 0 for d in shape.as_list()]
                out.append(tf.zeros(dims, dtype))
            return out

        # Every array is written at the same steps: one conditional for all of them.
        return tf.cond(arrays[0].size() > 0, lambda: [a.concat() for a in arrays], empty)


def run_subset(loop, parallel):
    """The loop on the active subset of its rows (see the module docstring)."""
    subset = _Subset(loop)
    return subset.results(*subset.run(parallel))


class _Subset:
    """The steps of ``run_subset``: the values the body sees, one step, the loop, and
    its results put back in row order."""

    def __init__(self, loop):
        self.loop = loop
        self.ctx, self.deferred = loop.ctx, deferred_sums.find(loop)
        self.kinds = kinds = _Kinds(loop, self.deferred)
        self.init, active = _initial(loop, self.deferred)
        self.extra = [t for k in self.deferred for t in deferred_sums.operands(self.deferred[k])]
        self.outputs = [loop.body.inputs[k] if k in self.deferred else t
                        for k, t in enumerate(loop.body.outputs)] + self.extra
        self.row_steps = deferred_sums.RowSteps(self.extra)
        self.rows = tf.cast(tf.where(active)[:, 0], tf.int32)
        self.carry = ([tf.gather(self.init[k], self.rows) for k in kinds.rows]
                      + [tf.gather(loop.inputs[k].tensor, self.rows) for k in kinds.outside])
        self.finished = _Finished(loop, kinds)

    def layouts(self, rows, carry, lists, changing, same):
        """The layout values the body and condition see on the running ``rows``."""
        loop, kinds = self.loop, self.kinds
        values = [_list_view(loop, kinds, k, v, rows)
                  if v.is_stacked and v.dtype == tf.variant else v
                  for k, v in enumerate(loop.inputs)]
        for k, value in zip(kinds.rows + kinds.outside, carry):
            values[k] = (loop.ragged_value(k, value, rows) if k in loop.ragged_values
                         else Stacked(tensor=value))
        for k, handle in zip(kinds.lists, lists):
            values[k] = _list_view(loop, kinds, k, handle, rows)
        for k, value in zip(kinds.changing + kinds.same, changing + same):
            values[k] = Invariant(tensor=value)
        for k in self.deferred:
            values[k] = self.init[k]  # unread: only its sum reads it
        for k in kinds.viewed:
            values[k] = RowView(base=loop.inputs[k].tensor, rows=rows)
        for k in kinds.ragged:
            values[k] = ragged_rows(loop.inputs[k], rows)
        return values

    def body(self, step, rows, carry, lists, changing, same, arrays, steps):
        """One step on the running rows: the body, the condition, the rows that finish
        set aside, and the rest compacted."""
        loop, kinds, ctx = self.loop, self.kinds, self.ctx
        converted = ctx.convert_function(loop.body,
                                         self.layouts(rows, carry, lists, changing, same),
                                         positions=rows, outputs=self.outputs)
        base = len(loop.body.outputs)
        steps = self.row_steps.record(steps, step, rows, [converted.stacked(base + j)
                                                          for j in range(len(self.extra))])
        carry = ([carried_out(loop, converted, k, rows) for k in kinds.rows]
                 + carry[len(kinds.rows):])
        lists = [_list_carry(loop, converted, k) for k in kinds.lists]
        changing = [carried_out(loop, converted, k) for k in kinds.changing]
        same = [carried_out(loop, converted, k) for k in kinds.same]
        check = ctx.convert_function(loop.cond, self.layouts(rows, carry, lists, changing, same),
                                     positions=rows)
        still = with_effects([truth(check.stacked(0))], _effects(converted, check))[0]
        done = tf.logical_not(still)
        arrays = self._record(arrays, step, rows, carry, lists, changing, done)
        # Compact to the rows still running, only in steps where some finished.
        kept = [rows] + carry
        kept = tf.cond(tf.reduce_any(done), lambda: [tf.gather(t, _where(still)) for t in kept],
                       lambda: kept)
        return step + 1, kept[0], kept[1:], lists, changing, same, arrays, steps

    def _record(self, arrays, step, rows, carry, lists, changing, done):
        """``arrays`` with the rows that finish in this step and their final values."""
        ended = _where(done)  # (gathers: far fewer ops to build than boolean masks)
        count = tf.reshape(tf.size(ended), [1])
        return self.finished.record(arrays, step, (
            [tf.gather(rows, ended)]
            + [tf.gather(v, ended) for v in carry[:len(self.kinds.rows)]]
            + [tf.broadcast_to(v[None], tf.concat([count, tf.shape(v)], 0)) for v in changing]
            + [tf.fill(count, _LENGTH(input_handle=_handle(h))) for h in lists]))

    def run(self, parallel):
        """The while loop: its step count, lists, finished rows' arrays and row steps."""
        loop, kinds, init = self.loop, self.kinds, self.init
        arrays, steps = self.finished.start(), self.row_steps.start()
        shapes = (tf.TensorShape([]), tf.TensorShape([None]),
                  [tf.TensorShape([None]).concatenate(loop.body.inputs[k].shape)
                   for k in kinds.rows + kinds.outside],
                  [loop.shape_of(k) for k in kinds.lists],
                  [loop.body.inputs[k].shape for k in kinds.changing],
                  [loop.body.inputs[k].shape for k in kinds.same],
                  [tf.TensorShape([]) for _ in arrays],  # TensorArrays: their flows
                  [tf.TensorShape([]) for _ in steps])
        start = (tf.constant(0), self.rows, self.carry, [init[k] for k in kinds.lists],
                 [init[k] for k in kinds.changing], [init[k] for k in kinds.same], arrays,
                 steps)
        count, _, _, lists, _, same, arrays, steps = tf.while_loop(
            lambda step, rows, *_: tf.size(rows) > 0, self.body, start,
            parallel_iterations=parallel, maximum_iterations=loop.maximum_iterations,
            shape_invariants=shapes)
        return count, lists, same, arrays, steps

    def results(self, count, lists, same, arrays, steps):
        """The loop's outputs in row order: the finished rows' final values written over
        the start (rows that never ran keep it), and the deferred sums."""
        loop, kinds, ctx, init = self.loop, self.kinds, self.ctx, self.init
        bases = {k: init[k] if loop.stacked[k] else ctx.stack(loop.inputs[k])
                 for k in kinds.rows + kinds.changing}
        ids, *values = self.finished.finish(
            arrays, [bases[k] for k in kinds.rows + kinds.changing] + [None for _ in kinds.lists])

        # The final values are written over the start by a scatter: its positions are
        # run-time values, under XLA's auto-clustering too (DynamicStitch needs them
        # when compiling, which a cluster holding the loop's tf.where cannot give), and
        # its gradient reaches no start that a final value replaced.
        def stitch(base, pieces, shape):
            out = tf.tensor_scatter_nd_update(base, ids[:, None], pieces)
            out.set_shape(ctx.stacked_shape(shape))
            return out

        layouts = loop.layouts([init[k] for k in loop.carried])
        for k, value in self.row_steps.totals(self.deferred, steps, count, ctx.n, init,
                                              ctx.stack).items():
            value.set_shape(loop.shape_of(k))
            layouts[k] = Stacked(tensor=value)
        values = iter(values)
        for k in kinds.rows + kinds.changing:
            value = stitch(bases[k], next(values), loop.body.inputs[k].shape)
            layouts[k] = (loop.ragged_value(k, value) if k in loop.ragged_values
                          else Stacked(tensor=value))
        for k, handle in zip(kinds.lists, lists):
            lengths = stitch(tf.fill([ctx.n], _LENGTH(input_handle=_handle(init[k]))),
                             next(values), tf.TensorShape([]))
            layouts[k] = self._list_layout(k, handle, lengths)
        for k, handle in zip(kinds.same, same):
            layouts[k] = Invariant(tensor=handle)
        return layouts

    def _list_layout(self, k, handle, lengths):
        """The output of list ``k`` (``lengths``: each row's length when it finished)."""
        loop, kinds = self.loop, self.kinds
        pushed = pushed_by(loop.body, k)
        if k in loop.ragged_lists:
            return ragged_item_views.result(
                *handle, loop.ragged_lists[k], lengths=lengths, change=kinds.change[k],
                pushed=pushed, n=self.ctx.n, own=loop.lengths.get(k),
                element_shapes=loop.element_shapes.get(k))
        if pushed is not None and k not in kinds.records:  # a stack: see loop_views
            handle = right_align(handle, lengths, pushed, pushed_parts(loop.body, k))
        return _list_result(loop, kinds, k, handle, lengths)


def _list_result(loop, kinds, k, handle, lengths):
    """The loop's output for tensor list ``k``: a plain stacked list while its rows
    hold the same number of items, else a ``ListWithLengths`` (with_lengths.py) with
    ``lengths`` (each row's length when it finished) where they are right."""
    change, before = kinds.change[k], loop.inputs[k]
    if k in kinds.records and change == "pushes":  # (the same shapes in every item)
        return ListWithLengths(tensor=handle, lengths=lengths, right_aligned=True,
                               records=True, held_lengths=kinds.records[k])
    if k in loop.lengths:  # written in place only (see convert_while): lengths kept
        return ListWithLengths(tensor=handle, lengths=loop.lengths[k])
    if isinstance(before, ListWithLengths):  # popped only (see convert_while)
        return ListWithLengths(tensor=handle, right_aligned=True)
    if change == "same":
        return Stacked(tensor=handle)
    known = lengths if change in ("pushes", "writes") else None
    return ListWithLengths(tensor=handle, lengths=known,
                           right_aligned=pushed_by(loop.body, k) is not None)


# -- masked -------------------------------------------------------------------------------
# The masked loops this module emits inside an outer pfor carry this attr (on their
# While op): see ``run_masked``.
UNIFORM_LISTS = "_pfor_masked_lists"


def masked_by_pfor(op) -> bool:
    """Whether the While ``op`` is a masked loop that a pfor nested in this one emitted
    (see ``run_masked``)."""
    return UNIFORM_LISTS in op.node_def.attr


def run_masked(loop, parallel, uniform=False):
    """The masked loop. Its tensor lists hold, past every row's own items, what the
    steps after that row finished pushed (or nothing): the code after the loop reads
    each row's own items only, by the counts the loop keeps (``ran``, ``sizes``).
    Inside an outer pfor, the While op says so (``UNIFORM_LISTS``); the outer pfor then
    runs it ``uniform``: masked over its own iterations too, each list as long as the
    longest outer iteration's and its items padded alike, so that the code after the
    loop meets plain stacked lists instead of lists whose length or item size differs
    between the outer iterations (which it could not vectorize)."""
    masked = _Masked(loop, uniform)
    return masked.results(*masked.run(parallel))


class _Masked:
    """The steps of ``run_masked``: the values the body sees, one step, the loop, and
    its results."""

    def __init__(self, loop, uniform):
        self.loop, self.uniform = loop, uniform
        self.ctx, self.kinds = loop.ctx, _Kinds(loop)
        self.init, self.active = _initial(loop)
        # Rows not running compute on a running row's values unless nothing can fail.
        self.stand_in = not masking.total_loop(loop)
        # Lists the body writes past the end of: each row's length when it finishes.
        self.written = [k for k in self.kinds.lists if self.kinds.change[k] == "writes"]

    def _from_outside(self, k, v, active, rows_of):
        """What the body sees of value ``v`` read from outside the loop."""
        loop, kinds = self.loop, self.kinds
        if isinstance(v, ragged_items.RaggedList):
            return _masked_view(loop, kinds, k, v, active, reads=rows_of)
        if v.is_stacked and v.dtype == tf.variant:
            return _masked_view(loop, kinds, k, v, active, self.uniform, rows_of)
        if not v.is_stacked or rows_of is None:
            return v
        if isinstance(v, Ragged):
            return ragged_rows(v, rows_of)
        if k in kinds.viewed:  # read by item: no copy of the whole value
            return RowView(base=v.tensor, rows=rows_of)
        return Stacked(tensor=tf.gather(v.tensor, rows_of))

    def layouts(self, active, values, rows_of=None):
        """The layout values body and condition see: each row's values, or those of the
        row it stands in for (``rows_of``)."""
        loop, kinds = self.loop, self.kinds

        def rows(value):  # a row's values, or those of the row it stands in for
            return value if rows_of is None else tf.gather(value, rows_of)

        outside = [self._from_outside(k, v, active, rows_of) for k, v in enumerate(loop.inputs)]
        mine = [_masked_view(loop, kinds, k, v, active, self.uniform, rows_of)
                if k in kinds.lists
                else loop.ragged_value(k, rows(v), rows_of) if k in loop.ragged_values
                else rows(v) if k in kinds.rows else v
                for k, v in zip(loop.carried, values)]
        return loop.layouts(mine, outside=outside)

    def body(self, active, values, finals, ran, sizes):
        """One step on every row; the rows not active keep their values."""
        loop, kinds, ctx = self.loop, self.kinds, self.ctx
        rows_of = total_ops.stand_ins(active) if self.stand_in else None
        converted = ctx.convert_function(loop.body, self.layouts(active, values, rows_of))
        outs = [_list_carry(loop, converted, k) if k in kinds.lists else
                carried_out(loop, converted, k, stand_ins=rows_of) for k in loop.carried]
        check = ctx.convert_function(loop.cond, self.layouts(active, outs, rows_of))
        still = tf.logical_and(truth(check.stacked(0)), active)
        new = [select_rows(active, o, v) if k in kinds.rows else o
               for k, o, v in zip(loop.carried, outs, values)]
        done = tf.logical_and(active, tf.logical_not(still))
        by_k = dict(zip(loop.carried, new))
        finals = [select_rows(done, tf.broadcast_to(by_k[k][None], tf.shape(f)), f)
                  for f, k in zip(finals, kinds.changing)]
        ran = ran + tf.cast(active, tf.int32)
        sizes = [tf.where(done, _LENGTH(input_handle=_handle(by_k[k])), s)
                 for k, s in zip(self.written, sizes)]
        still = with_effects([still], _effects(converted, check))[0]
        return still, new, finals, ran, sizes

    def run(self, parallel):
        """The while loop: its variables, the invariant variables' final values per row,
        the steps each row ran and the lengths of the lists written past their end."""
        loop, kinds, ctx, init = self.loop, self.kinds, self.ctx, self.init
        n = tf.TensorShape([None])  # converted ops may lose the static row count
        shapes = (n, [n.concatenate(loop.body.inputs[k].shape) if k in kinds.rows
                      else loop.shape_of(k) for k in loop.carried],
                  [n.concatenate(loop.body.inputs[k].shape) for k in kinds.changing], n,
                  [n for _ in self.written])
        start = (self.active, [init[k] for k in loop.carried],
                 [ctx.stack(loop.inputs[k]) for k in kinds.changing],
                 tf.zeros([ctx.n], tf.int32),
                 [tf.fill([ctx.n], _LENGTH(input_handle=_handle(init[k])))
                  for k in self.written])
        before = len(tf.compat.v1.get_default_graph().get_operations())
        _, values, finals, ran, sizes = tf.while_loop(
            lambda active, *_: tf.reduce_any(active), self.body, start,
            parallel_iterations=parallel, maximum_iterations=loop.maximum_iterations,
            shape_invariants=shapes)
        if ctx.nested and kinds.lists:
            mark = attr_value_pb2.AttrValue(b=True)
            for op in tf.compat.v1.get_default_graph().get_operations()[before:]:
                if op.type in ("While", "StatelessWhile"):
                    op._set_attr(UNIFORM_LISTS, mark)  # pylint: disable=protected-access
        return values, finals, ran, sizes

    def results(self, values, finals, ran, sizes):
        """The loop's outputs; its lists as each row's own items (unless ``uniform``)."""
        loop, kinds, ctx = self.loop, self.kinds, self.ctx
        for value, k in zip(values, loop.carried):
            if k not in loop.ragged_lists:
                value.set_shape(loop.shape_of(k))
        for final, k in zip(finals, kinds.changing):
            final.set_shape(ctx.stacked_shape(loop.body.inputs[k].shape))
        layouts = loop.layouts(values)
        for k, final in zip(kinds.changing, finals):
            layouts[k] = Stacked(tensor=final)
        sizes = dict(zip(self.written, sizes))
        if self.uniform:  # lists stay as the loop leaves them (see run_masked)
            return layouts
        for k in kinds.lists:
            layouts[k] = self._list_layout(k, layouts[k], sizes.get(k), ran)
        return layouts

    def _list_layout(self, k, value, length, ran):
        """The output of list ``k`` (``length``: each row's length when it finished, for
        a list written past its end; ``ran``: the steps each row ran)."""
        loop, ctx = self.loop, self.ctx
        pushed = pushed_by(loop.body, k)
        handle = value.tensor
        if pushed is not None:
            # Each row's items: those the list started with, then the pushes of the
            # steps it ran (XLA's list length is the reserved size, not the count).
            start = (0 if starts_empty(ctx.op.inputs[k])
                     else _LENGTH(input_handle=_handle(self.init[k])))
            length = start + pushes_per_step(loop.body, k) * ran
        if k in loop.ragged_lists:
            return ragged_item_views.result(
                *value.pair(), loop.ragged_lists[k], lengths=length,
                change=self.kinds.change[k], pushed=pushed, n=ctx.n, nested=ctx.nested,
                own=loop.lengths.get(k),
                element_shapes=loop.element_shapes.get(k))
        if pushed is not None and k not in self.kinds.records:
            handle = right_align(handle, length, pushed, pushed_parts(loop.body, k))
        return _list_result(loop, self.kinds, k, handle, length)


def masked_lists_refused(loop):
    """Why the masked loop cannot count the items of a list the body pushes to, or
    (under XLA) grow a list the body writes past the end of, or None."""
    kinds = _Kinds(loop)
    for k in kinds.lists:
        if loop.ctx.compiled and kinds.change[k] == "writes":
            # (each row's list grows to its own length: a resize, which XLA cannot
            # compile; TensorFlow's own loop drops such writes under XLA)
            return ("under XLA, a TensorArray of dynamic size (a tensor list the body "
                    "writes past its end) in a loop with per-iteration trip counts; give "
                    "it a fixed size that covers every write, or run without jit_compile")
        if pushed_by(loop.body, k) is None:
            continue
        if pushes_per_step(loop.body, k) is None:
            return "a tensor list the body pushes to a varying number of times per step"
        if loop.ctx.compiled and not starts_empty(loop.ctx.op.inputs[k]):
            return ("under XLA, a tensor list pushed to in a loop with per-iteration trip "
                    "counts that does not start empty")
    return None
