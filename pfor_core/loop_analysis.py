"""What a ``While`` op's iterations share: the analysis behind ``pf.vectorize_loops``.

Each carried value of a loop is classified from its body graph:
- a counter: ``v + step`` with a step known statically (the value at iteration t is
  ``start + step * t``);
- invariant: passed on unchanged;
- written at a counter: a tensor list (``TensorArray``) whose only use is one
  ``TensorListSetItem`` at a counter, so iteration t writes item ``start + step * t``;
- reduced: ``v + x``, ``max(v, x)`` or ``min(v, x)`` with ``x`` not reading ``v``;
- recurrent: a list written at a counter and otherwise only read (``TensorListGetItem``,
  ``TensorListGather``) at indices computed from counters and invariants alone, so
  which earlier iterations each one reads can be computed before the loop runs;
- anything else is a dependence between iterations, and the loop stays.
The condition must bound a counter (``i < n``, conjunctions of such). The body's
stateful ops must be reads (variables, random numbers: those differ per iteration as
under pfor's ``randomness="different"``). A loop that passes with no recurrent list is
independent: its iterations can run as one pfor of its body; with recurrent lists they
can run level by level.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf
from tensorflow.python.framework import function_def_to_graph

from pfor_core import emit

# Ops with state that only read it: their results may differ per iteration (random
# numbers) or not (variables), but no iteration sees another's effect.
_READS = frozenset({
    "ReadVariableOp", "VarHandleOp", "RandomUniform", "RandomStandardNormal",
    "RandomUniformInt", "TruncatedNormal", "RandomShuffle", "RandomGamma",
    "RandomPoisson", "RandomPoissonV2", "Multinomial", "ParameterizedTruncatedNormal",
    "StatelessWhile", "StatelessIf", "StatelessCase", "While", "If", "Case",
    "PartitionedCall", "StatefulPartitionedCall", "Assert",
})
_REDUCTIONS = {"AddV2": "sum", "Add": "sum", "Maximum": "max", "Minimum": "min"}
_BOUNDS = {"Less": (1, False), "LessEqual": (1, True),
           "Greater": (-1, False), "GreaterEqual": (-1, True)}


@dataclasses.dataclass
class Plan:
    """A loop that can run vectorized. Indices are positions in the loop's carried
    values; ``written`` maps a list's position to (the counter it is written at, the
    body tensor written); ``reduced`` a value's to (kind, body tensor); ``recurrent`` a
    list's to (counter, body tensor written, the ops reading it); ``bounds`` holds
    (counter, bound tensor of the condition graph, step sign, inclusive)."""
    body: tf.Graph
    cond: tf.Graph
    counters: dict
    written: dict
    reduced: dict
    recurrent: dict
    bounds: list


@dataclasses.dataclass
class Dependent:
    reason: str


def function_graph(op: tf.Operation, attr: str):
    """The FuncGraph of the function that ``op``'s attr ``attr`` names, or None."""
    fn = emit.find_function(op.graph, op.get_attr(attr).name)
    if fn is None:
        return None
    definition = getattr(fn, "cached_definition", None) or fn.definition
    graph = getattr(fn, "graph", None)
    if graph is not None and len(graph.outputs) == len(definition.signature.output_arg):
        return graph
    with op.graph.as_default():
        return function_def_to_graph.function_def_to_graph(
            definition, include_library_functions=True)


def called_graphs(op: tf.Operation) -> list:
    """The function graphs a call, conditional or loop op runs."""
    graphs = []
    for name in emit.function_names(op):
        fn = emit.find_function(op.graph, name)
        graph = getattr(fn, "graph", None)
        if graph is not None:
            graphs.append(graph)
    return graphs


def holds_loop(graph) -> bool:
    """Whether ``graph`` or a function it calls holds a ``While``."""
    return any(op.type in ("While", "StatelessWhile") or any(map(holds_loop, called_graphs(op)))
               for op in graph.get_operations())


def source(tensor):
    """``tensor`` seen through Identity ops."""
    while tensor.op.type in ("Identity", "IdentityN") and tensor.op.inputs:
        index = tensor.value_index if tensor.op.type == "IdentityN" else 0
        tensor = tensor.op.inputs[index]
    return tensor


def _reads(tensor, target) -> bool:
    """Whether ``tensor`` depends on ``target`` (within one graph)."""
    seen, stack = set(), [tensor.op]
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        if any(t is target for t in op.inputs):
            return True
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return False


def first_effect(graph):
    """The first op of ``graph`` (or a function it runs) with effects other than reads."""
    for op in graph.get_operations():
        if op._is_stateful and op.type not in _READS:  # pylint: disable=protected-access
            return op
        for inner in called_graphs(op):
            found = first_effect(inner)
            if found is not None:
                return found
    return None


def analyze(op: tf.Operation, static_value) -> Plan | Dependent:
    """Classify the loop ``op``; ``static_value(k)`` is the static value of its k-th
    input, or None."""
    body, cond = function_graph(op, "body"), function_graph(op, "cond")
    if body is None or cond is None:
        return Dependent("its body or condition function was not found")
    effect = first_effect(body)
    if effect is not None:
        return Dependent(f"its body has an effect: {effect.type} '{effect.name}'")
    inputs, outputs = list(body.inputs), [source(t) for t in body.outputs]
    counters, written, reduced, recurrent, dependent = {}, {}, {}, {}, []
    for k, (inp, out) in enumerate(zip(inputs, outputs)):
        if out is inp:
            continue
        step = _step(out, inp, inputs, outputs, static_value)
        if step is not None:
            counters[k] = step
            continue
        dependent.append(k)
    state = [inputs[k] for k in dependent]
    for k in dependent:
        kind = (_written(inputs[k], outputs[k], inputs, counters)
                or _reduced(inputs[k], outputs[k])
                or _recurrent(inputs[k], outputs[k], inputs, counters, state))
        if kind is None:
            return Dependent(f"carried value {k} ({outputs[k].op.type} "
                             f"'{outputs[k].op.name}') depends on the previous iteration")
        {"written": written, "reduced": reduced, "recurrent": recurrent}[kind[0]][k] = kind[1:]
    bounds = _bounds(cond, counters)
    if isinstance(bounds, str):
        return Dependent(bounds)
    return Plan(body, cond, counters, written, reduced, recurrent, bounds)


@dataclasses.dataclass(frozen=True)
class TripBound:
    """One conjunct ``counter (<|<=|>|>=) bound`` of a loop's condition: the counter is
    loop variable ``counter``, moved by ``step`` each iteration; ``bound`` is the
    condition graph's tensor it is compared with, which reads no counter. ``sign`` is 1
    for an upper bound."""

    counter: int
    step: int
    bound: tf.Tensor
    sign: int
    inclusive: bool


def trip_bounds(body, cond) -> list[TripBound] | None:
    """How a loop's trip count follows from its initial values, or None: its condition
    is a conjunction of bounds on counters. The trips are, per conjunct,
    ``ceil(sign * (bound - start) / |step|)`` (``floor(...) + 1`` for an inclusive
    bound), at least 0, and the least of them over the conjuncts."""
    inputs, outputs = list(body.inputs), [source(t) for t in body.outputs]
    counters = {}
    for k, (inp, out) in enumerate(zip(inputs, outputs)):
        step = None if out is inp else _step(out, inp, inputs, outputs, lambda k: None)
        if step is not None:
            counters[k] = step
    bounds = _bounds(cond, counters)
    if isinstance(bounds, str) or not bounds:
        return None
    varying = [cond.inputs[k] for k, (i, o) in enumerate(zip(inputs, outputs)) if o is not i]
    if any(_reads_any(bound, varying) for _, bound, _, _ in bounds):
        return None  # (a bound that moves with the loop: not known from the start)
    return [TripBound(counter=k, step=counters[k], bound=bound, sign=sign,
                      inclusive=inclusive) for k, bound, sign, inclusive in bounds]


def _step(out, inp, inputs, outputs, static_value):
    """The static integer step of a counter ``out = inp +/- step``, or None."""
    if not inp.dtype.is_integer or out.op.type not in ("AddV2", "Add", "Sub"):
        return None
    a, b = (source(t) for t in out.op.inputs)
    if out.op.type == "Sub":
        sign, other = -1, (b if a is inp else None)
    else:
        sign, other = 1, (b if a is inp else a if b is inp else None)
    if other is None:
        return None
    value = tf.get_static_value(other)
    if value is None and other.op.type == "Placeholder" and any(t is other for t in inputs):
        k = [i for i, t in enumerate(inputs) if t is other][0]
        if outputs[k] is other:  # an invariant carried value: its initial value
            value = static_value(k)
    if value is None or getattr(value, "shape", ()) != () or int(value) == 0:
        return None
    return sign * int(value)


def _written(inp, out, inputs, counters):
    """("written", counter, value) for a list set at a counter and used nowhere else."""
    if inp.dtype != tf.variant or out.op.type != "TensorListSetItem":
        return None
    handle, index, value = out.op.inputs
    if source(handle) is not inp or len(inp.consumers()) != 1:
        return None
    index = source(index)
    counter = [k for k in counters if inputs[k] is index]
    if not counter or _reads(value, inp):
        return None
    return "written", counter[0], value


def _recurrent(inp, out, inputs, counters, state):
    """("recurrent", counter, value, reads) for a list set at a counter and otherwise
    only read, at indices that read no carried state."""
    if inp.dtype != tf.variant or out.op.type != "TensorListSetItem":
        return None
    handle, index, value = out.op.inputs
    counter = [k for k in counters if inputs[k] is source(index)]
    if source(handle) is not inp or not counter:
        return None
    reads = [op for op in inp.consumers() if op is not out.op]
    if not reads or any(op.type not in ("TensorListGetItem", "TensorListGather")
                        or op.inputs[0] is not inp or _reads_any(op.inputs[1], state)
                        for op in reads):
        return None
    return "recurrent", counter[0], value, reads


def _reduced(inp, out):
    """("reduced", kind, value) for ``inp (+|max|min) value`` with ``inp`` used only there."""
    kind = _REDUCTIONS.get(out.op.type)
    if kind is None or len(inp.consumers()) != 1:
        return None
    a, b = out.op.inputs
    value = b if source(a) is inp else a if source(b) is inp else None
    if value is None or _reads(value, inp) or value.shape != inp.shape:
        return None
    return "reduced", kind, value


def _bounds(cond, counters):
    """[(counter, bound, sign, inclusive)] of the condition's conjuncts, or a reason."""
    pending, bounds = [source(cond.outputs[0])], []
    inputs = list(cond.inputs)
    while pending:
        t = source(pending.pop())
        if t.op.type == "LogicalAnd":
            pending.extend(t.op.inputs)
            continue
        if t.op.type not in _BOUNDS:
            return (f"its condition is not a bound on a counter ({t.op.type} "
                    f"'{t.op.name}')")
        sign, inclusive = _BOUNDS[t.op.type]
        a, b = (source(x) for x in t.op.inputs)
        found = None
        for counter, bound, flip in ((a, b, 1), (b, a, -1)):
            k = [i for i, x in enumerate(inputs) if x is counter]
            if k and k[0] in counters and not _reads_any(bound, [inputs[c] for c in counters]):
                found = (k[0], bound, sign * flip, inclusive)
                break
        if found is None or found[2] * counters[found[0]] < 0:
            return (f"its condition ({t.op.type} '{t.op.name}') does not bound a counter "
                    "that moves towards the bound")
        bounds.append(found)
    return bounds


def _reads_any(tensor, targets) -> bool:
    return any(tensor is t or _reads(tensor, t) for t in targets)
