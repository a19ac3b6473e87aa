"""The ``pfor`` command line: what is installed and who converts which op.

``pfor packs`` lists the converter packs found through the entry points and what
happened when loading each. ``pfor ops`` lists every op type with a converter, in
dispatch order: the first entry wins; a later one that an earlier entry accepts every
input pattern of is *shadowed* (reached only when a better converter declines).
``pfor ops --patterns`` lists, per op type and input pattern (``S`` stacked, ``U``
invariant), which converter vectorizes it or that it falls back (see ``coverage``).
``pfor ops --missing`` compares with TensorFlow's own vectorizer by reading, at run
time, the registry its ``RegisterPFor`` decorator fills; nothing of it is copied here.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.run(args)
    except BrokenPipeError:  # e.g. `pfor ops --missing | head`: not an error
        # Python flushes stdout again at exit; point it somewhere that cannot fail.
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # pylint: disable=R1732
        return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pfor", description="Inspect pfor's converter packs and op coverage.")
    sub = parser.add_subparsers(dest="command")
    packs = sub.add_parser("packs", help="installed converter packs and their status")
    packs.add_argument("--json", action="store_true", help="print JSON instead of a table")
    packs.set_defaults(run=_cmd_packs)
    ops = sub.add_parser("ops", help="op types with a converter and who provides them")
    ops.add_argument("--pack", metavar="NAME",
                     help="only this pack's converters (distribution name; - and _ alike)")
    ops.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ops.add_argument("--patterns", action="store_true",
                     help="per op type and input pattern (S stacked, U invariant): the "
                          "converter that vectorizes it, or 'fallback'")
    ops.add_argument("--missing", action="store_true",
                     help="op types TensorFlow's vectorizer handles and no installed pack "
                          "does (with --pack: that pack does not)")
    ops.set_defaults(run=_cmd_ops)
    return parser


def _registry():
    from pfor_core.plugins import default_registry

    return default_registry()


# -- pfor packs --------------------------------------------------------------------
def _pack_rows(registry) -> list[dict]:
    return [{"name": p.name, "version": p.version, "api_version": p.api_version,
             "status": p.status, "converters": p.converters, "reason": p.reason,
             "entry_point": p.entry_point}
            for p in sorted(registry.packs, key=lambda p: p.name)]


def _cmd_packs(args) -> int:
    rows = _pack_rows(_registry())
    if args.json:
        _print_json(rows)
        return 0
    if not rows:
        print("no converter packs installed (entry-point group 'pfor.converters')")
        return 0
    _print_table(("pack", "version", "api", "status", "converters", "reason"),
                 [(r["name"], r["version"], _text(r["api_version"]), r["status"],
                   r["converters"], r["reason"]) for r in rows])
    return 0


# -- pfor ops ----------------------------------------------------------------------
def _cmd_ops(args) -> int:
    registry = _registry()
    if args.pack is not None and not _known_pack(registry, args.pack):
        names = ", ".join(sorted(p.name for p in registry.packs)) or "none"
        print(f"pfor: no pack named {args.pack!r} (installed: {names})", file=sys.stderr)
        return 1
    if args.missing:
        return _cmd_missing(registry, args)
    if args.patterns:
        return _cmd_patterns(registry, args)
    rows = _op_rows(registry, args.pack)
    if args.json:
        _print_json(rows)
        return 0
    table = []
    for row in rows:
        for e in row["entries"]:
            table.append((row["op_type"], e["pack"], e["version"], e["converter"],
                          _text(e["inputs"], "any"), e["priority"], e["status"]))
    _print_table(("op type", "pack", "version", "converter", "inputs", "priority", "status"),
                 table)
    return 0


def _known_pack(registry, name: str) -> bool:
    from pfor_core.plugins import normalize
    from pfor_core.registry import IN_PROCESS

    wanted = normalize(name)
    return wanted == normalize(IN_PROCESS) or any(
        normalize(p.name) == wanted for p in registry.packs)


def _op_rows(registry, pack: str | None) -> list[dict]:
    """One record per op type: the winner's provenance and every entry, best first."""
    from pfor_core.plugins import normalize

    rows = []
    for op_type in registry.op_types():
        entries = registry.entries(op_type)
        described = [_describe(e, [b for b in entries[:k] if not b.narrow])
                     for k, e in enumerate(entries)]
        if pack is not None:
            described = [d for d in described if normalize(d["pack"]) == normalize(pack)]
            if not described:
                continue
        winner = registry.winner(op_type)
        rows.append({"op_type": op_type, "pack": winner.pack, "version": winner.version,
                     "converter": winner.name, "inputs": winner.inputs,
                     "priority": winner.priority, "entries": described})
    return rows


def _describe(entry, better) -> dict:
    """``entry``'s listing; ``better``: the broad entries tried before it."""
    if entry.narrow:
        status = "narrow"  # first, but only for its own pack's layouts
    elif not better:
        status = "winner"
    elif any(_covers(b.inputs, entry.inputs) for b in better):
        status = "shadowed"
    else:
        status = "alternative"
    return {"pack": entry.pack, "version": entry.version, "converter": entry.name,
            "inputs": entry.inputs, "priority": entry.priority, "status": status}


def _covers(spec_a: str | None, spec_b: str | None) -> bool:
    """Whether every input pattern that ``spec_b`` accepts is accepted by ``spec_a``."""
    from pfor_core.registry import pattern_matches

    # Patterns longer than both specs only repeat a '...' spec's last letter: no new case.
    longest = max(len(s) for s in (spec_a or "", spec_b or ""))
    for length in range(longest + 2):
        for letters in itertools.product("SU", repeat=length):
            pattern = "".join(letters)
            if pattern_matches(spec_b, pattern) and not pattern_matches(spec_a, pattern):
                return False
    return True


def _cmd_patterns(registry, args) -> int:
    from pfor_core import coverage
    from pfor_core.plugins import normalize

    rows = coverage.pattern_rows(registry)
    if args.pack is not None:
        wanted = normalize(args.pack)
        rows = [r for r in rows if normalize(r["pack"]) == wanted or any(
            normalize(c.rsplit("[", 1)[-1].rstrip("]")) == wanted
            for c in r["then"] + r["narrow"])]
    if args.json:
        _print_json(rows)
        return 0
    _print_table(("op type", "inputs", "converter", "pack", "then", "narrow (first)"),
                 [(r["op_type"], r["inputs"], r["converter"], r["pack"],
                   ", ".join(r["then"]), ", ".join(r["narrow"])) for r in rows])
    return 0


def _cmd_missing(registry, args) -> int:
    from pfor_core.plugins import normalize
    from pfor_core.walk import PASS_THROUGH  # the walk converts these itself

    ours = {e.op_type for e in registry.entries()
            if args.pack is None or normalize(e.pack) == normalize(args.pack)}
    missing = sorted(set(tensorflow_op_types()) - ours - set(PASS_THROUGH))
    if args.json:
        _print_json(missing)
    else:
        for op_type in missing:
            print(op_type)
        print(f"{len(missing)} op types", file=sys.stderr)
    return 0


def tensorflow_op_types() -> list[str]:
    """Op types TensorFlow's built-in vectorizer has converters for, read at run time.

    Only op types this TensorFlow defines: its vectorizer also registers a name no op
    has (``LogicalXor``; ``tf.math.logical_xor`` is built of LogicalAnd / Or / Not), and
    no body can hold an op of that type, so no converter could ever be asked."""
    from tensorflow.python.framework import op_def_registry
    from tensorflow.python.ops.parallel_for import pfor as tf_pfor

    # ``RegisterPFor.__call__`` stores each converter in this module-level dict.
    table = getattr(tf_pfor, "_pfor_converter_registry", None)
    if not isinstance(table, dict):
        raise RuntimeError("this TensorFlow version keeps no _pfor_converter_registry in "
                           "tensorflow.python.ops.parallel_for.pfor; cannot list its ops")
    return sorted(k for k in table if isinstance(k, str) and not k.startswith("_")
                  and op_def_registry.get(k) is not None)


# -- output ------------------------------------------------------------------------
def _text(value, none: str = "-") -> str:
    return none if value is None or value == "" else str(value)


def _print_json(value) -> None:
    json.dump(value, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def _print_table(header, rows) -> None:
    lines = [tuple(str(c) for c in header)] + [tuple(_text(c) for c in r) for r in rows]
    widths = [max(len(line[k]) for line in lines) for k in range(len(header))]
    for k, line in enumerate(lines):
        print("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    sys.exit(main())
