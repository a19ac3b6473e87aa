"""What running ops on rows that should not run them needs: ops that give a result for
any input values (``total``), the effects such a row would repeat (``effects``), and
the rows it computes on instead (``stand_ins``). Both a masked while loop
(loops/masking.py) and a masked conditional (conditionals/cond.py) run so."""

from __future__ import annotations

import tensorflow as tf

from pfor_controlflow.functions import function_graph


# Ops that give a result for any input values: no error, no effect, no shape that
# depends on values.
_TOTAL = frozenset("""
    Abs Acos Acosh Add AddN AddV2 Asin Asinh Atan Atan2 Atanh BiasAdd Cast Ceil Const Cos
    Cosh Digamma DivNoNan Elu Equal Erf Erfc Exp Expm1 Floor Greater GreaterEqual Identity
    Inv IsFinite IsInf IsNan LeakyRelu Less LessEqual Lgamma Log Log1p LogicalAnd
    LogicalNot LogicalOr MatMul BatchMatMulV2 Maximum Minimum Mul MulNoNan Neg NotEqual
    OnesLike Pack Placeholder Rank Reciprocal Relu Relu6 Rint Round Rsqrt Select SelectV2
    Selu Shape Sigmoid Sign Sin Sinh Size Softplus Softsign Sqrt Square SquaredDifference
    Squeeze StopGradient Sub Tan Tanh Unpack Xdivy Xlogy ZerosLike
""".split())


# Total for floating point only: integer division by zero fails.
_FLOAT_ONLY = frozenset("Div FloorDiv FloorMod Mod Pow RealDiv TruncateDiv TruncateMod".split())


# Total when their other inputs (axes, shapes, bounds) are constants: which inputs
# are the data.
_DATA_INPUTS = {
    "ExpandDims": (0,), "Reshape": (0,), "Transpose": (0,), "Tile": (0,), "Slice": (0,),
    "StridedSlice": (0,), "BroadcastTo": (0,), "Sum": (0,), "Prod": (0,), "Max": (0,),
    "Min": (0,), "Mean": (0,), "All": (0,), "Any": (0,), "ArgMax": (0,), "ArgMin": (0,),
    "Split": (1,), "SplitV": (0,), "ConcatV2": None,  # None: all but the last
}


# Stateful ops that are harmless on finished rows: reads, and random draws (a finished
# row's draw is thrown away; draws stay independent).
_HARMLESS = frozenset("""
    Placeholder ReadVariableOp VarHandleOp VariableShape ResourceGather ResourceGatherNd RandomUniform
    RandomUniformInt RandomStandardNormal TruncatedNormal ParameterizedTruncatedNormal
    Multinomial RandomGamma RandomPoisson RandomPoissonV2 RandomShuffle
    StatefulUniform StatefulUniformInt StatefulUniformFullInt StatefulStandardNormalV2
    StatefulTruncatedNormal RngReadAndSkip RngSkip
""".split())


def total(graph) -> bool:
    """Whether every op of ``graph`` gives a result for any input values."""
    return all(total_op(op) for op in graph.get_operations())


def stand_ins(runs: tf.Tensor) -> tf.Tensor:
    """Per row, the row whose values it computes on when everything runs masked: its
    own where ``runs`` (a bool vector) holds, else the first row that runs. A row that
    should not run then computes what a row that runs computes, which cannot fail,
    loop forever or read out of range where the loop itself does not (the rows that
    do not run are thrown away after)."""
    size = tf.size(runs, out_type=tf.int32)
    # (argmax of no rows fails; with no row running, row 0 computes on its own values)
    first = tf.argmax(tf.concat([tf.cast(runs, tf.int32), [1]], 0), output_type=tf.int32)
    first = tf.minimum(first, tf.maximum(size - 1, 0))
    return tf.where(runs, tf.range(size), first)


def effects(*graphs) -> list[str]:
    """The op types of ``graphs`` (and the functions they call) whose effect a row that
    should not run them would repeat: a finished row of a masked loop, or a row that
    takes another branch of a masked conditional."""
    found: set[str] = set()
    for graph in graphs:
        _collect_effects(graph, found, seen=set())
    return sorted(found)


def refusal(ctx, what: str, repeated) -> str:
    """Why ``what`` (run masked because XLA or an outer pfor needs static shapes) is
    declined: it would repeat the effects ``repeated``."""
    where = "under XLA" if ctx.compiled else "inside an outer pfor"
    return (f"{what} {where} must run masked, which would repeat the effects of "
            f"{', '.join(repeated)} for iterations that should not run them; move them "
            "out of it, or run without jit_compile / the outer pfor")


def total_op(op) -> bool:
    """Whether ``op`` gives a result for any input values."""
    if op.type in _TOTAL:
        return True
    if op.type in _FLOAT_ONLY:
        return op.outputs[0].dtype.is_floating
    if op.type in _DATA_INPUTS:
        data = _DATA_INPUTS[op.type] or range(len(op.inputs) - 1)
        return all(_constant(t) for k, t in enumerate(op.inputs) if k not in data)
    return False


def _constant(tensor) -> bool:
    while tensor.op.type == "Identity":
        tensor = tensor.op.inputs[0]
    return tensor.op.type == "Const"


def downstream(graph, sources):
    """The ops of ``graph`` that depend on any of ``sources`` (tensor refs)."""
    reached = set(sources)
    for op in graph.get_operations():  # in creation order, which is topological
        if any(t.ref() in reached for t in op.inputs):
            reached.update(t.ref() for t in op.outputs)
            yield op


def _collect_effects(graph, found, seen):
    for op in graph.get_operations():
        called = _called_functions(op)
        for name in called:
            if name not in seen:
                seen.add(name)
                inner = function_graph(op, name)
                if inner is not None:
                    _collect_effects(inner, found, seen)
        if op._is_stateful and not called and op.type not in _HARMLESS:  # pylint: disable=protected-access
            found.add(op.type)


def _called_functions(op) -> list[str]:
    names = []
    for value in op.node_def.attr.values():
        if value.HasField("func"):
            names.append(value.func.name)
        elif value.HasField("list"):
            names.extend(f.name for f in value.list.func)
    return names
