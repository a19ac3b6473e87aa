"""The vectorized forms of an existing loop: one pfor of its body, or level by level.

Both take a ``loop_analysis.Plan`` and the loop's inputs in the new graph, and return
what the loop's outputs would be. ``replay`` emits the body graph again (existing_loops'
``_Replay``: inner loops rewritten too). Iteration t has counters ``start + step * t``.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_util

from pfor_core import api, checks, emit, loop_analysis, shapes

# The level schedule runs when its levels are at most this share of the iterations:
# one level (a pfor over its iterations, ~3x the body's ops, on vectors) measured 9-12x
# one iteration of the loop (benchmarks/existing_loops.py, tree and solve). None:
# always the schedule (tests).
_LEVELS_SHARE = 0.1
# Fewer iterations never run by levels: finding the indices and the levels costs about
# as much as 20-40 iterations of such loops.
_LEVELS_MIN = 64
_ROUNDS_PER_STEP = 4


def independent(replay, plan, inputs, stacked_only=frozenset()) -> list:
    """The loop as one pfor of its body: lists written at the counter filled from the
    stacked values, reductions over them. ``stacked_only``: the positions of lists
    that leave the loop only to be stacked whole (see ``_check_item_shapes``)."""
    _check_item_shapes(plan, stacked_only)
    n = trip_count(replay, plan, inputs)
    if isinstance(n, int) and n == 1:
        raise Kept("it runs once: there is nothing to vectorize")
    results = [v for _, v in plan.written.values()] + [v for _, v in plan.reduced.values()]
    stacked = []
    if results:
        skip = {_source_op(plan.body.outputs[k]) for k in [*plan.written, *plan.reduced]}

        def loop_fn(t):
            mapped = replay.graph(plan.body, feeds(plan, inputs, t), skip=skip, only=results)
            return [mapped[v.ref()] for v in results]
        stacked = _built(replay, loop_fn, n)
    lists = dict(zip(plan.written, stacked))
    reduced = {}
    for (k, (how, _)), values in zip(plan.reduced.items(), stacked[len(plan.written):]):
        reduced[k] = _combine(how, inputs[k], _reduce(how, values))
    return outputs(replay, plan, inputs, n, lists, reduced)


def levels(replay, plan, inputs, original, stacked_only=frozenset()) -> list:
    """The loop run level by level: iteration t's level is one more than the highest
    level among the earlier iterations whose items it reads (the indices computed for
    every t first, vectorized); each level is one pfor over its iterations, reading the
    items earlier levels wrote. ``original()`` emits the loop as it was: it runs instead
    when the levels are not much fewer than the iterations. Returns (the outputs, a
    bool tensor: whether the levels ran, or None where they always do)."""
    _check_item_shapes(plan, stacked_only)
    if control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph()):
        raise Kept("under jit_compile=True: the levels hold numbers of iterations known "
                   "only at run time, which XLA does not compile")
    n = trip_count(replay, plan, inputs)
    if _LEVELS_SHARE is None:
        level, _ = _levels_of(_dependences(replay, plan, inputs, n), None)
        return _run_levels(replay, plan, inputs, n, level), None
    if isinstance(n, int) and n < _LEVELS_MIN:
        raise Kept(f"its {n} iterations are too few for a level schedule to pay")
    n_tensor = tf.convert_to_tensor(n, tf.int32)
    share = _LEVELS_SHARE * tf.cast(n_tensor, tf.float32)

    def as_it_was():
        return [*original(), tf.constant(False)]

    def schedule():
        # Levels beyond the share are not worth finding: stop looking there.
        level, deeper = _levels_of(_dependences(replay, plan, inputs, n),
                                   tf.cast(share, tf.int32) + 1)
        depth = tf.cast(tf.reduce_max(tf.concat([level + 1, [0]], 0)), tf.float32)
        return tf.cond(tf.logical_not(deeper) & (depth <= share),
                       lambda: [*_run_levels(replay, plan, inputs, n, level),
                                tf.constant(True)], as_it_was)
    out = schedule() if isinstance(n, int) else tf.cond(n_tensor >= _LEVELS_MIN, schedule,
                                                         as_it_was)
    out = list(out)
    return out[:-1], out[-1]


class Kept(Exception):
    """The loop stays as it is, for the reason given."""


def _run_levels(replay, plan, inputs, n, level) -> list:
    keys = [*plan.recurrent, *plan.written]
    values = ([v for _, v, _ in plan.recurrent.values()] + [v for _, v in plan.written.values()]
              + [v for _, v in plan.reduced.values()])
    buffers = [tf.zeros([n, *v.shape.as_list()], v.dtype) for v in values[:len(keys)]]
    totals = [inputs[k] for k in plan.reduced]
    depth = tf.reduce_max(tf.concat([level + 1, [0]], 0))

    def step(at, *state):
        items, sums = list(state[:len(keys)]), list(state[len(keys):])
        rows = tf.cast(tf.reshape(tf.where(tf.equal(level, at)), [-1]), tf.int32)

        def loop_fn(j):
            t = tf.gather(rows, j)
            reads = {op: _read(plan, inputs, k, op, items[keys.index(k)], t)
                     for k, (_, _, ops) in plan.recurrent.items() for op in ops}
            mapped = replay.graph(plan.body, feeds(plan, inputs, t), only=values,
                                  substitute=reads)
            return [mapped[v.ref()] for v in values]
        # A level holds at least one iteration: no guard for none.
        out = _built(replay, loop_fn, tf.size(rows), nonempty=True)
        items = [tf.tensor_scatter_nd_update(b, rows[:, None], o) for b, o in zip(items, out)]
        sums = [_combine(how, s, _reduce(how, o)) for (how, _), s, o in
                zip(plan.reduced.values(), sums, out[len(keys):])]
        return (at + 1, *items, *sums)
    state = tf.while_loop(lambda at, *_: at < depth, step, (0, *buffers, *totals))[1:]
    lists = dict(zip(keys, state[:len(keys)]))
    return outputs(replay, plan, inputs, n, lists, dict(zip(plan.reduced, state[len(keys):])))


def _built(replay, loop_fn, n, nonempty=False):
    """The pfor of ``loop_fn`` over ``n`` iterations under the replay's memory budget;
    the chunk size that chose goes to ``replay.chunks``. A budget that fits a single
    iteration at a time is no reason to convert: the loop stays."""
    options = checks.options(fallback="error", randomness="different",
                             parallel_iterations=None, memory_budget=replay.budget)
    records = [] if replay.budget is not None else None
    out = api.build(loop_fn, n, options, records, nonempty=nonempty)
    count = n if isinstance(n, int) else None
    for record in records or ():
        if isinstance(record, api.ChunkRecord) and (count is None or record.chunk_size < count):
            if record.chunk_size == 1:
                raise Kept(f"under memory_budget={replay.budget} its pfor would run one "
                           f"iteration at a time (about {record.memory_estimate} bytes "
                           "each): no faster than the loop")
            replay.chunks.append(record)
    return out


def _writer(plan, inputs, k, index, t):
    """(the iteration that wrote item ``index`` of list ``k``, whether it ran before
    ``t``): only then does the item hold what an iteration wrote."""
    counter = plan.recurrent[k][0]
    start, step = inputs[counter], plan.counters[counter]
    if (_static(start), step) == (0, 1):  # item i is iteration i's (the usual loop)
        iteration = tf.cast(index, tf.int32)
        return iteration, (iteration >= 0) & (iteration < tf.cast(t, tf.int32))
    offset = tf.cast(index, start.dtype) - start
    iteration = offset // step
    earlier = (offset % step == 0) & (iteration >= 0) & (iteration < tf.cast(t, start.dtype))
    return tf.cast(iteration, tf.int32), earlier


def _dependences(replay, plan, inputs, n):
    """[n, reads]: the earlier iteration each read of iteration t sees, or -1."""
    reads = [op for _, _, ops in plan.recurrent.values() for op in ops]
    owners = [k for k, (_, _, ops) in plan.recurrent.items() for _ in ops]
    indices = [op.inputs[1] for op in reads]

    def loop_fn(t):
        mapped = replay.graph(plan.body, feeds(plan, inputs, t), only=indices)
        return [mapped[i.ref()] for i in indices]
    stacked = api.pfor(loop_fn, n, fallback="error")
    t = tf.range(n)
    columns = []
    for k, index, op in zip(owners, stacked, reads):
        # The loop's read of an item outside its list fails: so does the schedule.
        size = tf.cast(tf.raw_ops.TensorListLength(input_handle=inputs[k]), index.dtype)
        index = emit.checked(index, tf.reduce_all((index >= 0) & (index < size)), [
            f"vectorize_loops: {op.type} '{op.name}' reads an item outside its list of",
            size, "items"])
        rows = tf.reshape(t, [-1] + [1] * (index.shape.rank - 1))
        iteration, earlier = _writer(plan, inputs, k, index, rows)
        columns.append(tf.reshape(tf.where(earlier, iteration, -1), [n, -1]))
    return tf.concat(columns, 1)


def _levels_of(dependences, rounds):
    """Each iteration's level: 0 without an earlier read, else one more than the
    highest level it reads (a fixed point, reached after as many rounds as levels), and
    whether it was not reached within ``rounds`` (None: no limit). Compiled by XLA,
    which fuses a round's few small ops (2-3x faster than op by op)."""
    return _compiled_levels(dependences, tf.cast(-1 if rounds is None else rounds, tf.int32))


@tf.function(jit_compile=True, autograph=False)
def _compiled_levels(dependences, rounds):
    """``_levels_of``, with ``rounds`` < 0 for no limit."""
    n = tf.shape(dependences)[0]
    # Reads of no earlier iteration (-1) point at a last entry holding -1, so that a
    # round is one gather and one max.
    sources = tf.concat([tf.where(dependences >= 0, dependences, n),
                         tf.fill(tf.stack([n, 1]), n)], 1)
    bottom = tf.constant([-1], tf.int32)

    def round_(level):
        return tf.concat([tf.reduce_max(tf.gather(level, sources), 1) + 1, bottom], 0)

    def step(level, _, steps):
        for _ in range(_ROUNDS_PER_STEP - 1):  # a loop step costs more than a round
            level = round_(level)
        new = round_(level)
        return new, tf.reduce_any(tf.not_equal(new, level)), steps + 1
    most = (rounds + _ROUNDS_PER_STEP - 1) // _ROUNDS_PER_STEP
    level, deeper, _ = tf.while_loop(
        lambda _, changed, steps: changed & ((rounds < 0) | (steps < most)), step,
        (tf.concat([tf.zeros(tf.reshape(n, [1]), tf.int32), bottom], 0), tf.constant(True),
         tf.constant(0)))
    return level[:-1], deeper


def _read(plan, inputs, k, op, items, t):
    """The emitter of a read of list ``k`` at iteration ``t``: items earlier iterations
    wrote come from ``items``, the others from the list the loop started with."""
    def emit(new_inputs):
        index, shape = new_inputs[1], new_inputs[2]
        iteration, earlier = _writer(plan, inputs, k, index, t)
        written = tf.gather(items, tf.maximum(iteration, 0))
        dtype = op.get_attr("element_dtype")
        if inputs[k].op.type == "TensorListReserve":  # nothing set before the loop
            before = tf.zeros_like(written)
        elif op.type == "TensorListGetItem":
            before = tf.raw_ops.TensorListGetItem(input_handle=inputs[k], index=index,
                                                  element_shape=shape, element_dtype=dtype)
        else:
            before = tf.raw_ops.TensorListGather(input_handle=inputs[k], indices=index,
                                                 element_shape=shape, element_dtype=dtype)
        mask = earlier
        for _ in range(items.shape.rank - 1):  # (the item's axes)
            mask = mask[..., None]
        out = tf.where(mask, written, tf.cast(before, written.dtype))
        out.set_shape(op.outputs[0].shape)  # what the loop's read knew
        return [out]
    return emit


def outputs(replay, plan, inputs, n, lists, reduced) -> list:
    """The loop's outputs: counters after ``n`` iterations, ``lists`` ({position: the
    [n, ...] items written}) scattered into the lists the loop started with,
    ``reduced`` ({position: value}) as given, the rest unchanged."""
    outs = list(inputs)
    for k, step in plan.counters.items():
        outs[k] = _at(inputs[k], step, n)
    for k, items in lists.items():
        counter = (plan.written.get(k) or plan.recurrent[k])[0]
        if _fresh(inputs[k], n) and (_static(inputs[counter]), plan.counters[counter]) == (0, 1):
            # Every item written, in order: the list of the items (which XLA compiles,
            # where it has no scatter into a list).
            outs[k] = tf.raw_ops.TensorListFromTensor(
                tensor=items, element_shape=inputs[k].op.inputs[0])
            replay.whole[outs[k].ref()] = items
            continue
        indices = _at(inputs[counter], plan.counters[counter], tf.range(n))
        outs[k] = tf.raw_ops.TensorListScatterIntoExistingList(
            input_handle=inputs[k], tensor=items, indices=tf.cast(indices, tf.int32))
    for k, value in reduced.items():
        outs[k] = value
    return outs


def feeds(plan, inputs, t) -> dict:
    """The body's inputs at iteration ``t``: counters and invariants (the loop's state
    stays unfed: only the ops the plan replaces read it)."""
    state = {*plan.written, *plan.reduced, *plan.recurrent}
    out = {}
    for k, inp in enumerate(plan.body.inputs):
        if k in plan.counters:
            out[inp.ref()] = _at(inputs[k], plan.counters[k], t)
        elif k not in state:
            out[inp.ref()] = inputs[k]
    return out


def trip_count(replay, plan, inputs):
    """How often the loop runs: the least count over its condition's bounds, as a
    Python int where every bound is static."""
    bounds = [bound for _, bound, _, _ in plan.bounds]
    mapped = replay.graph(plan.cond, {t.ref(): v for t, v in zip(plan.cond.inputs, inputs)},
                          only=bounds)
    counts = []
    for k, bound, direction, inclusive in plan.bounds:
        start, step, bound = inputs[k], abs(plan.counters[k]), mapped[bound.ref()]
        if _static(start) is not None and _static(bound) is not None:
            distance = (int(_static(bound)) - int(_static(start))) * direction
        else:
            distance = tf.cast((tf.cast(bound, start.dtype) - start) * direction, tf.int64)
        count = distance // step + 1 if inclusive else (distance + step - 1) // step
        counts.append(max(count, 0) if isinstance(count, int) else tf.maximum(count, 0))
    if all(isinstance(c, int) for c in counts):
        return min(counts)
    return tf.cast(tf.reduce_min(tf.stack([tf.cast(c, tf.int64) for c in counts])), tf.int32)


def _check_item_shapes(plan, stacked_only):
    """Items must have one static shape: pfor checks at run time that every
    iteration's has one, and the loop may write items of different shapes, which only
    a whole-list read (a stack) refuses too. So a list the loop leaves only to be
    stacked may have items of shapes known at run time (``tf.map_fn``'s results)."""
    written = [v for k, (_, v) in plan.written.items() if k not in stacked_only]
    written += [v for _, v, _ in plan.recurrent.values()]
    for value in written:
        if not value.shape.is_fully_defined():
            raise ValueError(f"the items it writes ('{value.op.name}', shape "
                             f"{value.shape}) have shapes known only at run time")


def _reduce(how, values):
    return {"sum": tf.reduce_sum, "max": tf.reduce_max, "min": tf.reduce_min}[how](values, 0)


def _combine(how, a, b):
    return {"sum": tf.add, "max": tf.maximum, "min": tf.minimum}[how](a, b)


def _source_op(tensor):
    return loop_analysis.source(tensor).op


def _at(start, step, t):
    """A counter's value at iteration(s) ``t`` (``t`` itself for a counter from 0 by 1:
    the pfor's loop index, which its converters recognize)."""
    if isinstance(t, tf.Tensor) and (_static(start), step, start.dtype) == (0, 1, t.dtype):
        return t
    return start + step * tf.cast(t, start.dtype)


def _static(tensor):
    """A scalar's static value, or None: what ``tf.get_static_value`` finds, or what a
    few ops make of constants and static shapes (``tf.shape(x)[0]``; AutoGraph's trip
    count of ``tf.range`` under XLA)."""
    value = tf.get_static_value(tensor)
    if value is None:
        value = shapes.known_value(tensor, max_ops=8, calls=False)
    return None if value is None or getattr(value, "shape", ()) != () else value.item()


def _fresh(handle, n) -> bool:
    """Whether ``handle`` is a new list of exactly ``n`` (static) items."""
    if handle.op.type != "TensorListReserve" or not isinstance(n, int):
        return False
    return _static(handle.op.inputs[1]) == n
