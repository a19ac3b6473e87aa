"""Conditionals: If/Case (cond.py), branch values ragged by the branch taken
(ragged_branches.py), guards of ragged data (assert_guards.py) and the optionals a
gradient passes on (optionals.py); table.py registers every converter."""
