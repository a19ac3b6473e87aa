"""The walk: convert a body graph op by op, in topological order.

Each body tensor is mapped to a layout value. Per op, in small steps: gather the input
layouts; re-emit an op unchanged when its inputs are all invariant and it is stateless;
otherwise dispatch to the registered converters (best first) and, when none takes it,
to the fallback loop. Control dependencies of the body are kept: an op whose body
counterpart had control inputs is created after their conversions.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import warnings
from typing import Sequence

import tensorflow as tf
from tensorflow.python.framework import ops

from pfor_core import (collectives, custom, emit, empty, fallback, messages, patterns, results,
                       shapes, uniform_or_loop, unrolled)
from pfor_core.context import ConvertContext
from pfor_core.options import Options
from pfor_core.errors import ConversionError, Decline, FallbackWarning
from pfor_core.layout import (Invariant, Layout, Stacked, View, broadcast_invariant, pattern_of,
                              per_iteration)
from pfor_core.ragged import Ragged, Unranked

_MAYBE_COLLECTIVE = frozenset({"Identity", "PlaceholderWithDefault"})

# Conditionals: with a stacked selector (input 0) only some iterations run a branch.
_SELECTS = dict.fromkeys(["If", "StatelessIf", "Case", "StatelessCase"],
                         "a tf.cond or tf.switch_case whose predicate differs between "
                         "iterations")

# Ops the walk itself handles: identity-like plumbing.
PASS_THROUGH = frozenset({"Identity", "IdentityN", "StopGradient", "PreventGradient",
                           "Snapshot"})




@dataclasses.dataclass
class Reported:
    """What one conversion (with the conversions of the functions it calls) has
    warned about already: each is reported once."""

    fallbacks: set = dataclasses.field(default_factory=set)  # op types
    broken: set = dataclasses.field(default_factory=set)  # (pack, seq) of converters


@dataclasses.dataclass(kw_only=True)
class OpRecord:
    """What happened to one body op (``explain`` shows these)."""

    op_type: str
    name: str
    how: str  # "invariant", "converter", "custom", "pass-through", "fallback", "input"
    converter: str = ""
    pack: str = ""
    version: str = ""
    stacked: bool = False
    ragged: bool = False  # an output's shape differs between iterations
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class Chunks:
    """What the conversion of one chunk (``parallel_iterations``) knows of them all."""
    total: tf.Tensor  # iterations of all chunks together (int32 scalar)
    # One int64 [2] draw made before the chunks run, for randomness="same": random ops
    # seed their shared draw from it, so that every chunk draws the same values.
    seed: tf.Tensor | None = None


class Conversion:
    """One conversion of a body graph for a chunk of iterations.

    ``indices`` holds the iteration numbers of this chunk (``start + range(n)``).
    """

    def __init__(self, *, registry, options: Options, indices: tf.Tensor, start, n,
                 n_static: int | None, records: list | None = None,
                 chunks: Chunks | None = None, reported: "Reported | None" = None):
        self.registry = registry
        self.options = options
        self.indices = indices
        self.start = start
        self.n = n
        self.n_static = n_static
        self.chunks = chunks  # None, or the chunks this conversion is one of
        self.chunked = chunks is not None  # iterations converted in several chunks
        self.body_index = None  # the body's loop-index tensor (set by convert_body)
        self.trial = False  # only finding layouts (see child)
        # Why not every iteration runs what this converts, e.g. "a tf.cond whose
        # predicate differs between iterations" (collectives refuse then), or "".
        self.partial = ""
        self._child_partial = ""
        self.scratch: dict = {}
        self.records = records if records is not None else []
        self.side_effects: list[tf.Operation] = []  # outer ops of converted stateful ops
        self.reported = reported if reported is not None else Reported()
        # Shared by the whole tree of child conversions: output layouts that trial
        # conversions found, by function and input layouts (context.py), so that a
        # body nested in several loops is converted on trial once per layout of its
        # inputs, not once per enclosing trial; and how often each graph was converted.
        self.trial_layouts: dict = {}
        self.conversions: collections.Counter = collections.Counter()

    # -- entry points -------------------------------------------------------------
    def convert_body(self, body) -> list[Layout]:
        inputs = {id(body.index): Stacked(tensor=self.indices)}
        self.body_index = body.index
        graph = ops.get_default_graph()
        for external, internal in body.captures:
            inputs[id(internal)] = Invariant(tensor=_known_value(external, graph))
        return self._convert(body.graph, inputs, body.outputs,
                             list(body.graph.control_outputs))

    def convert_subgraph(self, graph, input_layouts: Sequence[Layout], outputs=None):
        if len(input_layouts) != len(graph.inputs):
            raise ValueError(f"convert_graph: {len(graph.inputs)} inputs expected, "
                             f"got {len(input_layouts)}")
        inputs = {id(t): v for t, v in zip(graph.inputs, input_layouts)}
        outputs = list(graph.outputs if outputs is None else outputs)
        return self._convert(graph, inputs, outputs, list(getattr(graph, "control_outputs", [])))

    def convert_op(self, op, layouts: Sequence[Layout]) -> list[Layout]:
        """One body op (stateless, no control inputs) for the given input layouts."""
        return self._dispatch(op, list(layouts))

    def child(self, positions=None, *, trial: bool = False) -> "Conversion":
        """A conversion for the same loop, or for the iterations at ``positions``
        (int32 vector of rows), whose side effects its caller attaches itself (it may
        emit into another graph, e.g. a branch function). A trial conversion only finds
        layouts: it keeps no records, never warns or raises for a fallback, and stands
        in for an op that would fall back with stacked placeholders (the real
        conversion, with the layouts found, reports what still falls back)."""
        options, records = self.options, self.records
        if trial or self.trial:
            records = []
        if positions is None:
            indices, n, n_static = self.indices, self.n, self.n_static
        else:
            indices = tf.gather(self.indices, positions)
            n, n_static = tf.size(positions, out_type=tf.int32), None
        child = Conversion(registry=self.registry, options=options, indices=indices,
                           start=self.start, n=n, n_static=n_static, records=records,
                           chunks=self.chunks, reported=self.reported)
        child.trial = trial or self.trial
        child.body_index = self.body_index
        child.partial = self.partial or self._child_partial
        child.trial_layouts, child.conversions = self.trial_layouts, self.conversions
        return child

    # -- the walk -----------------------------------------------------------------
    def _convert(self, graph, inputs: dict, outputs: list, must_run: list) -> list[Layout]:
        self.conversions[graph.name] += 1
        values: dict[int, list[Layout]] = {}
        done: dict[int, list[tf.Operation]] = {}  # outer ops that complete a body op
        order, controlled = _ops_to_convert(graph, outputs, must_run)
        for op in order:
            if len(op.outputs) == 1 and id(op.outputs[0]) in inputs:
                # A graph input, or a small eager tensor the body captured by value (a
                # Const standing for it): the caller's tensor, so gradients reach it.
                values[id(op)] = [inputs[id(op.outputs[0])]]
                continue
            if op.type == "Placeholder":
                if id(op.outputs[0]) not in inputs:
                    raise ConversionError(
                        f"pfor: the body reads placeholder '{op.name}', which is neither the "
                        "loop index nor a captured tensor (deferred captures are not "
                        "supported); pass the value in as a tensor instead.")
                values[id(op)] = [inputs[id(op.outputs[0])]]
                continue
            layouts = [values[id(t.op)][t.value_index] for t in op.inputs]
            deps = [o for c in op.control_inputs for o in done.get(id(c), ())]
            track = op._is_stateful or id(op) in controlled  # pylint: disable=protected-access
            values[id(op)], created = self._convert_op(op, layouts, deps, track)
            if track:
                done[id(op)] = created
                if op._is_stateful:  # pylint: disable=protected-access
                    self.side_effects.extend(created)
        return [values[id(t.op)][t.value_index] for t in outputs]

    def _convert_op(self, op, layouts, deps, track):
        graph = ops.get_default_graph()
        if not deps and not track:
            return self._dispatch(op, layouts), ()
        controller = graph.control_dependencies(deps)
        with controller:
            result = self._dispatch(op, layouts)
        created = [o for o in controller._seen_nodes  # pylint: disable=protected-access
                   if isinstance(o, tf.Operation)]
        tensors = [_storage(v) for v in result]
        created.extend(t.op for t in tensors
                       if not isinstance(t, ops.EagerTensor) and t.graph is graph)
        return result, created

    def _dispatch(self, op, layouts: list[Layout]) -> list[Layout]:
        pattern = pattern_of(layouts)
        stateful = op._is_stateful  # pylint: disable=protected-access
        if (not per_iteration(pattern) and not stateful and op.type not in _MAYBE_COLLECTIVE
                and not self.registry.sees_invariant(op.type)):
            return self._reemit(op, layouts)
        site = custom.site_of(op)
        if site is not None:  # a @pf.custom_vectorization call
            result = self._custom(site, op, layouts, pattern)
            if result is not None:
                return result
        kind = collectives.kind_of(op)
        if kind is not None:
            if "R" in pattern:
                raise ConversionError(
                    f"pfor: pf.{kind} (op '{op.name}') of a value whose shape differs "
                    "between iterations: a collective combines values of one shape; pad "
                    "them to one size first.")
            self._record(op, "collective")
            return [collectives.convert_collective(kind, layouts[0], self)]
        if empty.is_hidden(op):  # a nested pfor's run-time iters: keep it hidden
            return (self._pass_through(op, layouts, pattern) if per_iteration(pattern)
                    else self._reemit(op, layouts))
        if op.type in PASS_THROUGH:
            return self._pass_through(op, layouts, pattern)
        reasons, faults = [], []
        self._child_partial = _SELECTS.get(op.type, "") if pattern[:1] in "SR" else ""
        if any(isinstance(v, Unranked) for v in layouts):
            result = self._unranked_elementwise(op, layouts)
            if result is not None:
                return result
        # Converters never see an unranked value (only _as_uniform's stacked form of it).
        entries = () if any(isinstance(v, Unranked) for v in layouts) else (
            self.registry.candidates(_dispatch_type(op), pattern))
        try:
            for entry in entries:
                result = self._try(entry, op, layouts, pattern, reasons, faults)
                if result is not None:
                    self._report_faults(op, faults)
                    _refine_shapes(result, op)
                    self._record(op, "converter", entry=entry,
                                 stacked=any(v.is_stacked for v in result),
                                 ragged=any(isinstance(v, (Ragged, Unranked)) for v in result))
                    return result
            result = self._as_uniform(op, layouts, reasons, faults)
            if result is not None:
                return result
        finally:
            self._child_partial = ""
        return self._fall_back(op, layouts, pattern, reasons, faults)

    def _unranked_elementwise(self, op, layouts):
        """An elementwise op (converted by ``patterns.elementwise`` or, with scalar
        invariant operands, ``patterns.broadcasting``) of values of unknown rank that
        share their shapes (one value, or values made from one by such ops): the same
        op on their elements, every iteration's shape kept, so the ops after a
        ``tf.numpy_function`` need no run-time choice and no loop. None otherwise."""
        unranked = [v for v in layouts if isinstance(v, Unranked)]
        others = [v for v in layouts if not isinstance(v, Unranked)]
        first = unranked[0]
        same = all(v.items is first.items and v.starts is first.starts
                   and v.item_starts is first.item_starts for v in unranked)
        if (not same or len(op.outputs) != 1 or op._is_stateful  # pylint: disable=protected-access
                or not all(isinstance(v, Invariant) and v.shape.rank == 0 for v in others)):
            return None
        pattern = "".join("S" if isinstance(v, Unranked) else v.code for v in layouts)
        entries = self.registry.candidates(_dispatch_type(op), pattern)
        if not entries or entries[0].fn not in (patterns.elementwise, patterns.broadcasting):
            return None
        with ops.name_scope(_scope(op)):
            new = emit.recreate(op, [v.flat if isinstance(v, Unranked) else v.tensor
                                     for v in layouts])
        self._record(op, "converter", entry=entries[0], stacked=True, ragged=True)
        return [unranked[0].with_flat(new.outputs[0])]

    def _as_uniform(self, op, layouts, reasons, faults):
        """An op with no converter for its ragged inputs, all usually of one shape
        (``ragged.usually_uniform``), or with an input of unknown rank (``Unranked``):
        converted with them stacked, checked at run time to have one shape (or, where
        the loop may run, ``_uniform_or_loop``). None when that does not apply or
        nothing converts it."""
        ragged = [v for v in layouts if isinstance(v, (Ragged, Unranked))]
        unranked = any(isinstance(v, Unranked) for v in ragged)
        if not ragged or not unranked and not all(v.usually_uniform for v in ragged):
            return None
        if uniform_or_loop.applies(self, op, layouts):
            return self._uniform_or_loop(op, layouts, ragged, reasons, faults)
        if unranked and not any(t.dtype == tf.variant for t in op.outputs):
            return None  # made by the loop, which takes it again (a tensor list it cannot)
        with ops.name_scope(_scope(op)):
            message = (messages.unranked_uniform if unranked else messages.usually_uniform)(
                op, self.registry.library_modules)
            layouts = [v.uniform(message) if isinstance(v, (Ragged, Unranked)) else v
                       for v in layouts]
        pattern = pattern_of(layouts)
        for entry in self.registry.candidates(_dispatch_type(op), pattern):
            result = self._try(entry, op, layouts, pattern, reasons, faults)
            if result is not None:
                self._report_faults(op, faults)
                _refine_shapes(result, op)
                self._record(op, "converter", entry=entry, stacked=True,
                             ragged=any(isinstance(v, (Ragged, Unranked)) for v in result))
                return result
        return None

    def _uniform_or_loop(self, op, layouts, ragged, reasons, faults):
        """``_as_uniform`` where the loop may run: converted when every iteration's
        inputs have one shape, else the fallback loop (uniform_or_loop.py). None when
        no converter takes the stacked inputs (the op then just falls back)."""
        pattern = "".join(Stacked.code if isinstance(v, (Ragged, Unranked)) else v.code
                          for v in layouts)
        entries = self.registry.candidates(_dispatch_type(op), pattern)
        if not entries:
            return None
        forms = uniform_or_loop.forms(op)
        if any(isinstance(v, Unranked) for v in ragged):
            reasons.append("its inputs' ranks are unknown (a tf.numpy_function's or "
                           "tf.py_function's output without set_shape?) and their shapes "
                           "may differ between iterations: converted when they agree at "
                           "run time, else this loop")
        else:
            reasons.append("its inputs' shapes differ between iterations: converted when "
                           "they agree at run time, else this loop")

        def converted():
            # (Inside the branch: an unranked value's stacked form holds only there.)
            stacked = [v.as_stacked() if isinstance(v, (Ragged, Unranked)) else v
                       for v in layouts]
            for entry in entries:
                result = self._try(entry, op, stacked, pattern, reasons, faults)
                if result is not None:
                    self._report_faults(op, faults)
                    return uniform_or_loop.flatten(result, forms, self.stack)
            # None took them after all: the loop in both branches
            result = fallback.run_sequentially(op, layouts, self, reasons)
            return uniform_or_loop.flatten(result, forms, self.stack)

        def looped():
            result = self._fall_back(op, layouts, pattern_of(layouts), reasons, faults)
            return uniform_or_loop.flatten(result, forms, self.stack)

        with ops.name_scope(_scope(op)):
            same = tf.reduce_all(tf.stack([v.is_uniform() for v in ragged]))
            flat = tf.cond(same, converted, looped)
        result = uniform_or_loop.unflatten(flat, op, forms, self.n_static)
        self.records[-1].ragged = any(isinstance(v, (Ragged, Unranked)) for v in result)
        return result

    def _custom(self, site, op, layouts, pattern):
        if not per_iteration(pattern):  # the same in every iteration: the original runs once
            return self._reemit(op, layouts)
        if site.rule.layout_rule is not None:  # the core's own rules: layouts in and out
            if any(v.is_stacked for v in layouts[site.n_args:]):
                return None  # it closes over per-iteration values: op by op
            with ops.name_scope(_scope(op)):
                result = site.rule.layout_rule(layouts[:site.n_args], self)
            if result is None:
                return None
            _refine_shapes(result, op)
            self._record(op, "custom", stacked=True)
            self.records[-1].converter = site.rule.layout_rule_text
            self.records[-1].ragged = any(isinstance(v, Ragged) for v in result)
            return result
        if "R" in pattern:  # rules take stacked values: the original runs per iteration
            return self._fall_back(op, layouts, pattern, ["a custom rule takes no ragged input"])
        result = custom.convert(site, op, layouts, self)
        _refine_shapes(result, op)
        self._record(op, "custom", stacked=True)
        self.records[-1].converter = f"custom_vectorization({site.rule.name})"
        return result

    def stack(self, value: Layout) -> tf.Tensor:
        """A layout value as a stacked tensor ``[n, ...]``."""
        return value.tensor if value.is_stacked else broadcast_invariant(
            value.tensor, self.n, self.n_static)

    def _reemit(self, op, layouts):
        with ops.name_scope(_scope(op)):
            outs = emit.copy_op(op, [v.tensor for v in layouts])
        self._record(op, "invariant")
        result = [Invariant(tensor=t) for t in outs]
        _refine_shapes(result, op)
        return result

    def _pass_through(self, op, layouts, pattern):
        """Identity-like ops keep their input layouts; re-emitted only to carry
        control dependencies."""
        self._record(op, "pass-through", stacked=per_iteration(pattern),
                     ragged="R" in pattern)
        layouts = [_seen_through(v, t, self.registry.library_modules)
                   for v, t in zip(layouts, op.outputs)] + list(
            layouts[len(op.outputs):])
        if not op.control_inputs:
            return list(layouts[: len(op.outputs)])
        with ops.name_scope(_scope(op)):
            outs = emit.copy_op(op, [_storage(v) for v in layouts])
        return [_holding(v, t) for v, t in zip(layouts, outs)]

    def _try(self, entry, op, layouts, pattern, reasons, faults):
        """The converter's checked result, or None when it declines or is broken (it
        raised or returned a bad value: recorded in ``faults``, the op goes on to the
        next converter)."""
        if not entry.takes(layouts):  # a view converter, and no input is its view
            return None
        ctx = ConvertContext(op, layouts, pattern, self)
        try:
            with ops.name_scope(_scope(op)):
                result = entry.call(ctx)
        except ConversionError:
            raise  # a deliberate refusal (e.g. of a nested op), not a fault
        except shapes.RankUnknown as err:  # a shape helper needed a static rank: decline
            reasons.append(f"{entry.name}: {err}")
            return None
        except Exception as err:  # a converter fault is contained and reported
            what = f"raised {type(err).__name__}: {err}"
            reasons.append(f"{entry.name} raised {type(err).__name__}")
            faults.append((entry, what, err))
            return None
        if result is NotImplemented or isinstance(result, Decline):
            reasons.append(f"{entry.name}: {getattr(result, 'reason', 'declined')}")
            return None
        values, wrong = results.check(op, result, self.n_static)
        if values is None:
            reasons.append(f"{entry.name} returned a bad value")
            faults.append((entry, wrong, None))
        return values

    def _report_faults(self, op, faults) -> None:
        """Warn once per conversion about each converter that was skipped as broken."""
        if self.trial:
            return
        for entry, what, _ in faults:
            key = (entry.pack, entry.seq)
            if key in self.reported.broken:
                continue
            self.reported.broken.add(key)
            modules = self.registry.library_modules
            warnings.warn(messages.broken_converter(entry, op, what, modules), RuntimeWarning,
                          stacklevel=messages.user_stacklevel(modules))

    def _fall_back(self, op, layouts, pattern, reasons, faults=()):
        if self.trial:  # ragged where the fallback loop makes it so (fallback.py)
            ragged = not unrolled.compiled()  # (under XLA: rows of one static shape)
            return [_fallback_stand_in(t, self.n_static, ragged) for t in op.outputs]
        mode = self.options.fallback
        if mode == "error":
            message = messages.conversion_error(op, layouts, reasons, faults, registry=self.registry)
            raise ConversionError(message) from next((e for _, _, e in faults if e), None)
        collectives.refuse_in_fallback(op)
        self._report_faults(op, faults)
        if mode == "warn" and op.type not in self.reported.fallbacks:
            self.reported.fallbacks.add(op.type)
            warnings.warn(messages.fallback_warning(op, layouts, reasons, registry=self.registry),
                          FallbackWarning,
                          stacklevel=messages.user_stacklevel(self.registry.library_modules))
        self._record(op, "fallback", stacked=True, reason="; ".join(reasons) or
                     messages.no_converter(op, layouts, self.registry))
        record = self.records[-1]
        result = fallback.run_sequentially(op, layouts, self, reasons)
        record.ragged = any(isinstance(v, (Ragged, Unranked)) for v in result)
        return result

    def _record(self, op, how, *, entry=None, stacked=False, ragged=False, reason=""):
        rec = OpRecord(op_type=op.type, name=op.name, how=how, stacked=stacked,
                       ragged=ragged, reason=reason)
        if entry is not None:
            rec.converter, rec.pack, rec.version = entry.name, entry.pack, entry.version
        self.records.append(rec)


def _known_value(tensor, graph):
    """``tensor``, or a constant of its value when it is a small integer tensor whose
    value is known in its graph but would not be in ``graph`` (a function body, such as
    that of the chunk loop, captures it as a placeholder): converters read shapes, axes
    and sizes from such values to take their static paths. Integers only, so no
    gradient is cut off."""
    if isinstance(tensor, ops.EagerTensor) or tensor.graph is graph or not (
            tensor.dtype.is_integer or tensor.dtype == tf.bool):
        return tensor
    value = tf.get_static_value(tensor)
    if value is None or value.size > _SMALL:
        return tensor
    return tf.constant(value, tensor.dtype)


_SMALL = 64


def _stand_in(original, n_static):
    """A stacked placeholder like a body tensor, for trial conversions."""
    if original.dtype == tf.variant:  # a stacked list keeps a scalar handle
        return tf.raw_ops.Placeholder(dtype=tf.variant, shape=[])
    shape = tf.TensorShape([n_static]).concatenate(original.shape)
    return tf.raw_ops.Placeholder(dtype=original.dtype, shape=shape)


def _fallback_stand_in(original, n_static, ragged=True):
    """What the fallback loop makes of an op's output, for trial conversions: ragged
    along the dimensions the body does not know (an output of known rank), unranked
    (of unknown rank), else stacked."""
    value = _stand_in(original, n_static)
    shape = original.shape
    if not ragged or original.dtype == tf.variant or shape.is_fully_defined():
        return Stacked(tensor=value)
    if shape.rank is None:
        return Unranked.of(*(tf.raw_ops.Placeholder(dtype=dtype, shape=[None])
                             for dtype in (original.dtype, tf.int32, tf.int32, tf.int32)))
    return Ragged(padded=value, lengths=tuple(
        tf.raw_ops.Placeholder(dtype=tf.int32, shape=[n_static]) if d is None else None
        for d in shape.as_list()))


def _seen_through(value, tensor, library_modules):
    """A ragged or unranked value as seen through an identity-like body ``tensor``,
    whose static shape may say more (``Ragged.fitted``, ``Unranked.ranked``)."""
    if isinstance(value, Unranked) and tensor.shape.rank is not None:
        return value.ranked(tensor.shape, messages.rank_differs(tensor, library_modules))
    return value.fitted(tensor.shape) if isinstance(value, Ragged) else value


def _holding(value, tensor):
    """``value`` holding ``tensor`` instead: a view keeps its other fields (a tensor
    list's rows, ...); one that is no dataclass becomes a plain stacked value."""
    if isinstance(value, Unranked):
        return value.with_flat(tensor)
    if isinstance(value, Ragged):
        return value.with_padded(tensor)
    if "__dataclass_fields__" in type(value).__dict__:  # a view's own dataclass fields
        return dataclasses.replace(value, tensor=tensor)
    return Stacked(tensor=tensor) if value.is_stacked else Invariant(tensor=tensor)


def _storage(value) -> tf.Tensor:
    """The tensor a layout value is stored in (a ragged value's padded tensor, an
    unranked one's elements)."""
    if isinstance(value, Unranked):
        return value.flat
    return value.padded if isinstance(value, Ragged) else value.tensor


def _dispatch_type(op) -> str:
    """The registry key of ``op``: its type, except for a legacy function call
    (``function.Defun``, e.g. the loops ``tf.nn.ctc_loss`` builds), whose op type is
    the called function's name: it dispatches as a ``PartitionedCall``."""
    if op.type.startswith(("Stateful", "Partitioned")) or not emit.find_function(
            op.graph, op.type):
        return op.type
    return "PartitionedCall"


def _scope(op) -> str:
    return op.name


def _refine_shapes(result, op) -> None:
    """Give converted values the static shapes the body knew. Shapes can get lost on
    the way (e.g. a value popped from a tensor list carried through a loop), and
    converters of later ops need ranks."""
    for value, original in zip(result, op.outputs):
        if isinstance(value, (Ragged, Unranked, View)):  # padded; a view's storage is its own
            continue
        t = value.tensor
        if isinstance(t, ops.EagerTensor) or t.dtype == tf.variant:
            continue
        shape = original.shape
        if value.is_stacked:
            shape = tf.TensorShape([None]).concatenate(shape)
        if t.shape != shape and t.shape.is_compatible_with(shape):
            t.set_shape(shape)


def _ops_to_convert(graph, outputs, must_run):
    """Body ops needed by ``outputs`` or side effects, in topological order.

    Also returns the ids of ops that are control inputs of needed ops.
    """
    needed: set[int] = set()
    controlled: set[int] = set()
    stack = [t.op for t in outputs] + list(must_run)
    stack.extend(op for op in graph.get_operations()
                 if op._is_stateful and op.type != "Placeholder")  # pylint: disable=protected-access
    while stack:
        op = stack.pop()
        if id(op) in needed:
            continue
        needed.add(id(op))
        stack.extend(t.op for t in op.inputs)
        for c in op.control_inputs:
            controlled.add(id(c))
            stack.append(c)
    return _topological(graph, needed), controlled


def _topological(graph, needed: set[int]) -> list:
    """The needed ops, producers first, otherwise in creation order. Creation order
    alone is not enough: a while loop's gradient adds inputs (accumulators) to the
    forward While op after it was created."""
    ops_ = [op for op in graph.get_operations() if id(op) in needed]
    rank = {id(op): k for k, op in enumerate(ops_)}
    waiting = {id(op): 0 for op in ops_}
    users: dict[int, list] = {}
    for op in ops_:
        for pred in [t.op for t in op.inputs] + list(op.control_inputs):
            waiting[id(op)] += 1
            users.setdefault(id(pred), []).append(op)
    ready = [(rank[id(op)], op) for op in ops_ if not waiting[id(op)]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, op = heapq.heappop(ready)
        order.append(op)
        for user in users.get(id(op), ()):
            waiting[id(user)] -= 1
            if not waiting[id(user)]:
                heapq.heappush(ready, (rank[id(user)], user))
    return order
