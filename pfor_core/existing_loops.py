"""``pf.vectorize_loops``: the loops a function already has, vectorized where their
iterations are independent, or run level by level where they read earlier ones.

The function is traced as a ``tf.function`` would trace it, and its graph is emitted
again op by op into the caller's graph (``_Replay``). A ``While`` that
``loop_analysis`` finds independent becomes one pfor of its body, one whose reads of
earlier iterations have indices known before the loop a level schedule
(``loop_rewrite``). Its body is emitted by the same replay, so inner loops are
rewritten first. Calls and conditionals whose functions hold loops are emitted through
(calls inlined, branches traced again). Every other op is copied.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import ops

from pfor_core import call_values, checks, emit, loop_analysis, loop_rewrite
from pfor_core.errors import ConversionError

_CALLS = ("PartitionedCall", "StatefulPartitionedCall")
_CONDS = ("If", "StatelessIf")
# The first eager call of a signature times the rewritten function against fn: later
# calls run fn itself where the rewrite took more than _SLOWER times as long (the
# median of _ROUNDS calls each, one where a call takes over _LONG seconds).
_SLOWER, _ROUNDS, _LONG = 1.05, 5, 0.25


@dataclasses.dataclass(frozen=True)
class LoopEntry:
    """One loop found: its op's name, ``kind`` ("map_fn" | "while_loop"), ``decision``
    ("vectorized" | "levels" | "kept") and why."""
    name: str
    kind: str
    decision: str
    reason: str
    op: object = dataclasses.field(default=None, repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class LoopsReport:
    """The loops ``vectorize_loops`` found in one trace, outer ones after inner ones."""
    loops: tuple
    # The first eager call's timing of this signature, {"rewritten": s, "original": s},
    # or None where it was not timed (inside tf.function, effects, nothing rewritten).
    measured: dict | None = None

    def __iter__(self):
        return iter(self.loops)

    def __len__(self):
        return len(self.loops)

    def __getitem__(self, k):
        return self.loops[k]

    def __str__(self) -> str:
        if not self.loops:
            return "no loops found"
        width = max(len(e.name) for e in self.loops)
        lines = [f"{'loop':{width}}  kind        decision    reason"]
        lines += [f"{e.name:{width}}  {e.kind:10}  {e.decision:10}  {e.reason}"
                  for e in self.loops]
        if self.measured:
            lines.append(f"first call: rewritten {self.measured['rewritten'] * 1e3:.3g} ms, "
                         f"fn {self.measured['original'] * 1e3:.3g} ms")
        return "\n".join(lines)


def vectorize_loops(fn, *, check=False, memory_budget=None):
    """``fn`` with its independent loops vectorized (docs/api.rst, "Optimizing existing
    loops").

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> def squares(x):
    ...     return tf.map_fn(lambda row: tf.reduce_sum(row * row), x)
    >>> fast = pf.vectorize_loops(squares)
    >>> fast(tf.constant([[1., 2.], [3., 4.]])).numpy()
    array([ 5., 25.], dtype=float32)
    >>> print(fast.explain(tf.constant([[1., 2.], [3., 4.], [5., 6.]])))
    loop       kind        decision    reason
    map/while  map_fn      vectorized  its iterations are independent
    """
    if not callable(fn):
        raise TypeError(f"vectorize_loops(fn): fn must be callable, got {type(fn).__name__}.")
    if not isinstance(check, bool):
        raise TypeError(f"vectorize_loops(check={check!r}): check must be True or False.")
    checks.options(fallback="error", randomness="different", parallel_iterations=None,
                   memory_budget=memory_budget)
    return VectorizedLoops(fn, check, memory_budget)


class VectorizedLoops:
    """The callable ``vectorize_loops`` returns: traced once per input signature.

    Eagerly, the first call of a signature is a probe: a loop that may run by levels
    reports whether its levels paid, and one that did not is kept as it is in the
    function traced for the later calls (no schedule to find again each time)."""

    def __init__(self, fn, check, memory_budget):
        self._original = tf.function(fn)
        self._check, self._budget = check, memory_budget
        self._checked, self._entries = set(), []
        self._kept = {}  # signature -> names of level loops whose levels did not pay
        self._ready = {}  # signature -> the function its later calls run
        self._measured = {}  # signature -> the first call's timing (LoopsReport.measured)
        self._eager_args = None  # (args, kwargs) of the eager call being traced
        self._functions = {frozenset(): tf.function(self._emitter(frozenset(), True),
                                                    autograph=False)}
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args, **kwargs):
        if tf.inside_function():
            return self._emitter(frozenset(), False)(*args, **kwargs)
        key = self._key(args, kwargs)
        ready = self._ready.get(key)
        if ready is not None:  # decided and checked: nothing else to do per call
            return ready(*args, **kwargs)
        kept = self._kept.get(key, frozenset())
        function = self._functions.get(kept)
        if function is None:
            function = self._functions[kept] = tf.function(self._emitter(kept, True),
                                                           autograph=False)
        self._eager_args = (args, kwargs)
        try:
            out, paid = function(*args, **kwargs)
        finally:
            self._eager_args = None
        if key not in self._kept:
            self._kept[key] = frozenset(name for name, ran in paid.items() if not bool(ran))
        if self._check:
            self._compare(out, args, kwargs, key)
        if self._kept[key] == kept:  # else the next call traces with the decision
            self._ready[key] = self._faster(function, key, args, kwargs)
        return out

    def _faster(self, function, key, args, kwargs):
        """What later calls run: the rewritten fn (``function``, whose outputs are fn's
        and the probe's), or fn itself where nothing was rewritten or the rewrite
        measured slower on this call's arguments (not timed where fn has effects,
        which the extra calls would repeat)."""
        original = self._original
        rewritten = lambda *a, **k: function(*a, **k)[0]  # noqa: E731
        if all(e.decision == "kept" for e in self._entries):
            return original  # (the same ops: replaying them only adds overhead)
        graph = original.get_concrete_function(*args, **kwargs).graph
        if loop_analysis.first_effect(graph) is not None:
            return rewritten
        original(*args, **kwargs)  # (traced outside the timing)
        took = _timings({"rewritten": rewritten, "original": original}, args, kwargs)
        self._measured[key] = took
        return original if took["rewritten"] > _SLOWER * took["original"] else rewritten

    def _key(self, args, kwargs):
        """The input signature: shapes and dtypes where every argument is a tensor (no
        lookup of a traced function per call), else the traced function's name."""
        if not kwargs and all(isinstance(a, tf.Tensor) for a in args):
            return tuple((a.dtype, tuple(a.shape)) for a in args)
        return self._original.get_concrete_function(*args, **kwargs).name

    def explain(self, *args, **kwargs) -> LoopsReport:
        """The loops found in ``fn`` for these arguments, with each decision and why."""
        key = self._key(args, kwargs)
        emit = self._emitter(self._kept.get(key, frozenset()), False)
        tf.function(emit, autograph=False).get_concrete_function(*args, **kwargs)
        entries, measured = tuple(self._entries), self._measured.get(key)
        if measured and measured["rewritten"] > _SLOWER * measured["original"]:
            why = (f"the rewritten function took {measured['rewritten'] * 1e3:.3g} ms, fn "
                   f"{measured['original'] * 1e3:.3g} ms on the first call of this "
                   "signature: later calls run fn as it is")
            entries = tuple(e if e.decision == "kept" else dataclasses.replace(
                e, decision="kept", reason=why) for e in entries)
        return LoopsReport(entries, measured)

    def _emitter(self, kept, probe):
        """A function emitting ``fn`` with its loops rewritten, the level loops named in
        ``kept`` left as they are; with ``probe``, it also returns {loop name: whether
        its levels ran} for the level loops of ``fn``'s own graph."""
        def emit(*args, **kwargs):
            concrete = self._original.get_concrete_function(*args, **kwargs)
            graph = concrete.graph
            flat = concrete.function_type.unpack_inputs(
                concrete.function_type.bind(*args, **kwargs))
            feeds = {inner.ref(): value for inner, value in zip(graph.inputs, flat)}
            feeds.update((inner.ref(), outer) for outer, inner in graph.captures)
            self._entries = []
            replay = _Replay(self._entries, self._budget, kept)
            # Traced for an eager call: choices made while converting may read its
            # values (call_values.py), kept for this signature.
            eager = self._eager_args
            pairs = () if eager is None else zip(
                tf.nest.flatten((args, kwargs), expand_composites=True),
                tf.nest.flatten(eager, expand_composites=True))
            with call_values.tracing(pairs):
                mapped = replay.graph(graph, feeds)
            out = tf.nest.map_structure(
                lambda t: mapped[t.ref()] if isinstance(t, tf.Tensor) else t,
                graph.structured_outputs, expand_composites=True)
            if not probe:
                return out
            here = ops.get_default_graph()
            return out, {name: ran for name, ran in replay.paid if ran.graph is here}
        return emit

    def _compare(self, out, args, kwargs, key):
        if key in self._checked:
            return
        want = self._original(*args, **kwargs)
        for k, (g, w) in enumerate(zip(tf.nest.flatten(out, expand_composites=True),
                                       tf.nest.flatten(want, expand_composites=True))):
            g, w = g.numpy(), w.numpy()
            if w.dtype.kind in "fc":  # sums over iterations may round differently
                finite = np.abs(w[np.isfinite(w)])
                scale = max(1.0, float(finite.max(initial=0)))
                close = g.shape == w.shape and np.allclose(g, w, rtol=1e-5, atol=1e-5 * scale,
                                                           equal_nan=True)
            else:
                close = g.shape == w.shape and np.array_equal(g, w)
            if not close:
                raise ValueError(
                    f"vectorize_loops(check=True): output {k} differs from fn's (shapes "
                    f"{g.shape} and {w.shape}); report the loops in vf.explain(...) as a bug "
                    "and call fn itself meanwhile.")
        self._checked.add(key)


class _Replay:
    """Emits a graph's ops again into the default graph, rewriting its loops."""

    def __init__(self, entries: list, budget, kept=frozenset()):
        self.entries, self.budget, self.kept = entries, budget, kept
        self.paid = []  # (loop name, whether its levels ran): see VectorizedLoops
        self.chunks = []  # api.ChunkRecord of the pfors emitted under the budget
        # Lists a vectorized loop wrote whole (fresh, every item once, in order), by the
        # new handle: stacking one again is the stacked values themselves.
        self.whole = {}

    def graph(self, graph, feeds: dict, skip=(), only=None, substitute=None) -> dict:
        """{tensor ref of ``graph``: new tensor}. Ops in ``skip``, and the ops that read
        them, are left out; with ``only`` (tensors of ``graph``), so is every op they do
        not need; ``substitute`` maps an op to a function of its new inputs (None where
        an input is left out) that emits its outputs instead."""
        mapped, made, substitute = dict(feeds), {}, substitute or {}
        needed = None if only is None else _needed(only)
        for op in graph.get_operations():
            if op.outputs and all(t.ref() in mapped for t in op.outputs):
                continue
            if needed is not None and op not in needed:
                continue
            if op in substitute:
                outs = substitute[op]([mapped.get(t.ref()) for t in op.inputs])
                mapped.update((t.ref(), o) for t, o in zip(op.outputs, outs))
                continue
            if op in skip or op.type == "Placeholder" or any(
                    t.ref() not in mapped for t in op.inputs):
                continue  # left out, an unfed argument (a loop's dropped state), or after one
            controls = [made[c] for c in op.control_inputs if c in made]
            with tf.control_dependencies(controls):
                outs = self._op(op, [mapped[t.ref()] for t in op.inputs])
            if isinstance(outs, tf.Operation):  # a copied op with no outputs
                made[op], outs = outs, []
            elif outs:
                made[op] = outs[0].op
            mapped.update((t.ref(), o) for t, o in zip(op.outputs, outs))
        return mapped

    def _op(self, op, inputs) -> list:
        if op.type == "TensorListStack" and inputs[0].ref() in self.whole:
            stacked = self.whole[inputs[0].ref()]
            if stacked.dtype == op.outputs[0].dtype:
                return [stacked]
        if op.type in ("While", "StatelessWhile"):
            return self._loop(op, inputs)
        inner = loop_analysis.called_graphs(op)
        if not any(map(loop_analysis.holds_loop, inner)):
            return _copy(op, inputs)
        if op.type in _CALLS:
            callee = loop_analysis.function_graph(op, "f")
            mapped = self.graph(callee, {t.ref(): v for t, v in zip(callee.inputs, inputs)})
            return [mapped[t.ref()] for t in callee.outputs]
        if op.type in _CONDS and op.outputs:
            branches = [loop_analysis.function_graph(op, a) for a in ("then_branch", "else_branch")]

            def branch(g):
                mapped = self.graph(g, {t.ref(): v for t, v in zip(g.inputs, inputs[1:])})
                return [mapped[t.ref()] for t in g.outputs]
            return list(tf.cond(inputs[0], lambda: branch(branches[0]),
                                lambda: branch(branches[1])))
        return _copy(op, inputs)

    def _loop(self, op, inputs) -> list:
        kind = "map_fn" if op.name.rsplit("/", 2)[-2:-1] == ["map"] else "while_loop"
        plan = loop_analysis.analyze(op, lambda k: tf.get_static_value(inputs[k]))
        if isinstance(plan, loop_analysis.Dependent):
            self._record(op, kind, "kept", plan.reason)
            return _copy(op, inputs)
        if plan.recurrent and op.name in self.kept:
            self._record(op, kind, "kept", "its levels were more than a tenth of its "
                         "iterations on the first call: it runs as it was")
            return _copy(op, inputs)
        before, chunked = len(self.entries), len(self.chunks)
        try:
            if plan.recurrent:
                outs, ran = loop_rewrite.levels(self, plan, inputs, lambda: _copy(op, inputs),
                                                _stacked_only(op))
                if ran is not None:
                    self.paid.append((op.name, ran))
            else:
                outs = loop_rewrite.independent(self, plan, inputs, _stacked_only(op))
        except loop_rewrite.Kept as why:
            del self.entries[before:]
            self._record(op, kind, "kept", str(why))
            return _copy(op, inputs)
        except (ConversionError, ValueError, TypeError) as error:
            del self.entries[before:]
            first = str(error).strip().splitlines()[0]
            self._record(op, kind, "kept", f"its body does not vectorize: {first}")
            return _copy(op, inputs)
        chunks = _chunks(self.chunks[chunked:], "each level" if plan.recurrent else "")
        if plan.recurrent:
            self._record(op, kind, "levels", "iterations read what earlier ones wrote, at "
                         "indices computed before the loop: run level by level (as it was "
                         "where the levels are more than a tenth of the iterations)" + chunks)
        else:
            self._record(op, kind, "vectorized", "its iterations are independent" + chunks)
        return outs

    def _record(self, op, kind, decision, reason):
        """One entry per loop op, however often its graph is emitted (a body is emitted
        once to find a schedule and once to run it)."""
        if not any(e.name == op.name and e.op is op for e in self.entries):
            self.entries.append(LoopEntry(op.name, kind, decision, reason, op))


def _stacked_only(op) -> frozenset:
    """The positions of ``op``'s outputs read only by whole-list stacks (through
    identities), as ``tf.map_fn`` reads its results."""
    def readers(tensor):
        for consumer in tensor.consumers():
            if consumer.type == "Identity":
                yield from readers(consumer.outputs[0])
            else:
                yield consumer
    found = {k: [r.type for r in readers(t)] for k, t in enumerate(op.outputs)
             if t.dtype == tf.variant}
    return frozenset(k for k, types in found.items()
                     if types and all(t == "TensorListStack" for t in types))


def _chunks(records, what) -> str:
    """What the memory budget made of a loop's pfor (its last one: the loop's own, after
    the inner loops'), for its entry's reason."""
    if not records:
        return ""
    last = records[-1]
    size = last.memory_estimate
    size = f"{size / 2**20:.1f} MiB" if size >= 1 << 20 else f"{size / 2**10:.1f} KiB"
    if what:
        return (f"; under memory_budget, {what} in chunks of at most {last.chunk_size} "
                f"iterations (about {size} each)")
    return f"; under memory_budget, in chunks of {last.chunk_size} iterations (about {size} each)"


def _timings(fns: dict, args, kwargs) -> dict:
    """Median seconds per call of each of ``fns`` on these arguments, interleaved (the
    median: some batched kernels are fast on one call and slow on the next)."""
    times = {name: [] for name in fns}
    for round_ in range(_ROUNDS):
        for name, f in fns.items():
            start = time.perf_counter()
            f(*args, **kwargs)
            times[name].append(time.perf_counter() - start)
        if round_ == 0 and max(t[0] for t in times.values()) > _LONG:
            break
    return {name: float(np.median(t)) for name, t in times.items()}


def _needed(tensors) -> set:
    """The ops ``tensors`` depend on, control inputs included."""
    seen, stack = set(), [t.op for t in tensors]
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
    return seen


def _copy(op, inputs):
    """The op again on ``inputs``: its outputs, or the op itself if it has none."""
    new = emit.recreate(op, inputs)
    return list(new.outputs) if op.outputs else new
