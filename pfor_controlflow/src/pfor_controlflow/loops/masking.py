"""When a while loop with per-iteration trip counts runs masked, and when it may.

Masked (every step on all rows, finished rows keep their values) has static shapes,
which XLA and an outer ``pfor`` need, and it moves no data; the active subset
(trip_counts.py) does only the work of the rows still running but compacts them
whenever some finish. On 2 CPU cores, with trip counts in 0..100, the masked loop
took 0.3x to 0.7x the subset's time for rows of up to 32 floats, and 1.2x to 1.5x
for rows of 64 to 256 floats at batch 512 (``benchmarks/while_strategies.py``), so
it is chosen on its own for small bodies.

Running a body on finished rows is only harmless when nothing in it can fail on the
values those rows hold (an index one past the end of a sequence fails a gather on the
CPU) and nothing in it has an effect (a finished row would add to a variable, print
or assert once more). ``pays`` therefore asks for a small body made of total ops only;
``total_ops.effects`` names what forbids masking where it is the only choice. Where
masking is the only choice and the body is not total, rows that should not run compute
on the values of a row that does (``total_ops.stand_ins``), so they cannot fail or run
forever. (total_ops.py, below the loops and the conditionals, holds those three: a
masked conditional needs them too.)
"""

from __future__ import annotations

import tensorflow as tf

from pfor_controlflow import total_ops

# Elements a row may carry for the masked loop to be chosen on its own (measured: see
# the docstring).
SMALL_ROW = 32


def pays(loop) -> bool:
    """Whether the masked loop is clearly the faster and safe: the stacked variables
    carry at most ``SMALL_ROW`` elements a row and body and condition are total."""
    size = 0
    for k in loop.carried:
        if not loop.stacked[k]:
            continue
        shape = loop.body.inputs[k].shape
        if loop.body.inputs[k].dtype == tf.variant or not shape.is_fully_defined():
            return False
        size += shape.num_elements()
    if size > SMALL_ROW:
        return False
    return total_loop(loop)


def total_loop(loop) -> bool:
    """Whether body and condition give a result for any values of the loop variables.
    The condition runs on every row in the sequential loop too: only what it computes
    from the loop variables must be total there. The body runs on rows that never
    start, so all of it must be."""
    varying = {loop.cond.inputs[k].ref() for k in loop.carried}
    return total_ops.total(loop.body) and all(
        total_ops.total_op(op) for op in total_ops.downstream(loop.cond, varying))


