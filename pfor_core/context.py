"""The one object a converter receives: ``ctx``.

Everything a converter needs (the op, its attrs, its inputs as layout values, the loop
length, helpers, per-conversion scratch space) is an attribute or method here; new needs
become new attributes, never new converter parameters.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, Sequence

import tensorflow as tf

from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_util

from pfor_core import collectives
from pfor_core import emit as _emit
from pfor_core import shapes
from pfor_core.errors import Decline
from pfor_core.layout import Invariant, Layout, Stacked, broadcast_invariant



class Conversion(Protocol):
    """What the context reads from the walk's conversion (``walk.Conversion``): described
    here, not imported, so that the context sits below the walk."""

    n: tf.Tensor
    n_static: int | None
    start: tf.Tensor
    indices: tf.Tensor
    body_index: tf.Tensor | None
    chunked: bool
    chunks: object  # walk.Chunks or None
    trial: bool
    options: object  # options.Options
    scratch: dict
    side_effects: list
    trial_layouts: dict
    records: list

    def stack(self, value: Layout) -> tf.Tensor: ...

    def convert_subgraph(self, graph, inputs: Sequence[Layout], outputs=None) -> list[Layout]: ...

    def child(self, positions, *, trial: bool = False) -> "Conversion": ...




@dataclasses.dataclass(frozen=True)
class StrategyRecord:
    """A choice a converter made between ways of running an op (``pf.explain`` lists
    them in ``report.loops``): e.g. a while loop run "masked" or "compacted"."""

    op_type: str
    name: str
    strategy: str
    reason: str


class ConvertContext:
    """The conversion of one body op, as seen by a converter: the op, its inputs as
    layout values, the loop, and helpers. A converter is ``fn(ctx)``."""

    __slots__ = ("op", "inputs", "pattern", "_conversion")

    def __init__(self, op: tf.Operation, inputs: Sequence[Layout], pattern: str,
                 conversion: "Conversion"):
        self.op = op
        self.inputs = tuple(inputs)
        self.pattern = pattern
        self._conversion = conversion

    # -- the op -------------------------------------------------------------------
    @property
    def op_type(self) -> str:
        """The body op's type string, e.g. ``"MatMul"``."""
        return self.op.type

    def attr(self, name: str):
        """An attr of the body op, as ``op.get_attr`` returns it."""
        return self.op.get_attr(name)

    def has_attr(self, name: str) -> bool:
        """Whether the body op has the attr ``name``."""
        return name in self.op.node_def.attr

    @property
    def output_shapes(self) -> list[tf.TensorShape]:
        """Per-iteration static shapes of the op's outputs."""
        return [t.shape for t in self.op.outputs]

    @property
    def output_dtypes(self) -> list[tf.DType]:
        """Dtypes of the op's outputs."""
        return [t.dtype for t in self.op.outputs]

    # -- the loop -----------------------------------------------------------------
    @property
    def n(self) -> tf.Tensor:
        """Number of iterations converted together (int32 scalar tensor)."""
        return self._conversion.n

    @property
    def n_static(self) -> int | None:
        """``n`` as a Python int when known statically, else None."""
        return self._conversion.n_static

    @property
    def n_dim(self):
        """``n`` as a dimension: a Python int where static, else the int32 scalar
        tensor (what the shape helpers take in shape lists: ``[ctx.n_dim, 3]``)."""
        n_static = self._conversion.n_static
        return n_static if n_static is not None else self._conversion.n

    def stacked_shape(self, shape) -> tf.TensorShape:
        """The static shape ``[n_static] + shape`` of a stacked value whose iterations
        have shape ``shape`` (for ``set_shape``, ``ensure_shape``, shape invariants)."""
        return tf.TensorShape([self.n_static]).concatenate(shape)

    @property
    def loop_start(self) -> tf.Tensor:
        """Index of the first iteration in this chunk (int32 scalar)."""
        return self._conversion.start

    @property
    def chunked(self) -> bool:
        """Whether the iterations are converted in several chunks (parallel_iterations):
        this conversion then runs once per chunk, on ``n`` iterations at a time."""
        return self._conversion.chunked

    @property
    def chunk_seed(self) -> tf.Tensor | None:
        """With ``randomness="same"`` and chunks: an int64 ``[2]`` seed drawn once before
        the chunks run, the same in every chunk (a random op seeds its one shared draw
        from it); None otherwise."""
        chunks = self._conversion.chunks
        return chunks.seed if chunks is not None else None

    @property
    def chunk_is_last(self) -> tf.Tensor | bool:
        """Whether this chunk is the last one (a boolean scalar tensor; True when the
        iterations are not chunked)."""
        chunks = self._conversion.chunks
        if chunks is None:
            return True
        return self._conversion.start + self._conversion.n >= chunks.total

    @property
    def in_body_loop(self) -> bool:
        """Whether the op sits in a ``tf.while_loop`` (``tf.scan``, ...) of the body: it
        then runs several times per iteration."""
        return "while" in collectives.placement(self.op.graph)[1]

    @property
    def iterations_static(self) -> int | None:
        """How many iterations there are in all (every chunk together) as a Python int
        where static, else None: the loop index takes the values ``range(it)``."""
        chunks = self._conversion.chunks
        if chunks is None:
            return self._conversion.n_static
        total = tf.get_static_value(chunks.total)
        return None if total is None else int(total)

    def is_body_index(self, tensor) -> bool:
        """Whether a tensor of the body (one of ``op.inputs`` or their producers') is
        the loop index the body was traced with (for converters reasoning about the
        values a bound can take)."""
        return tensor is self._conversion.body_index

    def is_loop_index(self, value: Layout) -> bool:
        """Whether ``value`` is the loop index itself (row j holds start + j)."""
        return value.is_stacked and value.tensor is self._conversion.indices

    @property
    def compiled(self) -> bool:
        """Whether the converted ops are being compiled by XLA (``jit_compile=True``):
        ops with data-dependent output shapes cannot be used then."""
        return control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph())

    @property
    def nested(self) -> bool:
        """Whether the converted ops land in the body of an outer ``pfor``, which will
        vectorize them again: ops whose output shapes depend on the data (``where``)
        would then be ragged across the outer iterations."""
        graph = ops.get_default_graph()
        while graph is not None:
            if getattr(graph, collectives.BODY_MARK, False):
                return True
            graph = getattr(graph, "outer_graph", None)
        return False

    @property
    def trial(self) -> bool:
        """Whether this conversion only finds the layouts of the op's outputs (into a
        graph that is thrown away, see ``convert_function``): a converter may then
        return stand-ins of the right layouts instead of building the computation."""
        return self._conversion.trial

    @property
    def options(self):
        """The user's options for this conversion (fallback, randomness, ...)."""
        return self._conversion.options

    @property
    def scratch(self) -> dict:
        """Per-conversion scratch space shared by all converters."""
        return self._conversion.scratch

    def report_strategy(self, strategy: str, reason: str) -> None:
        """Record the way this op runs and why, for ``pf.explain`` (``report.loops``);
        nothing for a trial conversion."""
        if not self._conversion.trial:
            self._conversion.records.append(StrategyRecord(
                op_type=self.op.type, name=self.op.name, strategy=strategy, reason=reason))

    # -- helpers ------------------------------------------------------------------
    def stacked(self, k: int) -> tf.Tensor:
        """Input ``k`` as a stacked tensor ``[n, ...]``, tiling an invariant one
        (the last resort: prefer code that keeps invariant inputs as they are)."""
        return self.stack(self.inputs[k])

    def dims(self, value) -> list:
        """Dimensions of a stacked value (or stacked tensor): ints where static,
        scalar tensors where not, axis 0 taken from ``n`` (cheap to infer)."""
        tensor = value.tensor if isinstance(value, (Stacked, Invariant)) else value
        return shapes.dims(tensor, self.n)

    def stack(self, value) -> tf.Tensor:
        """A layout value as a stacked tensor ``[n, ...]``: a stacked one as it is (a
        view its ``tensor``), an invariant one (or a plain tensor, taken as invariant)
        tiled. The one way to tile: keep it for where nothing cheaper exists."""
        if not isinstance(value, (Stacked, Invariant)):
            return broadcast_invariant(value, self.n, self.n_static)
        return self._conversion.stack(value)

    def emit(self, *inputs, op_type: str | None = None, attrs: dict | None = None,
             dtypes: Sequence[tf.DType] | None = None) -> list[tf.Tensor]:
        """Emit a copy of the body op on new input tensors; returns its outputs.

        ``attrs`` overrides attrs of the original op (values as Python values or
        ``AttrValue`` protos).
        """
        return _emit.copy_op(self.op, list(inputs), op_type=op_type, attrs=attrs, dtypes=dtypes)

    def emit_stacked(self, *inputs, op_type: str | None = None, attrs: dict | None = None,
                     dtypes: Sequence[tf.DType] | None = None) -> list[Stacked]:
        """``emit`` with every output wrapped as ``Stacked``: for an op whose inputs
        already carry the iteration axis where the kernel expects it. A converter may
        return the list as it is (also for a one-output op)."""
        outs = self.emit(*inputs, op_type=op_type, attrs=attrs, dtypes=dtypes)
        return [Stacked(tensor=t) for t in outs]

    def check(self, condition, message: str, data=(), *, tensor: tf.Tensor) -> tf.Tensor:
        """``tensor``, ordered after a run-time check that ``condition`` (a boolean
        scalar tensor, or a Python bool known now) holds; otherwise the run fails with
        an ``InvalidArgumentError`` whose text names the op and says ``message``
        (followed by ``data``).

        For validation a converter's rewrite would lose: an out-of-range index that the
        loop's kernel rejects may, once offset per iteration, land in another
        iteration's block of the batched op and be silently accepted there.
        """
        if condition is True:
            return tensor
        text = f"pfor: {self.op.type} (op {self.op.name}): {message}"
        return _emit.checked(tensor, tf.constant(False) if condition is False else condition,
                       [text, *data])

    def decline(self, reason: str) -> Decline:
        """Return this to decline: ``return ctx.decline("stacked filter")``."""
        return Decline(reason)

    def convert_graph(self, graph, inputs: Sequence[Layout], outputs=None) -> list[Layout]:
        """Convert a function body (e.g. a branch of a conditional) with the same loop.

        ``inputs`` are layout values for ``graph.inputs`` in order; returns layout values
        for ``outputs`` (default ``graph.outputs``).
        """
        return self._conversion.convert_subgraph(graph, inputs, outputs)

    def convert_function(self, graph, inputs: Sequence[Layout], *, positions=None,
                         trial: bool = False, outputs=None) -> "Converted":
        """Convert a function body into the current graph, which may be another
        function's (a branch of ``tf.cond``, a ``tf.while_loop`` body).

        With ``positions`` (an int32 vector of rows of this loop), only those
        iterations are converted: stacked ``inputs`` then have ``size(positions)``
        rows. Unlike ``convert_graph``, side effects are returned, not attached: the
        caller makes the function's outputs depend on them. ``trial=True`` converts
        only to learn the output layouts (into a graph that is thrown away).
        ``outputs``: the tensors of ``graph`` to convert (default ``graph.outputs``);
        ops that none of them needs are not converted.
        """
        child = self._conversion.child(positions, trial=trial)
        if not trial:
            outputs = child.convert_subgraph(graph, inputs, outputs)
            return Converted(outputs=outputs, side_effects=list(child.side_effects),
                             n=child.n, n_static=child.n_static)
        # A trial's output layouts depend only on the function and its inputs' layouts:
        # found once per conversion (a loop nested in loops is tried in every trial of
        # theirs), stand-ins of those layouts afterwards.
        wanted = list(graph.outputs if outputs is None else outputs)
        key = (id(graph), tuple(id(t) for t in wanted), positions is None,
               tuple(_signature(v) for v in inputs))
        found = child.trial_layouts.get(key)
        if found is None:
            values = child.convert_subgraph(graph, inputs, wanted)
            found = child.trial_layouts[key] = (graph, [_kind(v) for v in values])
        stand_ins = [kind(t, child.n_static) if callable(kind) else
                     _stand_in(t, kind, child.n_static) for t, kind in zip(wanted, found[1])]
        return Converted(outputs=stand_ins, side_effects=[], n=child.n, n_static=child.n_static)

    def stacked_value(self, tensor) -> Stacked:
        """``Stacked(tensor=tensor)``."""
        return Stacked(tensor=tensor)

    def invariant_value(self, tensor) -> Invariant:
        """``Invariant(tensor=tensor)``."""
        return Invariant(tensor=tensor)

    def with_inputs(self, inputs: Sequence[Layout]) -> "ConvertContext":
        """The same op and loop with other input values (e.g. views materialized)."""
        return ConvertContext(self.op, inputs, self.pattern, self._conversion)


class Converted:
    """The result of ``ctx.convert_function``: output layouts, the ops that carry
    side effects, and the number of iterations it was converted for."""

    __slots__ = ("outputs", "side_effects", "n", "n_static")

    def __init__(self, *, outputs, side_effects, n, n_static):
        self.outputs = outputs
        self.side_effects = side_effects
        self.n = n
        self.n_static = n_static

    def stacked(self, k: int) -> tf.Tensor:
        """Output ``k`` as a stacked tensor for this conversion's iterations."""
        value = self.outputs[k]
        return value.tensor if value.is_stacked else broadcast_invariant(
            value.tensor, self.n, self.n_static)



def _signature(value) -> tuple:
    """What a trial conversion's result may depend on in an input layout value."""
    shape = value.shape
    return (type(value).__name__, value.is_stacked, value.dtype,
            None if shape.rank is None else tuple(shape.as_list()))


def _kind(value):
    """What a trial keeps of an output's layout: whether it is stacked, or the value's
    own ``stand_in(original, n_static)`` for a view that makes placeholders of its
    type (one whose converters must know it in the trials, e.g. a list held as two)."""
    maker = getattr(value, "stand_in", None)
    return maker if callable(maker) else value.is_stacked


def _stand_in(original, stacked: bool, n_static) -> Layout:
    """A placeholder with the layout a trial found for the function output ``original``
    (a stacked tensor list keeps a scalar handle, see layout.py)."""
    if not stacked:
        return Invariant(tensor=tf.raw_ops.Placeholder(dtype=original.dtype,
                                                       shape=original.shape))
    if original.dtype == tf.variant:
        return Stacked(tensor=tf.raw_ops.Placeholder(dtype=tf.variant, shape=[]))
    shape = tf.TensorShape([n_static]).concatenate(original.shape)
    return Stacked(tensor=tf.raw_ops.Placeholder(dtype=original.dtype, shape=shape))

