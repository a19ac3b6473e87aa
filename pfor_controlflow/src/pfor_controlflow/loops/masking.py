"""When a while loop with per-iteration trip counts runs masked, and when it may.

Masked (every step on all rows, finished rows keep their values) has static shapes,
which XLA and an outer ``pfor`` need, and it moves no data; the active subset
(trip_counts.py, "compacted") does only the work of the rows still running, but pays a
check every step and a compaction whenever some rows finish. Elsewhere a cost model
chooses, in nanoseconds, with ``S`` the most trips, ``T`` their sum over the ``n``
rows, ``K`` the steps at which some but not all rows finish, ``A`` the rows still
running summed over those steps, ``c`` the elements a row carries and ``w`` the body's
cost per row and step (from its ops' static shapes: a fixed part, the elements they
make, the multiply-adds of matmuls and convolutions):

    masked    = S * n * (w + SELECT_NS * c)
    compacted = S * STEP_NS + T * w + K * COMPACT_NS + A * c * MOVE_NS

(the body's per-op overheads, the same in both, cancel). The trip counts come from the
loop's initial values where its condition bounds a counter and those values are known
while converting (constants, eager tensors the body captured, or the arguments of the
eager call whose function is being traced: ``pf.vmap``, ``pf.vectorize_loops``);
otherwise they are assumed uniform in 1..PRIOR_STEPS (utilization about a half). The constants are
measured on 2 CPU cores with ``benchmarks/while_strategies.py`` (rows of 1 to 256
floats, batch 64 and 512, uniform, skewed and constant trip counts); the choice it makes
there and on the dynamic LSTM is within 10% of the better strategy.

Running a body on finished rows is only harmless when nothing in it can fail on the
values those rows hold (an index one past the end of a sequence fails a gather on the
CPU) and nothing in it has an effect (a finished row would add to a variable, print
or assert once more). The model is therefore asked only for bodies of total ops;
``total_ops.effects`` names what forbids masking where it is the only choice. Where
masking is the only choice and the body is not total, rows that should not run compute
on the values of a row that does (``total_ops.stand_ins``), so they cannot fail or run
forever. (total_ops.py, below the loops and the conditionals, holds those three: a
masked conditional needs them too.)
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from pfor_core.extend import ConversionError, Invariant, Stacked, shapes, trip_bounds
from pfor_controlflow import total_ops
from pfor_controlflow.functions import function_graph

# Measured (see the docstring), nanoseconds.
SELECT_NS = 1.0  # the masked loop's select, per carried element of a row and step
STEP_NS = 7000.0  # the subset's own work each step (which rows finished, the branch)
COMPACT_NS = 8000.0  # one compaction, beside the elements it moves
MOVE_NS = 1.0  # per element a compaction moves
ROW_NS = 10.0  # the body, per row and step: a fixed part,
ELEMENT_NS = 0.25  # per element its ops make,
MAC_NS = 0.015  # per multiply-add of its matmuls and convolutions
PRIOR_STEPS = 100  # trip counts unknown while converting: uniform in 1..PRIOR_STEPS
PRIOR_ROWS = 64  # rows, where their number is known only at run time


@dataclasses.dataclass(frozen=True)
class Choice:
    masked: bool
    reason: str


def pays(loop) -> bool:
    """Whether the masked loop is the faster and safe (``choose``)."""
    return choose(loop).masked


def choose(loop) -> Choice:
    """The cost model's choice for ``loop`` and why (computed once per loop)."""
    if getattr(loop, "_choice", None) is None:
        loop._choice = _choose(loop)  # pylint: disable=protected-access
    return loop._choice


def _choose(loop) -> Choice:
    if not total_loop(loop):
        return Choice(False, "its body may fail or have an effect on rows that finished "
                             "(ops that are not total), so it does not run them")
    carried = _carried_elements(loop)
    if carried is None:
        return Choice(False, "a carried value's shape is not static or it is a tensor list")
    row = row_cost(loop.body)
    if row is None:
        return Choice(False, "the body's cost is not known (shapes not static, or it "
                             "calls functions or loops)")
    trips, source = _trips(loop)
    n = loop.ctx.n_static or (trips.size if trips is not None else PRIOR_ROWS)
    steps, total, events, active, source = _statistics(trips, n, source)
    masked = steps * n * (row + SELECT_NS * carried)
    compacted = steps * STEP_NS + total * row + events * COMPACT_NS + active * carried * MOVE_NS
    utilization = total / max(1, steps * n)
    return Choice(masked <= compacted, (
        f"utilization {utilization:.2f} ({source}), body ~{row:.0f} ns a row and step, "
        f"{carried} carried elements a row: masked ~{masked / 1e6:.3g} ms, "
        f"compacted ~{compacted / 1e6:.3g} ms"))


def _statistics(trips, n, source):
    """(S, T, K, A) of the docstring, and where they came from."""
    if trips is None:
        steps = PRIOR_STEPS
        events = min(n, steps - 1)
        return (steps, n * (steps + 1) / 2, events, events * n / 2,
                f"trip counts not known while converting: assumed uniform in 1..{steps}")
    steps = int(trips.max(initial=0))
    ends = np.unique(trips[(trips > 0) & (trips < steps)])
    active = int(sum(np.count_nonzero(trips > e) for e in ends))
    return steps, int(trips.sum()), ends.size, active, source


def _carried_elements(loop):
    """Elements a row carries in the loop's stacked variables, or None."""
    size = 0
    for k in loop.carried:
        if not loop.stacked[k]:
            continue
        shape = loop.body.inputs[k].shape
        if loop.body.inputs[k].dtype == tf.variant or not shape.is_fully_defined():
            return None
        size += shape.num_elements()
    return size


def _trips(loop):
    """Each row's trip count (int64 [n]) where the condition bounds counters and the
    loop's initial values are known while converting, else None, and where they came
    from. The bounds are converted from the condition (for all rows: ops no output
    needs, which the runtime prunes) and their values folded: from constants and
    captured eager values, else from the arguments of the eager call being traced
    (``pf.vmap``, ``pf.vectorize_loops``: the choice is kept for the signature)."""
    bounds = trip_bounds(loop.body, loop.cond)
    if bounds is None or loop.ctx.trial:
        return None, None
    pairs = []
    for b in bounds:
        try:
            converted = loop.ctx.convert_function(loop.cond, loop.inputs, outputs=[b.bound])
        except (ConversionError, ValueError, TypeError):
            return None, None
        if converted.side_effects:
            return None, None
        pairs.append((b, loop.inputs[b.counter], converted.outputs[0]))
    for calls, source in ((False, "trip counts known before the loop"),
                          (True, "the first call's trip counts, kept for its signature")):
        trips = _counted(loop, pairs, calls)
        if trips is not None:
            return trips, source
    return None, None


def _counted(loop, pairs, calls):
    found = None
    for b, start, bound in pairs:
        start, bound = _known(start, calls), _known(bound, calls)
        if start is None or bound is None:
            return None
        reach, step = b.sign * (bound.astype(np.int64) - start.astype(np.int64)), abs(b.step)
        trips = np.maximum(0, reach // step + 1 if b.inclusive else -(-reach // step))
        found = trips if found is None else np.minimum(found, trips)
    n = loop.ctx.n_static
    if found.ndim == 0:
        return None if n is None else np.full([n], found)
    return found if found.ndim == 1 else None


def _known(value, calls):
    if type(value) not in (Stacked, Invariant) or value.tensor.dtype not in (tf.int32, tf.int64):
        return None
    known = shapes.known_value(value.tensor, calls=calls)
    return None if known is None else np.asarray(known)


_FREE = frozenset({"Placeholder", "Const", "Identity", "NoOp", "Reshape", "ExpandDims",
                   "Squeeze", "Shape", "StopGradient"})
_CONTRACTIONS = frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3",
                           "Conv2D", "Conv3D", "DepthwiseConv2dNative", "Conv1D"})


def row_cost(graph, depth: int = 0):
    """The body's cost per row and step in nanoseconds, or None where a shape is not
    static or it calls a loop or a function other than a conditional's branches."""
    cost = ROW_NS if depth == 0 else 0.0
    for op in graph.get_operations():
        if op.type in _FREE:
            continue
        if op.type in ("If", "StatelessIf"):
            branches = [function_graph(op, a) for a in ("then_branch", "else_branch")]
            parts = [None if g is None else row_cost(g, depth + 1) for g in branches]
            if any(p is None for p in parts):
                return None
            cost += sum(parts)
            continue
        if any(attr.func.name or attr.list.func for attr in op.node_def.attr.values()):
            return None
        elements = 0
        for t in op.outputs:
            if t.dtype in (tf.variant, tf.resource):
                continue
            if not t.shape.is_fully_defined():
                return None
            elements += t.shape.num_elements()
        cost += ELEMENT_NS * elements
        if op.type in _CONTRACTIONS:
            cost += MAC_NS * _multiply_adds(op, elements)
    return cost


def _multiply_adds(op, elements):
    """Multiply-adds of a matmul or convolution making ``elements`` outputs: each sums
    over the contracted axis (a matmul's inner size, a filter's window and input
    channels)."""
    a, b = op.inputs[0].shape, op.inputs[1].shape
    if op.type.startswith("Conv") or op.type.startswith("Depthwise"):
        window = b[:-1].num_elements() if op.type != "DepthwiseConv2dNative" else (
            b[:-2].num_elements())
        return elements * (window or 1)
    transposed = any(op.get_attr(k) for k in ("transpose_a", "adj_x") if k in op.node_def.attr)
    inner = a[-2] if transposed else a[-1]
    return elements * (inner or 1)


def total_loop(loop) -> bool:
    """Whether body and condition give a result for any values of the loop variables.
    The condition runs on every row in the sequential loop too: only what it computes
    from the loop variables must be total there. The body runs on rows that never
    start, so all of it must be."""
    varying = {loop.cond.inputs[k].ref() for k in loop.carried}
    return total_ops.total(loop.body) and all(
        total_ops.total_op(op) for op in total_ops.downstream(loop.cond, varying))
