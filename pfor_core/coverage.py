"""Which input layouts of each op type are vectorized, and by whom, read off the
registry without running anything (``pfor ops --patterns``).

For an op type of fixed arity (from TensorFlow's op registry) every invariance pattern
is listed: the converters that match it in dispatch order (the first one that does not
decline wins, so the later ones are its backups), the narrow converters tried before
them (they take only their pack's views), or ``fallback`` when none matches. The
all-invariant pattern is listed only for ops the walk dispatches with it (stateful ops,
and those a pack asked to see all-invariant inputs of); other all-invariant ops are
re-emitted unchanged. For an op type with list inputs (its arity varies) each
registered pattern is listed as it is.
"""

from __future__ import annotations

import itertools

from pfor_core.layout import Invariant, Stacked

_LETTERS = (Stacked.code, Invariant.code)  # the concrete letters a pattern is made of
_MAX_ARITY = 6  # more inputs than that are listed by registered pattern, not expanded


def op_arity(op_type: str) -> tuple[int | None, bool]:
    """(number of inputs or None if it varies or is unknown, whether it is stateful)."""
    from tensorflow.python.framework import op_def_registry  # pylint: disable=import-outside-toplevel

    op_def = op_def_registry.get(op_type)
    if op_def is None:
        return None, False
    if any(arg.number_attr or arg.type_list_attr for arg in op_def.input_arg):
        return None, op_def.is_stateful
    return len(op_def.input_arg), op_def.is_stateful


def _row(op_type, inputs, entries) -> dict:
    """``entries``: the candidates for ``inputs``, in dispatch order."""
    narrow = [e for e in entries if e.narrow]
    broad = [e for e in entries if not e.narrow]
    first = broad[0] if broad else None
    return {"op_type": op_type, "inputs": inputs,
            "converter": first.name if first else "fallback",
            "pack": first.pack if first else "",
            "then": [f"{e.name} [{e.pack}]" for e in broad[1:]],
            "narrow": [f"{e.name} [{e.pack}]" for e in narrow]}


def pattern_rows(registry, op_types=None) -> list[dict]:
    """One record per (op type, input pattern): who converts it, or ``fallback``."""
    rows = []
    for op_type in op_types if op_types is not None else registry.op_types():
        arity, stateful = op_arity(op_type)
        if arity is None or arity > _MAX_ARITY:
            for entry in registry.entries(op_type):
                rows.append(_row(op_type, entry.inputs or "*...", [entry]))
            continue
        dispatched_invariant = stateful or registry.sees_invariant(op_type)
        for letters in itertools.product(_LETTERS, repeat=arity):
            pattern = "".join(letters)
            if Stacked.code not in pattern and not dispatched_invariant:
                continue  # re-emitted unchanged by the walk
            rows.append(_row(op_type, pattern, registry.candidates(op_type, pattern)))
    return rows
