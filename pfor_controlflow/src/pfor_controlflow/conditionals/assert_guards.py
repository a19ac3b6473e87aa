"""Assert guards: the ``If`` that ``tf.debugging.assert_*`` builds in a graph (a branch
that passes its inputs through, and one that fails an ``Assert`` of the predicate).

It fails when any iteration's predicate is false, whatever the layouts of the data it
would print, so it takes ragged data too (values a ``tf.RaggedTensor`` built in the
body validates): one ``Assert`` of all predicates, with the guard's messages; its
outputs are its inputs passed through. Conditionals of other shapes are left to
cond.py.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_controlflow.conditionals.cond import branch_graphs, truth

_PASSING = frozenset({"NoOp", "Placeholder", "Identity"})


def _passed_through(graph):
    """For each output of a branch graph, the index of the input it passes on (None if
    it is computed)."""
    inputs = {id(t): k for k, t in enumerate(graph.inputs)}
    found = []
    for t in graph.outputs:
        while t.op.type == "Identity":
            t = t.op.inputs[0]
        found.append(inputs.get(id(t)))
    return found


def _guard(ctx):
    """The Assert op of an assert guard (failing exactly when the predicate is false),
    or a reason why this conditional is not one."""
    graphs = branch_graphs(ctx)
    if ctx.op_type not in ("If", "StatelessIf") or graphs is None:
        return "not an If with its branch functions"
    passing, failing = graphs
    if any(op.type not in _PASSING for op in passing.get_operations()):
        return "the then-branch computes"
    asserts = [op for op in failing.get_operations() if op.type == "Assert"]
    if len(asserts) != 1 or any(op.type not in _PASSING | {"Assert", "Const"}
                                for op in failing.get_operations()):
        return "the else-branch does more than one Assert"
    through = [_passed_through(g) for g in graphs]
    if None in through[0] or through[0] != through[1]:
        return "an output is not an input passed through"
    condition = asserts[0].inputs[0]
    position = next((k for k, t in enumerate(failing.inputs) if t is condition), None)
    if position is None or ctx.op.inputs[1 + position] is not ctx.op.inputs[0]:
        return "the Assert's condition is not the predicate"
    return asserts[0], through[0]


def convert_assert_guard(ctx):
    """An assert guard with any inputs: one Assert of every iteration's predicate."""
    found = _guard(ctx)
    if isinstance(found, str):
        return ctx.decline(found)
    assert_op, through = found
    messages = [t.op.get_attr("value") for t in assert_op.inputs[1:] if t.op.type == "Const"]
    texts = [tf.make_ndarray(m).item().decode() for m in messages
             if m.dtype == tf.string.as_datatype_enum and not m.tensor_shape.dim]
    pred = ctx.inputs[0]
    holds = truth(ctx.stack(pred))
    holds = tf.reduce_all(holds) if pred.is_stacked else holds
    if ctx.n_static != 0:
        tf.debugging.Assert(holds, [" ".join(texts) or "assertion failed"])
    return [ctx.inputs[1 + k] for k in through]
