"""pfor converter pack for stateful ops: resource variables (reads, commutative updates,
invariant writes), random ops (stateful, and stateless with per-iteration seeds, drawn
exactly), print and assert."""

__version__ = "0.7.0"
