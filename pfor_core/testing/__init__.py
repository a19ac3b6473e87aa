"""The testing kit for converter authors: pfor against the same loop run sequentially.

- ``assert_matches_loop``, ``check_op`` and friends (``pfor_core.testing.loop``): run a
  body or one op under ``pf.pfor(..., fallback="error")`` in the modes of ``MODES``
  (eager, ``tf.function`` with a run-time loop length, unknown input shapes, chunks,
  XLA, nested in an outer pfor) and compare with the sequential loop, run once, with
  tolerances per dtype; results whose shape differs between iterations row by row
  (``ragged=True``), and at ``iters=0`` the dtype and per-iteration shape.
- ``check`` and ``check_inputs`` (``pfor_core.testing.drawn``): the same check with
  what hypothesis draws: the mode, and the loop length, layouts and values of the
  inputs (``pfor_core.testing.strategies``).
- ``assert_pack_listed``: a pack's own test that the host lists it.
- ``RaggedArg`` and ``rows``: an argument whose rows differ in length, a value whose
  shape differs between iterations in a body; ``lengths_strategy`` draws the lengths
  and ``draw_modes`` a mode per example (``case_modes`` per parametrized case);
  ``assert_gradients_match`` compares gradients through pfor with the loop's.

The project's own tests use the same kit, so a pack author checks a converter exactly
as the first-party packs do.
"""

from pfor_core.testing.loop import (DRAWN_MODES, MODES, RUN_MODES, TOLERANCES, RaggedArg,
                                    assert_allclose, assert_fails_like_loop,
                                    assert_gradients_match, assert_matches_loop, assert_rows,
                                    assert_rows_match, assert_same_results, check_op,
                                    check_op_all_combinations, check_op_unknown_shapes,
                                    draw_stacked, invariance_combinations, loop_fn_for,
                                    random_values, rows, run_in_mode, sequential, tolerance)
from pfor_core.testing.drawn import (case_modes, check, check_inputs, draw_modes, draw_rows,
                                     lengths_strategy)
from pfor_core.testing.packs import assert_pack_listed

__all__ = [
    "DRAWN_MODES", "MODES", "RUN_MODES", "RaggedArg", "TOLERANCES", "assert_allclose",
    "assert_fails_like_loop", "assert_gradients_match", "assert_matches_loop",
    "assert_pack_listed", "assert_rows", "assert_rows_match", "assert_same_results",
    "case_modes", "check", "check_inputs", "check_op", "check_op_all_combinations",
    "check_op_unknown_shapes", "draw_modes", "draw_rows", "draw_stacked",
    "invariance_combinations", "lengths_strategy", "loop_fn_for", "random_values", "rows",
    "run_in_mode", "sequential", "tolerance",
]
