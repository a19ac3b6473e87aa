"""``pf.explain``: what the conversion did with every op of the body, the strategy of
every op that had a choice of them (while loops: masked or compacted), and the chunk
size a memory budget led to."""

from __future__ import annotations

import dataclasses

import tensorflow as tf
from tensorflow.python.framework import func_graph

from pfor_core import api, checks
from pfor_core import autograph
from pfor_core.context import StrategyRecord


@dataclasses.dataclass(frozen=True)
class Report:
    """What ``pf.explain`` found: one record per body op.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> report = pf.explain(lambda i: tf.exp(tf.cast(i, tf.float32)), 4)
    >>> print(str(report).splitlines()[-1])
    3 ops, 0 fallbacks
    """

    rows: tuple  # walk.OpRecord, in conversion order
    # context.StrategyRecord (.name, .op_type, .strategy, .reason), one per op
    loops: tuple = ()
    chunk_size: int | None = None  # under a memory budget (parallel_iterations="auto")
    memory_estimate: int | None = None  # bytes a chunk of chunk_size holds at its peak
    # Whether that estimate was raised to a measured run's (kernels' workspaces).
    memory_measured: bool = False

    @property
    def fallbacks(self) -> list:
        """Records of the ops that ran in the sequential fallback loop."""
        return [r for r in self.rows if r.how == "fallback"]

    @property
    def ragged(self) -> list:
        """Records of the ops with an output whose shape differs between iterations."""
        return [r for r in self.rows if r.ragged]

    @property
    def converted(self) -> list:
        return [r for r in self.rows if r.how == "converter"]

    def __str__(self) -> str:
        header = ("op type", "name", "how", "by", "layout")
        lines = [header]
        for r in self.rows:
            source = " ".join(p for p in (r.pack, r.version) if p)
            by = (f"{r.converter} [{source}]" if source else r.converter) if r.converter else (
                r.reason or "")
            layout = "ragged" if r.ragged else "stacked" if r.stacked else "invariant"
            lines.append((r.op_type, r.name, r.how, by, layout))
        widths = [max(len(str(row[k])) for row in lines) for k in range(len(header))]
        out = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in lines]
        out.insert(1, "  ".join("-" * w for w in widths))
        for r in self.loops:
            out.append(f"{r.op_type} '{r.name}': {r.strategy} ({r.reason})")
        if self.chunk_size is not None:
            how = ("measured: kernels' workspaces" if self.memory_measured
                   else "from static shapes")
            out.append(f"chunks of {self.chunk_size} iterations, about "
                       f"{self.memory_estimate / 2**20:.1f} MiB each at their peak ({how})")
        out.append(f"{len(self.rows)} ops, {len(self.fallbacks)} fallbacks")
        return "\n".join(out)

    __repr__ = __str__


def explain(loop_fn, iters, *, parallel_iterations=None, randomness="different",
            memory_budget=None) -> Report:
    """Convert ``loop_fn`` (without running it) and report how each op was handled;
    with ``memory_budget`` (or ``parallel_iterations="auto"``) also the chunk size
    (a body whose kernels keep workspaces, such as convolutions, and that has no
    effects runs its first iterations once, on the values it captures, to measure
    them, as the call itself would).

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> report = pf.explain(lambda i: tf.exp(tf.cast(i, tf.float32)), 4)
    >>> [(row.op_type, row.how) for row in report.converted]
    [('Cast', 'converter'), ('Exp', 'converter')]
    >>> report.fallbacks
    []
    """
    options = checks.options(fallback="loop", randomness=randomness,
                             parallel_iterations=parallel_iterations,
                             memory_budget=memory_budget)
    checks.loop_fn(loop_fn)
    loop_fn = autograph.convert_user_fn(loop_fn, autograph.caller_status())
    records: list = []
    if tf.executing_eagerly():
        n = checks.iters(iters, eager=True)
        tf.function(lambda: api.build(loop_fn, n, options, records),
                    autograph=False).get_concrete_function()
    else:
        # A throwaway graph: the converted ops (side effects included) never run.
        with func_graph.FuncGraph("pfor_explain").as_default():
            api.build(loop_fn, iters, options, records)
    return _report(records)


def _report(records) -> Report:
    rows = tuple(r for r in records if not isinstance(r, (StrategyRecord, api.ChunkRecord)))
    # One entry per op: chunks and the gradient's conversions may convert a loop again.
    loops: dict = {}
    for r in records:
        if isinstance(r, StrategyRecord):
            loops.setdefault(r.name, r)
    chunk = [r for r in records if isinstance(r, api.ChunkRecord)]
    return Report(rows=rows, loops=tuple(loops.values()),
                  chunk_size=chunk[0].chunk_size if chunk else None,
                  memory_estimate=chunk[0].memory_estimate if chunk else None,
                  memory_measured=bool(chunk) and chunk[0].measured)
