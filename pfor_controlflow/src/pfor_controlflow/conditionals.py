"""Conditionals: If, StatelessIf and Case (what tf.cond and tf.switch_case emit).

An invariant predicate (or branch index) keeps one conditional: every iteration takes
the same branch, so each branch function is converted for the whole loop. A trial
conversion of every branch first finds which outputs any branch makes stacked; those
are stacked in every branch, so the branches agree.

A stacked predicate partitions the iterations: the rows that take branch k are found
with ``where``, the branch is converted for those rows only (inside a ``tf.cond`` on
their count, so a branch no iteration takes does not run), and ``dynamic_stitch`` puts
the rows back in order.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core import Invariant, Stacked
from pfor_controlflow.functions import function_graph, is_handle, scratch_graph, with_effects


def _branch_graphs(ctx):
    if ctx.op_type in ("If", "StatelessIf"):
        names = [ctx.attr("then_branch").name, ctx.attr("else_branch").name]
    else:
        names = [f.name for f in ctx.attr("branches")]
    graphs = [function_graph(ctx.op, name) for name in names]
    return None if any(g is None for g in graphs) else graphs


def truth(pred: tf.Tensor) -> tf.Tensor:
    """A predicate as If reads it: numbers are true when nonzero, strings when not empty."""
    if pred.dtype == tf.bool:
        return pred
    if pred.dtype == tf.string:
        return tf.strings.length(pred) > 0
    return tf.not_equal(pred, tf.zeros([], pred.dtype))


def _stacked_outputs(ctx, graphs, inputs) -> list[bool]:
    """Which outputs some branch makes stacked (found by trial conversions)."""
    stacked = [False] * len(ctx.op.outputs)
    for graph in graphs:
        with scratch_graph().as_default():
            trial = ctx.convert_function(graph, inputs, trial=True)
        stacked = [s or v.is_stacked for s, v in zip(stacked, trial.outputs)]
    return stacked


def convert_invariant_selector(ctx):
    graphs = _branch_graphs(ctx)
    if graphs is None:
        return ctx.decline("a branch function is not in the graph")
    inputs = list(ctx.inputs[1:])
    stacked = _stacked_outputs(ctx, graphs, inputs)

    def branch(graph):
        def run():
            converted = ctx.convert_function(graph, inputs)
            outs = [converted.stacked(k) if s else v.tensor
                    for k, (s, v) in enumerate(zip(stacked, converted.outputs))]
            return with_effects(outs, converted.side_effects)
        return run

    selector = ctx.inputs[0].tensor
    if ctx.op_type in ("Case", "StatelessCase"):
        outs = tf.switch_case(selector, [branch(g) for g in graphs])
    else:
        outs = tf.cond(truth(selector), branch(graphs[0]), branch(graphs[1]))
    return [Stacked(tensor=t) if s else Invariant(tensor=t)
            for t, s in zip(outs[:-1], stacked)]


def _branch_of_rows(ctx, count: int) -> tf.Tensor:
    """Per row, the index of the branch it takes (Case runs the last branch for an
    index out of range)."""
    selector = ctx.inputs[0].tensor
    if ctx.op_type not in ("Case", "StatelessCase"):
        return tf.where(truth(selector), 0, 1)
    in_range = tf.logical_and(selector >= 0, selector < count)
    return tf.where(in_range, selector, count - 1)


def _run_rows(ctx, graph, positions):
    """The branch converted for the rows at ``positions``: stacked outputs."""
    def run():
        rows = [Stacked(tensor=tf.gather(v.tensor, positions)) if v.is_stacked else v
                for v in ctx.inputs[1:]]
        converted = ctx.convert_function(graph, rows, positions=positions)
        outs = [converted.stacked(k) for k in range(len(converted.outputs))]
        return with_effects(outs, converted.side_effects)

    shapes = ctx.output_shapes
    if not all(s.is_fully_defined() for s in shapes):
        return run()[:-1]  # rows of no static shape: run it, even on no rows

    def empty():
        return [tf.zeros([0] + s.as_list(), t.dtype)
                for s, t in zip(shapes, ctx.op.outputs)] + [tf.constant(0)]

    return tf.cond(tf.size(positions) > 0, run, empty)[:-1]


def convert_stacked_selector(ctx):
    if any(v.is_stacked and is_handle(v) for v in ctx.inputs[1:]) or any(
            t.dtype in (tf.variant, tf.resource) for t in ctx.op.outputs):
        return ctx.decline("per-iteration tensor lists or resources cross the branches")
    graphs = _branch_graphs(ctx)
    if graphs is None:
        return ctx.decline("a branch function is not in the graph")
    taken = _branch_of_rows(ctx, len(graphs))
    positions, parts = [], []
    for k, graph in enumerate(graphs):
        rows = tf.cast(tf.where(tf.equal(taken, k))[:, 0], tf.int32)
        positions.append(rows)
        parts.append(_run_rows(ctx, graph, rows))
    results = []
    for j, original in enumerate(ctx.op.outputs):
        value = tf.dynamic_stitch(positions, [part[j] for part in parts])
        value.set_shape(tf.TensorShape([ctx.n_static]).concatenate(original.shape))
        results.append(Stacked(tensor=value))
    return results


def register(registry):
    ops = ["If", "StatelessIf", "Case", "StatelessCase"]
    registry.add(ops, convert_invariant_selector, inputs="U*...")
    registry.add(ops, convert_stacked_selector, inputs="S*...")
