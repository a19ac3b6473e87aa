"""Print, for every op type and every concrete input pattern of its registered
converters, the converters dispatch tries in order (``pack:name``), as JSON.

A reorganization of the packs must leave this unchanged up to renames: run it
before and after and diff (``python dev/dispatch_snapshot.py > before.json``).
Names are the converters' last name component, so moving a function between
modules does not show as a change; ``--qualified`` prints the full names. Narrow
entries end in ``/narrow``, view converters also in their view types (``[ListView]``).
"""

import itertools
import json
import sys

import pfor_core as pf
from pfor_core.layout import LETTERS


def _concrete(spec: str | None, arity: int) -> list[str]:
    """Concrete patterns (letters only) an entry's spec can match, up to ``arity``."""
    letters = "".join(LETTERS)
    if spec is None:
        return ["".join(p) for n in range(1, arity + 1) for p in itertools.product("SU", repeat=n)]
    if spec.endswith("..."):
        head = spec[:-3]
        lengths = range(max(len(head) - 1, 0), max(len(head), 1) + 3)
    else:
        head, lengths = spec, [len(spec)]
    out = []
    for n in lengths:
        if not head and n == 0:
            continue
        for p in itertools.product(letters, repeat=n):
            out.append("".join(p))
    return out


def _views(entry) -> str:
    """``[ListView,...]``: the view types a view converter is tried for (dispatch skips
    it unless an input is one of them)."""
    return f"[{','.join(t.__name__ for t in entry.view)}]" if entry.view else ""


def snapshot(qualified: bool = False) -> dict[str, list[str]]:
    registry = pf.default_registry()
    result = {}
    for op_type in registry.op_types():
        entries = registry.entries(op_type)
        arity = max([len(e.inputs.rstrip(".")) for e in entries if e.inputs] + [2])
        patterns = set()
        for e in entries:
            patterns.update(_concrete(e.inputs, arity))
        for pattern in sorted(patterns):
            found = registry.candidates(op_type, pattern)
            if found:
                result[f"{op_type}|{pattern}"] = [
                    f"{e.pack}:{e.name if qualified else e.name.rsplit('.', 1)[-1]}"
                    f"{'/narrow' if e.narrow else ''}{_views(e)}" for e in found]
    return result


if __name__ == "__main__":
    json.dump(snapshot("--qualified" in sys.argv), sys.stdout, indent=1, sort_keys=True)
    print()
