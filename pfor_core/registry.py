"""The converter registry: op type -> converters, with provenance and priority.

Packs add converters through their ``pfor_register_converters`` hook (given a
``PackRegistrar`` bound to the pack), users through ``@pf.register_converter``. Each
entry records the invariance pattern it handles (``"SU"``: input 0 stacked, input 1
invariant; ``*`` either; a trailing ``...`` repeats the previous letter), so coverage
can be listed without running anything. Dispatch looks candidates up once per
(op type, pattern) and caches the answer on the registry.

A converter registered without ``views=True`` gets every view among its inputs
materialized (``ConverterEntry.call``), so only converters that declare they know a
view ever see one. A converter registered for view types (``view=ListView``) is tried
only when an input is one of them, and before every converter that is not: the
dispatch order of an op is its registrations sorted by (view converters first, the
more derived view type first, priority, pattern specificity, later registration).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Callable, Iterable

from pfor_core.errors import Decline
from pfor_core.layout import LETTERS, View

IN_PROCESS = "<in-process>"

# Pattern letters: each layout type's code, "*" for stacked or invariant.
_PATTERN_RE = re.compile(rf"^[{''.join(LETTERS)}*?]*(\.\.\.)?$")
_EITHER = "SU"  # what "*" stands for; "?" stands for any layout, ragged too


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConverterEntry:
    """One registered converter."""

    op_type: str
    fn: Callable
    inputs: str | None  # invariance pattern, None for any
    priority: int
    pack: str
    version: str
    seq: int  # registration order; later wins among equals
    # Tried only when an input is one of these View types, before other converters;
    # listings name the next converter as the op's owner.
    view: tuple = ()
    # A guard or rewrite that declines most inputs (e.g. a check every op of a family
    # gets first): tried by priority, but listings name the next converter as the owner.
    guard: bool = False
    views: bool = False  # sees views as they are (else materialized); view implies it

    @property
    def narrow(self) -> bool:
        """Whether listings skip it as the op's owner (a view converter or a guard)."""
        return bool(self.view) or self.guard

    def takes(self, layouts) -> bool:
        """Whether it is tried for these input values (a view converter: only when one
        is of its view types)."""
        return not self.view or any(isinstance(v, self.view) for v in layouts)

    @property
    def order(self) -> tuple:
        """Sort key of the dispatch order, best first."""
        depth = max((len(t.__mro__) for t in self.view), default=0)
        return (not self.view, -depth, -self.priority, -self.specificity, -self.seq)

    @property
    def specificity(self) -> int:
        return 0 if self.inputs is None else sum(c in LETTERS for c in self.inputs)

    @property
    def name(self) -> str:
        """Where the converter lives: ``module.qualname`` (two converters of one bare
        name in one pack are told apart)."""
        qualname = getattr(self.fn, "__qualname__", None)
        if qualname is None:
            return repr(self.fn)
        module = getattr(self.fn, "__module__", None)
        return f"{module}.{qualname}" if module else qualname

    def matches(self, pattern: str) -> bool:
        return pattern_matches(self.inputs, pattern)

    def call(self, ctx):
        """Run the converter on ``ctx``: views materialized unless it takes them, and
        a raised ``Decline`` returned like a returned one."""
        if not (self.views or self.narrow) and any(isinstance(v, View) for v in ctx.inputs):
            inputs = []
            for value in ctx.inputs:
                if isinstance(value, View):
                    value = value.materialize()
                    if isinstance(value, Decline):
                        return value
                inputs.append(value)
            ctx = ctx.with_inputs(inputs)
        try:
            return self.fn(ctx)
        except Decline as decline:
            return decline


def pattern_matches(spec: str | None, pattern: str) -> bool:
    """Whether an entry's pattern spec accepts the actual input pattern."""
    if spec is None:  # any stacked or invariant inputs; ragged ones only when spelled out
        return "R" not in pattern
    if spec.endswith("..."):
        head = spec[:-3]
        if not head:
            return True
        if len(pattern) < len(head) - 1:
            return False
        spec = head[:-1] + head[-1] * (len(pattern) - len(head) + 1)
    if len(spec) != len(pattern):
        return False
    return all(s == p or s == "?" or (s == "*" and p in _EITHER)
               for s, p in zip(spec, pattern))


def _view_types(view) -> tuple:
    """``view=`` as a tuple of View subclasses, or a TypeError that says what to pass."""
    types = tuple(view) if isinstance(view, (tuple, list)) else (view,) if view else ()
    bad = [t for t in types if not (isinstance(t, type) and issubclass(t, View))]
    if bad:
        raise TypeError(f"view must be a subclass of pfor_core.extend.View (or a tuple of "
                        f"them), got {bad[0]!r}")
    return types


def check_pattern(inputs: str | None) -> None:
    if inputs is not None and (not isinstance(inputs, str) or not _PATTERN_RE.match(inputs)):
        raise ValueError(
            f"inputs={inputs!r} is not an invariance pattern: use letters S (stacked), "
            "U (invariant), R (ragged), * (S or U) or ? (any), one per input, optionally "
            "ending in '...' "
            "to repeat the last letter, e.g. inputs='SU' or inputs='S...'.")


def check_registration(op_types, inputs: str | None, priority) -> None:
    """The arguments every registration takes: op types, invariance pattern, priority."""
    listed = [op_types] if isinstance(op_types, str) else op_types
    if isinstance(listed, (list, tuple, set, frozenset)) and listed:
        bad = [t for t in listed if not isinstance(t, str) or not t]
    else:
        bad = [op_types]
    if bad:
        raise TypeError(f"op_type must be a TensorFlow op-type string such as 'Sinh' (or a "
                        f"non-empty list of them), got {bad[0]!r}.")
    check_pattern(inputs)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise TypeError(f"priority must be an int, got {type(priority).__name__}")


class Registry:
    """All converters known to this process."""

    def __init__(self):
        self._entries: dict[str, list[ConverterEntry]] = {}
        self._seq = itertools.count()
        self._cache: dict[tuple[str, str], tuple[ConverterEntry, ...]] = {}
        # Stateless op types whose converters also see all-invariant inputs (op type ->
        # packs that asked), e.g. stateless random ops seeded from a generator's state.
        self._see_invariant: dict[str, set[str]] = {}
        self.packs: list = []  # PackInfo records, filled by plugins.load_packs
        # What packs declared through their hooks (plugins.load_one fills these).
        self.library_modules: set[str] = set()
        self.hints: dict[str, list[tuple[str, str]]] = {}  # op type -> [(pack, hint)]
        # How the fallback loop slices and restacks variants (fallback.py), by pack.
        self.variant_forms: list[tuple[str, object]] = []

    def add(self, op_types: str | Iterable[str], fn: Callable, *, inputs: str | None = None,
            priority: int = 0, pack: str = IN_PROCESS, version: str = "",
            narrow: bool = False, views: bool = False, view=()) -> None:
        if not callable(fn):
            raise TypeError(f"converter must be callable, got {type(fn).__name__}")
        check_registration(op_types, inputs, priority)
        view = _view_types(view)
        if isinstance(op_types, str):
            op_types = [op_types]
        for op_type in op_types:
            entry = ConverterEntry(op_type=op_type, fn=fn, inputs=inputs, priority=priority,
                                   pack=pack, version=version, seq=next(self._seq),
                                   guard=narrow, view=view,
                                   views=views or narrow or bool(view))
            self._entries.setdefault(op_type, []).append(entry)
        self._cache.clear()

    def dispatch_invariant(self, op_types: str | Iterable[str], *, pack: str = IN_PROCESS) -> None:
        """Dispatch these stateless op types to their converters even when all inputs
        are invariant (the walk otherwise re-emits such ops without asking)."""
        for op_type in [op_types] if isinstance(op_types, str) else op_types:
            self._see_invariant.setdefault(op_type, set()).add(pack)

    def sees_invariant(self, op_type: str) -> bool:
        return bool(self._see_invariant.get(op_type))

    def remove_pack(self, pack: str) -> None:
        self.variant_forms = [(p, f) for p, f in self.variant_forms if p != pack]
        for packs in self._see_invariant.values():
            packs.discard(pack)
        for op_type in list(self._entries):
            kept = [e for e in self._entries[op_type] if e.pack != pack]
            if kept:
                self._entries[op_type] = kept
            else:
                del self._entries[op_type]
        self._cache.clear()

    def remove(self, op_type: str, fn: Callable) -> None:
        """Remove an in-process registration (tests use this to clean up)."""
        kept = [e for e in self._entries.get(op_type, []) if e.fn is not fn]
        if kept:
            self._entries[op_type] = kept
        else:
            self._entries.pop(op_type, None)
        self._cache.clear()

    def candidates(self, op_type: str, pattern: str) -> tuple[ConverterEntry, ...]:
        """Converters to try for this op type and input pattern, best first."""
        key = (op_type, pattern)
        found = self._cache.get(key)
        if found is None:
            found = tuple(sorted(
                (e for e in self._entries.get(op_type, ()) if e.matches(pattern)),
                key=lambda e: e.order))
            self._cache[key] = found
        return found

    def op_types(self) -> list[str]:
        return sorted(self._entries)

    def entries(self, op_type: str | None = None) -> list[ConverterEntry]:
        """Entries for one op type (or all), best first."""
        types = [op_type] if op_type is not None else self.op_types()
        out = []
        for t in types:
            out.extend(sorted(self._entries.get(t, ()), key=lambda e: e.order))
        return out

    def winner(self, op_type: str) -> ConverterEntry | None:
        """The entry tried first for an op type, narrow ones aside (for listings)."""
        entries = self.entries(op_type)
        broad = [e for e in entries if not e.narrow]
        return (broad or entries or [None])[0]


class PackRegistrar:
    """What a pack's ``pfor_register_converters`` hook receives.

    Every converter added through it is recorded under the pack's name and version.
    """

    def __init__(self, registry: Registry, pack: str, version: str):
        self._registry = registry
        self.pack = pack
        self.version = version
        self.count = 0

    def add(self, op_types: str | Iterable[str], fn: Callable, *, inputs: str | None = None,
            priority: int = 0, narrow: bool = False, views: bool = False,
            view=()) -> None:
        """Register ``fn(ctx)`` for each op type in ``op_types``.

        :param inputs: the invariance pattern ``fn`` has a code path for, one letter
            per input: ``S`` stacked, ``U`` invariant, ``R`` ragged (``extend.Ragged``),
            ``*`` stacked or invariant (never ragged), ``?`` any; a trailing
            ``...`` repeats the last letter. ``None`` (the default) takes any inputs.
            Register one converter per pattern with its own code path, so that
            ``pfor ops --patterns`` shows what is vectorized for which inputs.
        :param priority: higher goes first (then the more specific pattern, then the
            later registration).
        :param views: ``fn`` takes views (``extend.View``) as they are; otherwise it
            gets them materialized.
        :param view: a ``View`` subclass (or a tuple of them): ``fn`` is tried only
            when an input is of one of these types, and before the converters that
            are not for views; listings still name the general converter as the op's
            owner (implies ``views``).
        :param narrow: ``fn`` is a guard or rewrite that declines most inputs: tried by
            its priority, but listings name the next converter as the op's owner.
        """
        op_types = [op_types] if isinstance(op_types, str) else list(op_types)
        self._registry.add(op_types, fn, inputs=inputs, priority=priority,
                           pack=self.pack, version=self.version, narrow=narrow, views=views,
                           view=view)
        self.count += len(op_types)

    def dispatch_invariant(self, op_types: str | Iterable[str]) -> None:
        """Let this pack's converters of these stateless op types also see all-invariant
        inputs (they must then return invariant values for them themselves)."""
        self._registry.dispatch_invariant(op_types, pack=self.pack)

    def variant_form(self, form) -> None:
        """Teach the fallback loop a kind of ``tf.variant`` value (a tensor list, an
        optional) whose contents differ per iteration. ``form`` has two methods, each
        returning None for a value that is not of its kind:

        - ``rows(value, original)``: for the stacked variant ``value`` (the layout of
          body tensor ``original``), a function of the iteration index giving that
          iteration's own handle (called inside the loop; work shared by all
          iterations goes before it returns);
        - ``collect(original)``: for a variant output ``original`` of the op,
          ``(encode, dtype, shape, decode)``: ``encode(handle)`` is the tensor the loop
          collects for an iteration's handle, of ``dtype`` and static ``shape``, and
          ``decode(value)`` turns what was collected (stacked, or ragged where
          shapes differ) into the output's layout value.
        """
        self._registry.variant_forms.append((self.pack, form))

    def batch_polymorphic(self, op_types: str | Iterable[str], *,
                          batched_inputs: Iterable[int] | None = None,
                          priority: int = 0) -> None:
        """Mark ops whose kernels accept extra leading batch dimensions: the stacked
        axis becomes one more batch dimension. ``batched_inputs`` lists the inputs with
        batch dimensions (default: all); the others must be invariant."""
        from pfor_core.patterns import batch_polymorphic

        converter = batch_polymorphic(batched_inputs)
        self.add(op_types, converter, inputs=converter.inputs, priority=priority)


class _OpTypeCollector:
    """Stands in for a ``PackRegistrar``: records op types, registers nothing."""

    def __init__(self):
        self.op_types: set[str] = set()

    def add(self, op_types, *args, **kwargs) -> None:  # pylint: disable=unused-argument
        self.op_types.update([op_types] if isinstance(op_types, str) else op_types)

    batch_polymorphic = add

    def dispatch_invariant(self, op_types) -> None:
        pass

    def variant_form(self, form) -> None:
        pass


def op_types_of(register: Callable) -> set[str]:
    """The op types ``register(registry)`` adds (a pack's ``pfor_register_converters``
    or a family module's ``register``), found without registering anything: e.g. to
    answer ``pfor_install_hints`` for every op type of the pack.

    >>> from pfor_core.extend import elementwise, op_types_of
    >>> sorted(op_types_of(lambda registry: registry.add(["Exp", "Log"], elementwise)))
    ['Exp', 'Log']
    """
    collector = _OpTypeCollector()
    register(registry=collector)
    return collector.op_types
