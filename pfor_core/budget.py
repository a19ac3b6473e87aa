"""Choosing the chunk size that keeps a vectorized loop within a memory budget.

The body is converted twice more, into throwaway graphs, for probe loops of two and of
three iterations; the two graphs hold the same ops in the same order, and how much each
tensor grows from one to the other is its size per iteration (the rest is loop
invariant). A liveness walk over the converted graph, in the order its ops were made,
gives for every step the bytes held by invariant tensors (``a``) and per iteration by
stacked ones (``b``); ops whose output is their input's buffer (Identity, Reshape, ...)
hold nothing of their own, nor do the tensors the body captures (the caller's). The
outputs are counted apart, as held throughout: the executor may make them before other
work whose temporaries then stay beside them. So a chunk of ``k`` iterations peaks at
``outputs(k) + max(a + k * b)``.

The budget bounds what the loop holds beyond its outputs, which the caller holds in any
case: the loop runs in one piece where that fits, else in chunks of the largest ``k``
whose peak, their outputs included (each chunk's outputs are copied out at its end),
fits. Where the converted graph's shapes are not static, an eager caller measures
instead: the loop's first iterations run at two chunk sizes, and the peaks the
allocator reports are fitted the same way (only for bodies without effects).

Kernels may allocate memory the graph does not show: oneDNN's convolutions reorder
their operands and keep workspaces, which took a convolutional net's chunks 45% over
their budget. Where the converted body holds such ops (``WORKSPACE_OPS``) and its first
iterations can be run, the caller also measures them (``measured_profile``) and takes
whichever of the two estimates is higher (``Profile.with_measured``).
"""

from __future__ import annotations

import dataclasses
import os

import tensorflow as tf
from tensorflow.python.framework import func_graph

PROBES = (2, 3)  # loop lengths of the two probe conversions (no size-1 special cases)
SMALL = 4  # measured runs hold SMALL and 2 * SMALL iterations
WORKSPACE_OPS = frozenset({
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3D",
    "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2", "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter"})
_DEFAULT_SHARE = 0.5  # parallel_iterations="auto" without a budget: half the memory


@dataclasses.dataclass(frozen=True, kw_only=True)
class Profile:
    """Peak bytes of a chunk of k iterations: its outputs' plus ``max(a + k * b for a, b
    in steps)``."""

    steps: tuple[tuple[int, int], ...]
    outputs: tuple[int, int] = (0, 0)  # the outputs' bytes: a + k * b
    workspaces: tuple[str, ...] = ()  # WORKSPACE_OPS types the graph holds
    measured: bool = False  # raised to a measured run's peaks (with_measured)

    def working(self, k: int) -> int:
        """Peak bytes beyond the outputs."""
        return max((a + k * b for a, b in self.steps), default=0)

    def peak(self, k: int) -> int:
        return self.outputs[0] + k * self.outputs[1] + self.working(k)

    def with_measured(self, measured: Profile) -> Profile:
        """At every k the higher of this estimate and ``measured`` (a run's peaks,
        outputs included, as ``measured_profile`` fits them)."""
        (a, b), = measured.steps
        beyond = (max(a - self.outputs[0], 0), max(b - self.outputs[1], 0))
        return dataclasses.replace(self, steps=self.steps + (beyond,), measured=True)

    def chunk_size(self, budget: int, n: int | None = None) -> int:
        """``n`` where all ``n`` iterations fit ``budget`` beyond their outputs, else
        the largest k whose peak fits ``budget`` (at least 1)."""
        if n is not None and self.working(n) <= budget:
            return n
        best = None
        out_a, out_b = self.outputs
        for a, b in self.steps or ((0, 0),):
            a, b = a + out_a, b + out_b
            if b > 0:
                fits = (budget - a) // b
                best = fits if best is None else min(best, fits)
        return max(1, best) if best is not None else 1 << 30


def default_budget() -> int:
    """Half the machine's physical memory (``parallel_iterations="auto"`` alone)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        total = 8 << 30
    return int(total * _DEFAULT_SHARE)


# Ops whose output is (a view of) their input's buffer.
_ALIASES = frozenset({"Identity", "Reshape", "ExpandDims", "Squeeze", "StopGradient",
                      "PreventGradient", "EnsureShape", "IdentityN"})


def static_profile(convert) -> Profile | None:
    """The profile read off ``convert(n)`` (which returns the outputs) run into
    throwaway graphs for each probe length, or None when a shape there is not static
    or the graphs differ."""
    graphs, outputs = [], None
    for n in PROBES:
        with func_graph.FuncGraph(f"pfor_budget_probe_{n}").as_default() as graph:
            outs = convert(n)
        graphs.append(graph.get_operations())
        outputs = outputs if outputs is not None else [
            t for t in tf.nest.flatten(outs, expand_composites=True) if tf.is_tensor(t)]
    small, large = graphs
    if len(small) != len(large) or any(a.type != b.type for a, b in zip(small, large)):
        return None
    sizes = {}
    for a, b in zip(small, large):
        if a.type in _ALIASES:
            continue  # (no buffer of their own: _liveness)
        for x, y in zip(a.outputs, b.outputs):
            bx, by = _bytes(x), _bytes(y)
            if bx is None or by is None:
                return None
            grow = max(by - bx, 0) // (PROBES[1] - PROBES[0])
            sizes[id(x)] = (max(bx - PROBES[0] * grow, 0), grow)
    workspaces = tuple(sorted({op.type for op in small} & WORKSPACE_OPS))
    return dataclasses.replace(_liveness(small, sizes, outputs), workspaces=workspaces)


# A body's signature -> its measured profile, or None where it could not be measured:
# a body is measured once, not at every call.
_MEASURED: dict = {}
_MEASURED_KEPT = 256


def probed(graph, profile: Profile, probe, k: int) -> Profile:
    """``profile`` (of the body ``graph``) raised to a run's measured peaks,
    ``probe(small)``'s (``measured_profile``), where those are higher: what kernels
    allocate inside (``WORKSPACE_OPS``). As it is where the first iterations cannot be
    measured (``probe`` raises ValueError: the body has effects or captures a graph's
    own tensors, the allocator keeps no statistics). ``k``, the chunk size ``profile``
    gives, is where the runs measure (k / 2 and k iterations): what a kernel keeps at a
    few iterations says little about many."""
    key = signature(graph)
    if key not in _MEASURED:
        try:
            measured = probe(max(SMALL, k // 2))
        except (ValueError, TypeError, tf.errors.OpError):
            measured = None  # (and a run that fails: the loop's own error comes later)
        if measured is not None and measured.steps == ((0, 0),):
            measured = None  # the allocator counted nothing: it keeps no statistics
        if len(_MEASURED) >= _MEASURED_KEPT:
            del _MEASURED[next(iter(_MEASURED))]
        _MEASURED[key] = measured
    measured = _MEASURED[key]
    return profile if measured is None else profile.with_measured(measured)


def signature(graph) -> tuple:
    """A body graph's ops and their output shapes: equal for bodies traced alike (a
    measured profile is kept per signature)."""
    return tuple((op.type, tuple((t.dtype.name, str(t.shape)) for t in op.outputs))
                 for op in graph.get_operations())


def _bytes(tensor) -> int | None:
    if tensor.dtype in (tf.variant, tf.resource, tf.string):
        return 0  # handles and lists: their contents are other tensors
    if tensor.op.type == "Placeholder":
        return 0  # a value the body captures: the caller holds it in any case
    shape = tensor.shape
    if not shape.is_fully_defined():
        return None
    return shape.num_elements() * tensor.dtype.size


def _liveness(operations, sizes, outputs) -> Profile:
    position = {id(op): k for k, op in enumerate(operations)}
    root: dict[int, int] = {}  # an alias's tensor -> the tensor that holds the buffer
    for op in operations:
        if op.type in _ALIASES:
            for t, source in zip(op.outputs, op.inputs):
                root[id(t)] = root.get(id(source), id(source))
                sizes[id(t)] = (0, 0)
    last_use: dict[int, int] = {}
    for k, op in enumerate(operations):
        for t in op.inputs:
            last_use[root.get(id(t), id(t))] = k
    held = {root.get(id(t), id(t)) for t in outputs}
    kept = [sizes[key] for key in held if key in sizes]
    for key in held:
        sizes[key] = (0, 0)  # counted apart
    frees: dict[int, list[tuple[int, int]]] = {}
    for op in operations:
        for t in op.outputs:
            end = last_use.get(id(t), position[id(op)])
            frees.setdefault(end, []).append(sizes[id(t)])
    steps, a, b = [], 0, 0
    for k, op in enumerate(operations):
        for t in op.outputs:
            a, b = a + sizes[id(t)][0], b + sizes[id(t)][1]
        steps.append((a, b))
        for fa, fb in frees.get(k, ()):
            a, b = a - fa, b - fb
    return Profile(steps=tuple(steps),
                   outputs=(sum(a for a, _ in kept), sum(b for _, b in kept)))


def measured_profile(run, small: int = SMALL) -> Profile:
    """Fit ``a + k * b`` to the allocator's peaks of ``run(k)`` at two chunk sizes."""
    peaks = []
    for k in (small, 2 * small):
        run(k)  # warm up: the first call also holds the conversion's constants
        try:
            tf.config.experimental.reset_memory_stats("CPU:0")
        except ValueError as e:  # TensorFlow's default CPU allocator keeps no statistics
            raise ValueError(
                "memory_budget / parallel_iterations='auto': the body's shapes are not all "
                "static, and this process's CPU allocator keeps no statistics to measure a "
                "run with; pass parallel_iterations=k, or start the process with "
                "TF_CPU_ALLOCATOR_USE_BFC=true (a BFC allocator keeps them).") from e
        before = tf.config.experimental.get_memory_info("CPU:0")["current"]
        run(k)
        peaks.append(tf.config.experimental.get_memory_info("CPU:0")["peak"] - before)
    b = max(peaks[1] - peaks[0], 1) // small
    a = max(peaks[0] - small * b, 0)
    return Profile(steps=((a, b),))
