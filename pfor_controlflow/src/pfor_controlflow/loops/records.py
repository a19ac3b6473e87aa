"""What a loop with per-iteration trip counts records for its gradient loop, that it
may keep as one list for all rows: the same value pushed every step for every row (a
weight or a shape the body reads, ``same_items``), or the handle of a list the loop
carries, which the gradient reads back for its length and element shape only (a
tf.cond's record of a TensorArray it reads, ``shapes_record``)."""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Invariant
from pfor_controlflow import total_ops
from pfor_controlflow.functions import branch_functions, function_graph
from pfor_controlflow.lists import handles
from pfor_controlflow.loops.loop_vars import length_change, only_popped, pushes_per_step


def same_items(loop, k) -> bool:
    """Whether tensor list ``k``, invariant where it enters a loop with per-iteration
    trip counts, stays one list for all rows: each step pushes the same value for every
    row (made from what the loop reads from outside only; a gradient loop's accumulator
    of a weight or a shape) and only loops that pop it read the result, or the loop
    only pops it (every running row pops the same item) and nothing reads the result.
    Rows then hold their own numbers of the same items, which only pops can tell."""
    ctx, body = loop.ctx, loop.body
    if k not in loop.carried or type(loop.inputs[k]) is not Invariant:
        return False
    change = length_change(body, k)
    if change == "pops":
        return _unread(ctx.op.outputs[k])
    if change != "pushes" or pushes_per_step(body, k) != 1:
        return False
    out = body.outputs[k]
    while out.op.type == "Identity":
        out = out.op.inputs[0]
    return (_step_independent(body, out.op.inputs[1], [body.inputs[j] for j in loop.carried])
            and _only_popped_by_loops(ctx.op.outputs[k]))


def _step_independent(body, tensor, carried) -> bool:
    """Whether ``tensor`` of ``body`` has the same value in every step: it depends on
    no carried variable (but the element shape of a list the loop carries, and the
    length of one it writes in place), and on no effect but reads of variables the
    body does not write."""
    reads, pending, seen = False, [tensor.op], set()
    carried = {t.ref() for t in carried}
    while pending:
        op = pending.pop()
        if op in seen:
            continue
        seen.add(op)
        if op.type in ("TensorListElementShape", "TensorListLength"):
            j = handles.list_source(body, op.inputs[0])
            if j is not None and handles.list_source(body, body.outputs[j]) == j and (
                    op.type == "TensorListElementShape" or length_change(body, j) == "same"):
                continue
        if any(t.ref() in carried for t in op.outputs):
            return False
        if op._is_stateful:  # pylint: disable=protected-access
            if op.type != "ReadVariableOp":
                return False
            reads = True
        pending.extend(t.op for t in op.inputs)
    return not reads or all(e == "Assert" for e in total_ops.effects(body))


def shapes_record(loop, k):
    """The carried list whose handle the body pushes onto list ``k`` each step where
    only its length and element shape are read back (a gradient's record of a
    TensorArray that a tf.cond reads, whose read's gradient makes a list of its size)
    and the body writes it in place (so neither changes between steps); else None."""
    body = loop.body
    out = body.outputs[k]
    while out.op.type == "Identity":
        out = out.op.inputs[0]
    if out.op.type != "TensorListPushBack" or out.op.inputs[1].dtype != tf.variant:
        return None
    j = handles.list_source(body, out.op.inputs[1])
    if j is None or j not in loop.carried or length_change(body, j) != "same":
        return None
    if pushes_per_step(body, k) != 1 or not loop.ctx.op.outputs[k].consumers():
        return None
    for op in loop.ctx.op.outputs[k].consumers():
        inner = function_graph(op, op.get_attr("body").name) if op.type in (
            "While", "StatelessWhile") else None
        if inner is None:
            return None
        for i, t in enumerate(op.inputs):
            if t is loop.ctx.op.outputs[k] and not (
                    only_popped(inner, i) and all(_shapes_only(p.outputs[1])
                                                   for p in _pops(inner, i))):
                return None
    return j


def _pops(body, k) -> list:
    """The TensorListPopBack ops on list ``k`` of ``body`` (through Identity)."""
    found, pending = [], [body.inputs[k]]
    while pending:
        for op in pending.pop().consumers():
            found += [op] if op.type == "TensorListPopBack" else []
            pending.append(op.outputs[0])
    return found


def _shapes_only(tensor) -> bool:
    """Whether the list ``tensor`` is read for its length and element shape only
    (also in the branches of the conditionals it enters)."""
    for op in tensor.consumers():
        if op.type == "Identity":
            if not _shapes_only(op.outputs[0]):
                return False
        elif op.type in ("If", "StatelessIf", "Case", "StatelessCase"):
            graphs = branch_functions(op)
            if graphs is None or not all(
                    _shapes_only(g.inputs[i - 1]) for i, t in enumerate(op.inputs)
                    if t is tensor and i > 0 for g in graphs):
                return False
        elif op.type not in ("TensorListLength", "TensorListElementShape", "ZerosLike"):
            return False  # (a list's zeros: as long as it, items unset or zeros alike)
    return True


def _unread(tensor) -> bool:
    """Whether no op but an Identity that nothing reads reads ``tensor``."""
    return all(op.type == "Identity" and _unread(op.outputs[0]) for op in tensor.consumers())


def _only_popped_by_loops(tensor) -> bool:
    """Whether every op that reads list ``tensor`` is a while loop that only pops it."""
    for op in tensor.consumers():
        if op.type not in ("While", "StatelessWhile"):
            return False
        body = function_graph(op, op.get_attr("body").name)
        if body is None or not all(only_popped(body, j) for j, t in enumerate(op.inputs)
                                   if t is tensor):
            return False
    return True
