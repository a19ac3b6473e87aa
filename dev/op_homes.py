"""List op types whose converters in one pack live in more than one module
(the redesign's rule: one op, one module per pack)."""

import collections
import sys

import pfor_core as pf

registry = pf.default_registry()
spread = collections.defaultdict(set)
for e in registry.entries():
    spread[(e.pack, e.op_type)].add(getattr(e.fn, "__module__", "?"))
bad = {k: v for k, v in spread.items() if len(v) > 1}
for (pack, op), mods in sorted(bad.items()):
    print(f"{pack:24} {op:32} {', '.join(sorted(m.rsplit('.', 1)[-1] for m in mods))}")
print(f"{len(bad)} op types spread over modules", file=sys.stderr)
