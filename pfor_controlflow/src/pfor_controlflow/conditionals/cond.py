"""Conditionals: If, StatelessIf and Case (what tf.cond and tf.switch_case emit).

An invariant predicate (or branch index) keeps one conditional: every iteration takes
the same branch, so each branch function is converted for the whole loop. A trial
conversion of every branch first finds which outputs any branch makes stacked; those
are stacked in every branch, so the branches agree.

A stacked predicate partitions the iterations: the rows that take branch k are found
with ``where``, the branch is converted for those rows only (inside a ``tf.cond`` on
their count, so a branch no iteration takes does not run), and ``dynamic_stitch`` puts
the rows back in order. Under XLA and inside an outer pfor, which need static shapes,
every branch runs on all rows instead and each row keeps its own branch's outputs.

A per-iteration tensor list (a TensorArray) enters each branch as a view of that
branch's rows, so a row reads only in the branch it takes (``tf.cond(j >= 0, lambda:
ta.read(j), ...)`` never reads index -1) and writes only there (branch_lists.py).

Outputs whose shape may differ between rows (ragged in some branch, or of other sizes
in different branches) leave the branches padded, with their sizes, and come out
ragged (ragged_branches.py).
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Invariant, Stacked

_R = tf.raw_ops
from pfor_controlflow import total_ops
from pfor_controlflow.conditionals import branch_lists, optionals, ragged_branches
from pfor_controlflow.functions import (branch_functions, is_handle, scratch_graph,
                                        select_rows, stand_in, with_effects)
from pfor_controlflow.lists import handles, ragged_items
from pfor_controlflow.lists.loop_views import ListView
from pfor_controlflow.split_optional import input_spec, output_spec


def branch_graphs(ctx):
    """The function graphs of a conditional's branches, in order (None if one is not
    found)."""
    return branch_functions(ctx.op)


def truth(pred: tf.Tensor) -> tf.Tensor:
    """A predicate as If reads it: numbers are true when nonzero, strings when not empty."""
    if pred.dtype == tf.bool:
        return pred
    if pred.dtype == tf.string:
        return tf.strings.length(pred) > 0
    return tf.not_equal(pred, tf.zeros([], pred.dtype))


def _stacked_outputs(ctx, graphs, inputs) -> tuple[list[bool], dict]:
    """Which outputs some branch makes stacked, and which a tensor list of ragged
    items (ragged_items.py; output -> the items' rank), found by trial conversions."""
    stacked, ragged = [False] * len(ctx.op.outputs), {}
    for graph in graphs:
        with scratch_graph().as_default():
            trial = ctx.convert_function(graph, inputs, trial=True)
        stacked = [s or v.is_stacked for s, v in zip(stacked, trial.outputs)]
        ragged.update((k, v.rank) for k, v in enumerate(trial.outputs)
                      if isinstance(v, ragged_items.RaggedList))
    return stacked, ragged


def _same(shapes):
    """The element shapes every branch's list kept (one list made with each
    iteration's own, passed on by every branch), else None."""
    return shapes[0] if shapes and all(s is shapes[0] for s in shapes) else None


def convert_invariant_selector(ctx):
    graphs = branch_graphs(ctx)
    if graphs is None:
        return ctx.decline("a branch function is not in the graph")
    inputs = list(ctx.inputs[1:])
    stacked, ragged = _stacked_outputs(ctx, graphs, inputs)
    if ctx.trial:
        return [ragged_items.placeholder(ragged[k]) if k in ragged else
                stand_in(t, s, ctx.n_static)
                for k, (t, s) in enumerate(zip(ctx.op.outputs, stacked))]

    # Stacked outputs of no static shape leave every branch as parts, in case some
    # branch makes them ragged (ragged_branches.py); per output, per branch: its form.
    forms = {k: [None] * len(graphs) for k, t in enumerate(ctx.op.outputs)
             if stacked[k] and k not in ragged and _may_differ(t)}

    kept_shapes = {k: [] for k in ragged}  # per list: each branch's element shapes

    def out(converted, k, b):
        value = converted.outputs[k]
        if k in ragged:  # a list of ragged items in some branch: in all, as a pair
            value = ragged_items.as_ragged_list(ctx, value, ragged[k], None)
            kept_shapes[k].append(value.element_shapes)
            return value.pair()
        if k in forms:
            forms[k][b] = ragged_branches.Form.of(value)
            return ragged_branches.parts(value, lambda _: converted.stacked(k))
        if stacked[k] and optionals.is_invariant(value):  # the branch's intermediates
            return optionals.stacked_form(value, graphs[b], k, ctx.n)
        return converted.stacked(k) if stacked[k] else value.tensor

    def branch(b):
        def run():
            converted = ctx.convert_function(graphs[b], inputs)
            outs = [out(converted, k, b) for k in range(len(converted.outputs))]
            return with_effects(outs, converted.side_effects)
        return run

    selector = ctx.inputs[0].tensor
    if ctx.op_type in ("Case", "StatelessCase"):
        outs = tf.switch_case(selector, [branch(b) for b in range(len(graphs))])
    else:
        outs = tf.cond(truth(selector), branch(0), branch(1))
    return [ragged_items.from_pair(t, ragged[k], element_shapes=_same(kept_shapes[k]))
            if k in ragged else
            _chosen(t, forms[k], ctx.op.outputs[k], ctx) if k in forms else
            Stacked(tensor=t) if s else Invariant(tensor=t)
            for k, (t, s) in enumerate(zip(outs[:-1], stacked))]


def _may_differ(t) -> bool:
    """Whether a conditional's output may differ in shape between the rows of its
    branches: one of no static shape (but a known rank) that is no list or resource."""
    return (t.dtype not in (tf.variant, tf.resource) and t.shape.rank is not None
            and not t.shape.is_fully_defined())


def _chosen(parts, forms, original, ctx):
    """An invariant predicate's output from the taken branch's parts: ragged where
    some branch is (every row took the same branch, so only there)."""
    if any(f.ragged_axes for f in forms):
        return ragged_branches.chosen(parts, forms, original.shape, ctx.n_static)
    return Stacked(tensor=parts[0])


def _branch_of_rows(ctx, count: int) -> tf.Tensor:
    """Per row, the index of the branch it takes (Case runs the last branch for an
    index out of range)."""
    selector = ctx.inputs[0].tensor
    if ctx.op_type not in ("Case", "StatelessCase"):
        return tf.where(truth(selector), 0, 1)
    in_range = tf.logical_and(selector >= 0, selector < count)
    return tf.where(in_range, selector, count - 1)


class _Rows:
    """How the stacked-predicate conditional moves values between the rows of all
    iterations and those of one branch. Optionals (the intermediates tf.cond's
    gradient passes on) travel as their components: see optionals.py."""

    def __init__(self, ctx, graphs):
        self.ctx, self.graphs = ctx, graphs
        if any(t.dtype == tf.resource for t in ctx.op.outputs):
            raise ValueError("a branch returns a resource")
        self.inputs = list(ctx.inputs[1:])
        self.lists = branch_lists.BranchLists(ctx, graphs, self.inputs, masked=False)
        for k, value in enumerate(self.inputs):
            if k in self.lists.lists:
                continue
            if value.is_stacked and is_handle(value) and not isinstance(
                    value, optionals.SplitOptional):
                # An optional that came another way (popped from a while loop's
                # accumulator): the forward conditional's, so one part per branch.
                parts = tuple(input_spec([g], k) for g in graphs)
                if all(p is None for p in parts):
                    if any(g.inputs[k].consumers() for g in graphs):
                        raise ValueError("per-iteration tensor lists or resources cross "
                                         "the branches")
                    continue
                self.inputs[k] = optionals.SplitOptional(tensor=value.tensor, parts=parts)
        # Per list every branch makes (branch_lists.made_lists): its element dtype.
        self.made = {j: handles.list_dtype_near(graphs[0].outputs[j]) for j in
                     branch_lists.made_lists(graphs, ctx.op.outputs, self.lists.passes)}
        # Per variant output, per branch: the spec of its optional (None: no value).
        self.outputs = [None if j in self.lists.passes or j in self.made else
                        [output_spec(g, j) for g in graphs]
                        if t.dtype == tf.variant else None
                        for j, t in enumerate(ctx.op.outputs)]
        # Per output of no static shape, per branch: how the branch gave it (its rows
        # then leave the branch as parts, ragged_branches.py).
        self.forms = {j: [None] * len(graphs) for j, t in enumerate(ctx.op.outputs)
                      if _may_differ(t)}

    def gather(self, b, positions):
        """The conditional's inputs for branch ``b``'s rows at ``positions``."""
        rows = []
        for k, value in enumerate(self.inputs):
            if not value.is_stacked or k in self.lists.lists:
                rows.append(value)  # (lists: see ``given``)
            elif isinstance(value, optionals.SplitOptional):
                rows.append(optionals.none() if value.parts[b] is None else optionals.wrap(
                    optionals.rows_of(c, positions) for c in value.part(b)))
            elif is_handle(value):
                rows.append(optionals.none())  # read by no branch
            else:
                rows.append(ragged_branches.rows_of(value, positions))
        return self.lists.given(rows, rows=positions)

    def flatten(self, b, converted):
        """Branch ``b``'s outputs for its rows as a flat list of stacked tensors."""
        flat = []
        for j, specs in enumerate(self.outputs):
            if j in self.lists.passes:
                continue  # (the lists: last, see BranchLists.advance)
            if isinstance(converted.outputs[j], ragged_items.RaggedList):
                raise Decline("a branch makes a tensor list of items whose shape differs "
                              "between iterations under a per-iteration predicate")
            if j in self.made:
                flat.extend(branch_lists.flat_list(converted.outputs[j], self.made[j]))
            elif j in self.forms:
                value = converted.outputs[j]
                self.forms[j][b] = ragged_branches.Form.of(value)
                flat.extend(ragged_branches.parts(value, lambda _, j=j: converted.stacked(j)))
            elif specs is None:
                flat.append(converted.stacked(j))
            elif specs[b] is not None:
                flat.extend(optionals.components(converted.outputs[j], specs[b], converted.n))
        return flat + self.lists.handles_out(converted)

    def empty(self, b):
        """Branch ``b``'s flat outputs for no rows, or None without static shapes."""
        flat = []
        if self.made:
            return None  # (lists made of no static length: run it, even on no rows)
        for j, (specs, t) in enumerate(zip(self.outputs, self.ctx.op.outputs)):
            if j in self.lists.passes:
                continue
            pairs = [(t.dtype, t.shape)] if specs is None else (
                [] if specs[b] is None else list(zip(*specs[b])))
            for dtype, shape in pairs:
                if dtype == tf.variant:  # a loop's accumulator: no row reads it
                    flat.append(_R.EmptyTensorList(element_shape=-1, max_num_elements=-1,
                                                   element_dtype=tf.float32))
                    continue
                if not shape.is_fully_defined():
                    return None
                flat.append(tf.zeros([0] + shape.as_list(), dtype))
        return flat + self.lists.unchanged()

    def assemble(self, positions, flats):
        """The outputs for all rows from every branch's flat outputs."""
        flats = [iter(f) for f in flats]
        out = []
        for j, (specs, t) in enumerate(zip(self.outputs, self.ctx.op.outputs)):
            if j in self.lists.passes:
                out.append(self.lists.result(j))
                continue
            if j in self.made:
                out.append(branch_lists.stitched_list(
                    positions, [[next(f), next(f)] for f in flats]))
                continue
            if j in self.forms:
                pieces = [[next(f) for _ in range(ragged_branches.count(t.shape.rank))]
                          for f in flats]
                forms = self.forms[j]
                if ragged_branches.needs_parts(forms):
                    out.append(ragged_branches.stitch(positions, pieces, forms, t.shape,
                                                      self.ctx.n_static))
                    continue
                value = tf.dynamic_stitch(positions, [p[0] for p in pieces])
                value.set_shape(self.ctx.stacked_shape(t.shape))
                out.append(Stacked(tensor=value))
                continue
            if specs is None:
                value = tf.dynamic_stitch(positions, [next(f) for f in flats])
                value.set_shape(self.ctx.stacked_shape(t.shape))
                out.append(Stacked(tensor=value))
                continue
            pieces = [[next(f) for _ in (optionals.encoded(spec)[0] if spec else ())]
                      for f, spec in zip(flats, specs)]
            out.append(optionals.split(specs, positions, pieces, self.ctx.n))
        return out


def _run_rows(ctx, plan, b, positions):
    """Branch ``b`` converted for the rows at ``positions``: flat stacked outputs."""
    def run():
        converted = ctx.convert_function(plan.graphs[b], plan.gather(b, positions),
                                         positions=positions)
        return with_effects(plan.flatten(b, converted), converted.side_effects)

    empty = plan.empty(b)
    if empty is None:
        return run()[:-1]  # rows of no static shape: run it, even on no rows
    return tf.cond(tf.size(positions) > 0, run, lambda: empty + [tf.constant(0)])[:-1]


def _run_masked(ctx, graphs):
    """Every branch on all rows; each row keeps the outputs of the branch it takes."""
    try:
        lists = branch_lists.BranchLists(ctx, graphs, ctx.inputs[1:], masked=True)
    except ValueError as err:
        return ctx.decline(str(err))
    if any(v.is_stacked and is_handle(v) and k not in lists.lists
           for k, v in enumerate(ctx.inputs[1:])) or any(
            t.dtype == tf.resource or t.dtype == tf.variant and j not in lists.passes
            for j, t in enumerate(ctx.op.outputs)):
        where = "under XLA" if ctx.compiled else "inside an outer pfor"
        return ctx.decline(f"a per-iteration predicate {where} with resources or "
                           "gradient intermediates crossing the branches")
    repeated = total_ops.effects(*graphs)
    if repeated:
        return ctx.decline(total_ops.refusal(ctx, "a conditional with a per-iteration "
                                           "predicate", repeated))
    taken = _branch_of_rows(ctx, len(graphs))
    # Outputs of no static shape leave every branch as parts (ragged_branches.py).
    forms = {j: [None] * len(graphs) for j, t in enumerate(ctx.op.outputs) if _may_differ(t)}
    # In order: a branch's writes to a list are in the list the next branch is given.
    outs = [lists.advance(_run_on_all_rows(ctx, graph, tf.equal(taken, b), forms, b, lists))
            for b, graph in enumerate(graphs)]
    result = []
    for j, t in enumerate(ctx.op.outputs):
        if j in lists.passes:
            result.append(lists.result(j))
            continue
        j_out = j - sum(1 for p in lists.passes if p < j)  # (lists leave no piece)
        pieces = [o[j_out] for o in outs]
        if j in forms and ragged_branches.needs_parts(forms[j]):
            if ctx.nested and not ragged_branches.static_sizes(pieces):
                return ctx.decline("a per-iteration predicate inside an outer pfor with "
                                   "branch outputs of per-iteration shapes and no static "
                                   "padded size")
            result.append(ragged_branches.select(taken, pieces, forms[j], t.shape,
                                                 ctx.n_static))
            continue
        if j in forms:
            pieces = [p[0] for p in pieces]
        value = pieces[-1]
        for b in reversed(range(len(graphs) - 1)):
            value = select_rows(tf.equal(taken, b), pieces[b], value)
        result.append(Stacked(tensor=value))
    return result


def _run_on_all_rows(ctx, graph, takes, forms, b, lists):
    """A branch (``b``) converted for all rows, of which those where ``takes`` holds
    keep its outputs: stacked tensors, or the parts of those in ``forms`` (where the
    branch's form of them is recorded), then the handles of the lists it passes on
    (``lists``). Unless every op of the branch gives a result for any input, the other
    rows compute on the inputs of a row that takes it (total_ops.stand_ins), and the
    branch runs only if some row takes it: a loop in it could otherwise fail or run
    forever on inputs the branch never sees in the loop."""
    def run(inputs):
        converted = ctx.convert_function(graph, inputs)
        outs = []
        for j, value in enumerate(converted.outputs):
            if j in lists.passes:
                continue
            if j in forms:
                forms[j][b] = ragged_branches.Form.of(value)
                outs.append(ragged_branches.parts(value, lambda _, j=j: converted.stacked(j)))
            else:
                outs.append(converted.stacked(j))
        outs += lists.handles_out(converted)
        return with_effects(outs, converted.side_effects)[:-1]

    if total_ops.total(graph):
        return run(lists.given(ctx.inputs[1:], takes=takes))
    rows = total_ops.stand_ins(takes)
    inputs = [ragged_branches.rows_of(v, rows) if v.is_stacked and k not in lists.lists
              else v for k, v in enumerate(ctx.inputs[1:])]
    inputs = lists.given(inputs, takes=takes, reads=rows)
    kept = [t for j, t in enumerate(ctx.op.outputs) if j not in lists.passes]
    shapes = [tf.TensorShape([ctx.n_static]).concatenate(t.shape) for t in kept]
    if not all(s[1:].is_fully_defined() for s in shapes):
        return run(inputs)
    zeros = [tf.zeros(tf.concat([tf.reshape(ctx.n, [1]), tf.constant(s[1:].as_list(), tf.int32)],
                                0), t.dtype) for s, t in zip(shapes, kept)]
    outs = tf.cond(tf.reduce_any(takes), lambda: run(inputs),
                   lambda: zeros + lists.unchanged())
    for out, shape in zip(outs, shapes):
        out.set_shape(shape)
    return outs


def _of_masked_loop(value) -> bool:
    """Whether ``value`` is a tensor list of a per-example loop run masked: its view
    names the rows whose writes count, as the branches run masked do (a partition
    would need the rows' view instead)."""
    return isinstance(value, ListView) and value.mask is not None


def convert_stacked_selector(ctx):
    graphs = branch_graphs(ctx)
    if graphs is None:
        return ctx.decline("a branch function is not in the graph")
    if ctx.trial:  # rows take different branches: every output differs per iteration
        return [stand_in(t, True, ctx.n_static) for t in ctx.op.outputs]
    if any(isinstance(v, ragged_items.RaggedList) for v in ctx.inputs):
        return ctx.decline("a tensor list of items whose shape differs between iterations "
                           "enters a conditional whose predicate differs per iteration")
    if ctx.compiled or ctx.nested or any(_of_masked_loop(v) for v in ctx.inputs):
        return _run_masked(ctx, graphs)
    try:
        plan = _Rows(ctx, graphs)
    except ValueError as err:
        return ctx.decline(str(err))
    taken = _branch_of_rows(ctx, len(graphs))
    positions = [tf.cast(tf.where(tf.equal(taken, b))[:, 0], tf.int32)
                 for b in range(len(graphs))]
    # In order: a branch's writes to a list are in the list the next branch is given.
    flats = [plan.lists.advance(_run_rows(ctx, plan, b, rows))
             for b, rows in enumerate(positions)]
    return plan.assemble(positions, flats)


def convert_ragged_invariant_selector(ctx):
    """An invariant selector with ragged inputs (others: convert_invariant_selector)."""
    if not any(v.code == "R" for v in ctx.inputs):
        return ctx.decline("no ragged input")
    return convert_invariant_selector(ctx)


def convert_ragged_stacked_selector(ctx):
    """A stacked selector with ragged inputs (others: convert_stacked_selector)."""
    if not any(v.code == "R" for v in ctx.inputs):
        return ctx.decline("no ragged input")
    return convert_stacked_selector(ctx)
