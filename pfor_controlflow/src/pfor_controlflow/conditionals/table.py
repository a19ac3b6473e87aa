"""Every converter of the conditional and optional ops, in dispatch order.

If/Case: views travel into the branches as they are (the branches' converters know
them); ragged values too, after assert_guards.py's converter (priority -1), which
checks a guard of ragged data with one Assert instead of running its branches (a
predicate the same in every iteration guards data of the same value: ragged data then
come with a stacked predicate), and after the converters of stacked and invariant
data (no priority), which take such guards without it.
"""

from pfor_controlflow.conditionals import assert_guards, cond, optionals

_CONDITIONALS = ["If", "StatelessIf", "Case", "StatelessCase"]


def register(registry):
    add = registry.add
    add(_CONDITIONALS, cond.convert_invariant_selector, inputs="U*...", views=True)
    add(_CONDITIONALS, cond.convert_stacked_selector, inputs="S*...", views=True)
    add(_CONDITIONALS, cond.convert_ragged_invariant_selector, inputs="U?...", views=True,
        priority=-2)
    add(_CONDITIONALS, cond.convert_ragged_stacked_selector, inputs="S?...", views=True,
        priority=-2)
    add(["If", "StatelessIf"], assert_guards.convert_assert_guard, inputs="S?...", priority=-1)
    add("OptionalFromValue", optionals.convert_from_value, inputs="?...")
    add("OptionalGetValue", optionals.convert_get_value, inputs="S", views=True)
