"""Outputs that a chunked loop makes once, after its chunks, from small values.

Where a body output is made by one op from much smaller per-iteration inputs (a
per-example weight gradient: the outer product of an activation and an output gradient,
4 MB from 8 kB), the chunks return those inputs instead, and the op runs once after the
chunks, converted for all iterations, as in a run in one piece. The output is then
written once, by the op, instead of once in each chunk and once more into the output's
buffer (chunk_buffers.py): for output-bound bodies that second write was as costly as
the rest of the work. The op's inputs are what the chunks hold instead of its output.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from pfor_core import composites
from pfor_core.layout import Stacked, View

# Ops whose output may be far larger than their inputs (outer products), cheap to run
# on all iterations at once; Identity passes a value on unchanged.
_EXPANDERS = frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Mul",
                        "Einsum"})
_RATIO = 4  # an output at least this many times the bytes of its op's inputs


@dataclasses.dataclass(frozen=True)
class Tails:
    """``body``: the body the chunks convert (the outputs kept, then the tail ops'
    inputs); ``ops``: per original output, the op that makes it after the chunks, or
    None where the chunks return it."""

    body: object
    ops: list
    originals: list  # the original body's outputs
    kept: int  # how many of ``body.outputs`` are original outputs


def split(body) -> Tails | None:
    """The body with outputs made by expanding ops replaced by those ops' inputs, or
    None where no output is."""
    ops = [_tail_op(t) for t in body.outputs]
    if not any(ops):
        return None
    kept = [t for t, op in zip(body.outputs, ops) if op is None]
    inputs: dict = {}
    for op in ops:
        for t in op.inputs if op is not None else ():
            inputs.setdefault(t.ref(), t)
    outputs = kept + list(inputs.values())
    encoded = [composites.Encoded([t], lambda ts: ts[0], path=f"chunk output {j}")
               for j, t in enumerate(outputs)]
    return Tails(body=dataclasses.replace(body, outputs=outputs, encoded=encoded), ops=ops,
                 originals=list(body.outputs), kept=len(kept))


def _tail_op(output):
    """The op that makes ``output`` from much smaller per-iteration inputs, or None."""
    t = output
    # (An output's Identity waits for the body's effects; the op runs after the chunks
    # ran them all.)
    while t.op.type == "Identity":
        t = t.op.inputs[0]
    op = t.op
    if (op.type not in _EXPANDERS or op.control_inputs or len(op.outputs) != 1
            or op._is_stateful):  # pylint: disable=protected-access
        return None
    size = _bytes(op.outputs[0])
    sizes = [_bytes(x) for x in op.inputs]
    if size is None or None in sizes or _RATIO * sum(sizes) > size:
        return None
    return op


def _bytes(t) -> int | None:
    if t.dtype in (tf.variant, tf.resource, tf.string) or not t.shape.is_fully_defined():
        return None
    return t.shape.num_elements() * t.dtype.size


def finish(tails: Tails, parts: list, conversion) -> list:
    """The original outputs from what the chunks returned (``parts``, one per
    ``tails.body.outputs``): the tail ops converted for all iterations."""
    values = {t.ref(): p for t, p in zip(tails.body.outputs[tails.kept:], parts[tails.kept:])}
    kept = iter(parts[:tails.kept])
    outs = []
    for op, original in zip(tails.ops, tails.originals):
        if op is None:
            outs.append(next(kept))
            continue
        layouts = [Stacked(tensor=values[x.ref()]) for x in op.inputs]
        out = conversion.convert_op(op, layouts)[0]
        tensor = (out.materialize() if isinstance(out, View) else out).tensor
        tensor.set_shape(tf.TensorShape([conversion.n_static]).concatenate(original.shape))
        outs.append(tensor)
    return outs
