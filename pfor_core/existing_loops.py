"""``pf.vectorize_loops``: the loops a function already has, vectorized where their
iterations are independent.

The function is traced as a ``tf.function`` would trace it, and its graph is emitted
again op by op into the caller's graph (``_Replay``). A ``While`` whose iterations are
independent (``loop_analysis``) becomes one pfor of its body: counters become the
iteration index, the lists written at a counter one scatter of the stacked values,
reductions one reduction over them. Its body is emitted by the same replay, so inner
loops are rewritten first. Calls and conditionals whose functions hold loops are
emitted through (calls inlined, branches traced again). Every other op is copied.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import tensorflow as tf

from pfor_core import api, checks, emit, loop_analysis
from pfor_core.errors import ConversionError

_CALLS = ("PartitionedCall", "StatefulPartitionedCall")
_CONDS = ("If", "StatelessIf")


@dataclasses.dataclass(frozen=True)
class LoopEntry:
    """One loop found: its op's name, ``kind`` ("map_fn" | "while_loop"), ``decision``
    ("vectorized" | "levels" | "kept") and why."""
    name: str
    kind: str
    decision: str
    reason: str


@dataclasses.dataclass(frozen=True)
class LoopsReport:
    """The loops ``vectorize_loops`` found in one trace, outer ones after inner ones."""
    loops: tuple

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
    >>> print(fast.explain(tf.constant([[1., 2.]])))
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
    """The callable ``vectorize_loops`` returns: traced once per input signature."""

    def __init__(self, fn, check, memory_budget):
        self._original = tf.function(fn)
        self._function = tf.function(self._emit, autograph=False)
        self._check, self._budget = check, memory_budget
        self._checked, self._entries = set(), []
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args, **kwargs):
        if tf.inside_function():
            return self._emit(*args, **kwargs)
        out = self._function(*args, **kwargs)
        if self._check:
            self._compare(out, args, kwargs)
        return out

    def explain(self, *args, **kwargs) -> LoopsReport:
        """The loops found in ``fn`` for these arguments, with each decision and why."""
        tf.function(self._emit, autograph=False).get_concrete_function(*args, **kwargs)
        return LoopsReport(tuple(self._entries))

    def _emit(self, *args, **kwargs):
        concrete = self._original.get_concrete_function(*args, **kwargs)
        graph = concrete.graph
        flat = concrete.function_type.unpack_inputs(concrete.function_type.bind(*args, **kwargs))
        feeds = {inner.ref(): value for inner, value in zip(graph.inputs, flat)}
        feeds.update((inner.ref(), outer) for outer, inner in graph.captures)
        self._entries = []
        mapped = _Replay(self._entries, self._budget).graph(graph, feeds)
        return tf.nest.map_structure(
            lambda t: mapped[t.ref()] if isinstance(t, tf.Tensor) else t,
            graph.structured_outputs, expand_composites=True)

    def _compare(self, out, args, kwargs):
        key = self._function.get_concrete_function(*args, **kwargs).name
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

    def __init__(self, entries: list, budget):
        self.entries, self.budget = entries, budget
        # Lists a vectorized loop wrote whole (fresh, every item once, in order), by the
        # new handle: stacking one again is the stacked values themselves.
        self.whole = {}

    def graph(self, graph, feeds: dict, skip=()) -> dict:
        """{tensor ref of ``graph``: new tensor}; ops in ``skip``, and the ops that read
        them, are left out."""
        mapped, made = dict(feeds), {}
        for op in graph.get_operations():
            if op.outputs and all(t.ref() in mapped for t in op.outputs):
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
            self.entries.append(LoopEntry(op.name, kind, "kept", plan.reason))
            return _copy(op, inputs)
        before = len(self.entries)
        try:
            outs = self._vectorized(plan, inputs)
        except (ConversionError, ValueError, TypeError) as error:
            del self.entries[before:]
            first = str(error).strip().splitlines()[0]
            self.entries.append(LoopEntry(op.name, kind, "kept",
                                          f"its body does not vectorize: {first}"))
            return _copy(op, inputs)
        self.entries.append(LoopEntry(op.name, kind, "vectorized",
                                      "its iterations are independent"))
        return outs

    def _vectorized(self, plan, inputs) -> list:
        for _, value in plan.written.values():
            if not value.shape.is_fully_defined():
                # pfor would check at run time that every iteration's item has one
                # shape; the loop may write items of different shapes.
                raise ValueError(f"the items it writes ('{value.op.name}', shape "
                                 f"{value.shape}) have shapes known only at run time")
        n = _trip_count(plan, inputs, self)
        results = [v for _, v in plan.written.values()] + [v for _, v in plan.reduced.values()]
        skip = {_source_op(plan.body.outputs[k]) for k in list(plan.written) + list(plan.reduced)}
        stacked = []
        if results:
            def loop_fn(t):
                feeds = {}
                for k, inp in enumerate(plan.body.inputs):
                    if k in plan.counters:
                        feeds[inp.ref()] = _at(inputs[k], plan.counters[k], t)
                    elif k not in plan.written and k not in plan.reduced:
                        feeds[inp.ref()] = inputs[k]
                mapped = self.graph(plan.body, feeds, skip=skip)
                return [mapped[v.ref()] for v in results]
            stacked = api.pfor(loop_fn, n, fallback="error", memory_budget=self.budget)
        outs = list(inputs)
        for k, step in plan.counters.items():
            outs[k] = _at(inputs[k], step, n)
        for j, (k, (counter, _)) in enumerate(plan.written.items()):
            indices = _at(inputs[counter], plan.counters[counter], tf.range(n))
            outs[k] = tf.raw_ops.TensorListScatterIntoExistingList(
                input_handle=inputs[k], tensor=stacked[j], indices=tf.cast(indices, tf.int32))
            if _fresh(inputs[k], n) and (_static(inputs[counter]), plan.counters[counter]) == (0, 1):
                self.whole[outs[k].ref()] = stacked[j]
        for j, (k, (how, _)) in enumerate(plan.reduced.items(), start=len(plan.written)):
            if how == "sum":
                outs[k] = inputs[k] + tf.reduce_sum(stacked[j], 0)
            else:
                reduce = tf.reduce_max if how == "max" else tf.reduce_min
                pick = tf.maximum if how == "max" else tf.minimum
                outs[k] = pick(inputs[k], reduce(stacked[j], 0))
        return outs


def _source_op(tensor):
    return loop_analysis._source(tensor).op  # pylint: disable=protected-access


def _at(start, step, t):
    """A counter's value at iteration(s) ``t``."""
    return start + step * tf.cast(t, start.dtype)


def _trip_count(plan, inputs, replay):
    """How often the loop runs: the least count over its condition's bounds, as a
    Python int where every bound is static."""
    mapped = replay.graph(plan.cond, {t.ref(): v for t, v in zip(plan.cond.inputs, inputs)})
    counts = []
    for k, bound, direction, inclusive in plan.bounds:
        start, step, bound = inputs[k], abs(plan.counters[k]), mapped[bound.ref()]
        if _static(start) is not None and _static(bound) is not None:
            distance = (int(_static(bound)) - int(_static(start))) * direction
        else:
            distance = tf.cast((tf.cast(bound, start.dtype) - start) * direction, tf.int64)
        count = distance // step + 1 if inclusive else (distance + step - 1) // step
        counts.append(max(count, 0) if isinstance(count, int) else tf.maximum(count, 0))
    if all(isinstance(c, int) for c in counts):
        return min(counts)
    return tf.cast(tf.reduce_min(tf.stack([tf.cast(c, tf.int64) for c in counts])), tf.int32)


def _static(tensor):
    """A scalar's static value, or None."""
    value = tf.get_static_value(tensor)
    return None if value is None or getattr(value, "shape", ()) != () else value.item()


def _fresh(handle, n) -> bool:
    """Whether ``handle`` is a new list of exactly ``n`` (static) items."""
    if handle.op.type != "TensorListReserve" or not isinstance(n, int):
        return False
    return _static(handle.op.inputs[1]) == n


def _copy(op, inputs):
    """The op again on ``inputs``: its outputs, or the op itself if it has none."""
    new = emit.recreate(op, inputs)
    return list(new.outputs) if op.outputs else new
