"""``pf.pfor``: trace the body once, convert it, return stacked outputs.

Eagerly, the trace-convert-run is wrapped in a ``tf.function``; inside a graph
(``tf.function``, ``jit_compile``, legacy v1 graphs) the converted ops go straight into
the caller's graph. ``parallel_iterations=k`` converts the body once inside a
``tf.while_loop`` over chunks of at most k iterations.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf
from tensorflow.python.framework import func_graph, ops
from tensorflow.python.ops import control_flow_util

from pfor_core import (autograph, budget, checks, chunk_tails, empty, mapped, op_traces,
                       outputs as outputs_, staging, trace)
from pfor_core.plugins import default_registry
from pfor_core.trace import trace_body
from pfor_core.options import Options
from pfor_core.walk import Chunks, Conversion, Reported


def pfor(loop_fn, iters, *, fallback="warn", parallel_iterations=None,
         randomness="different", memory_budget=None, ragged_outputs=False):
    """Run ``loop_fn(i)`` for ``i`` in ``range(iters)``, vectorized (docs/api.rst).

    With no iterations nothing of the body runs, as in the loop: each output is empty,
    of shape ``[0]`` followed by the per-iteration shape the body knows statically (a
    dimension it does not know is 0).

    A returned value whose shape differs between iterations is an error naming it;
    with ``ragged_outputs=True`` it comes back as a ``tf.RaggedTensor``. A returned
    ``tf.RaggedTensor`` always comes back as one, with one more (ragged) dimension.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.pfor(lambda i: tf.gather(x, i) ** 2, 3, fallback="error").numpy()
    array([[ 1.,  4.],
           [ 9., 16.],
           [25., 36.]], dtype=float32)
    """
    options = checks.options(fallback=fallback, randomness=randomness,
                             parallel_iterations=parallel_iterations,
                             memory_budget=memory_budget, ragged_outputs=ragged_outputs)
    checks.loop_fn(loop_fn)
    loop_fn = autograph.convert_user_fn(loop_fn, autograph.caller_status())
    if tf.executing_eagerly():
        n_static = checks.iters(iters, eager=True)
        if options.parallel_iterations == "auto" and n_static:
            options = _fit_eagerly(loop_fn, n_static, options)
        return staging.call(staging.graph_function(lambda: build(loop_fn, n_static, options)))
    return build(loop_fn, iters, options)


def build(loop_fn, iters, options: Options, records: list | None = None, *,
          nonempty: bool = False):
    """Emit the converted loop into the current graph; returns the stacked outputs.
    ``nonempty``: the caller knows a run-time ``iters`` is positive (no guard for 0)."""
    if tf.executing_eagerly():
        raise RuntimeError("pfor_core.api.build emits graph ops: call it while a graph is "
                           "being built (pf.pfor wraps it in a tf.function eagerly).")
    n_static = checks.iters(iters, eager=False)
    n = tf.constant(n_static, tf.int32) if n_static is not None else empty.hide(
        checks.iters_tensor(iters))
    body = trace_body(loop_fn)
    probe = None  # (measured runs of kernels' workspaces: not of XLA's kernels)
    if (options.parallel_iterations == "auto" and (n_static or 0) >= 2 * budget.SMALL
            and not control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph())):
        probe = _first_iterations(body, n_static, options)
    with op_traces.shared():  # (the body's ops keep their own, traced above)
        return body.pack(_converted_outputs(body, n, n_static, options, records, nonempty,
                                            probe))


@dataclasses.dataclass(frozen=True)
class ChunkRecord:
    """The chunk size chosen under a memory budget and the peak bytes estimated for a
    chunk of that size (``pf.explain``: ``report.chunk_size``, ``report.memory_estimate``)."""

    chunk_size: int
    memory_estimate: int
    measured: bool = False  # raised to a measured run's peaks (kernels' workspaces)


def _converted_outputs(body, n, n_static, options, records, nonempty=False, probe=None):
    k = options.parallel_iterations
    if k == "auto" and n_static != 0:
        fitted, profile = _fit(body, options, n_static, probe=probe)
        k = _balanced(fitted, n_static)
        _record_chunks(records, k, n_static, profile)
    elif k == "auto":
        k = None
    if n_static == 0 and empty.possible(body):
        outputs = _no_iterations(body, options, records)
    elif k is None or (n_static is not None and n_static <= k):
        if n_static is None and not nonempty and empty.guard_needed(body):
            outputs = _convert_guarded(body, n, options, records)
        else:
            outputs = _convert_all(body, n, n_static, options, records)
    else:
        outputs = _convert_in_chunks(body, n, n_static, k, options, records)
    return outputs


def _record_chunks(records, k, n_static, profile):
    if records is not None:
        size = k if n_static is None else min(k, n_static)
        records.append(ChunkRecord(chunk_size=size, memory_estimate=profile.peak(size),
                                   measured=profile.measured))


def _convert_in_chunks(body, n, n_static, k, options, records):
    """Chunks, and the outputs that expanding ops make after them (chunk_tails.py)."""
    tails = chunk_tails.split(body)
    if tails is None:
        return _convert_chunked(body, n, n_static, k, options, records)
    parts = _convert_chunked(tails.body, n, n_static, k, options, records)
    indices = tf.range(n) if n_static is None else tf.range(n_static)
    conversion = _conversion(options, records, indices, tf.constant(0), n, n_static)
    return chunk_tails.finish(tails, parts, conversion)


def _fit(body, options: Options, n_static=None, measure=None, probe=None):
    """The chunk size for ``options.memory_budget`` (see budget.py), ``n_static`` where
    all iterations fit beyond their outputs, and the profile it was read from: the
    static one, else ``measure()``'s; ``probe()`` measures where kernels' workspaces
    make the static one uncertain (see ``budget.probed``)."""
    probe_options = dataclasses.replace(options, fallback="loop", parallel_iterations=None)

    def convert(n):
        conversion = _conversion(probe_options, [], tf.range(n), tf.constant(0),
                                 tf.constant(n), n)
        return _finish(conversion, conversion.convert_body(body), body, probe_options)

    profile = budget.static_profile(convert)
    if profile is None and measure is None:
        raise ValueError(
            "memory_budget / parallel_iterations='auto': the converted body's shapes are "
            "not all static here, so pfor cannot estimate its memory; call pf.pfor eagerly "
            "(it then measures a run), or pass parallel_iterations=k.")
    limit = options.memory_budget or budget.default_budget()
    if profile is None:
        profile = measure()
    elif profile.workspaces and probe is not None:
        profile = budget.probed(body.graph, profile, probe, profile.chunk_size(limit, n_static))
    return profile.chunk_size(limit, n_static), profile


def _balanced(k: int, n_static: int | None) -> int:
    """Chunks of equal size, no more of them than ``k`` needs (no small last chunk).
    A size that divides ``n`` is worth up to twice the chunks: every chunk then has one
    static size, and the outputs are assembled in place (chunk_buffers.py)."""
    if not n_static or k >= n_static:
        return k
    chunks = -(-n_static // k)
    dividing = [c for c in range(chunks, 2 * chunks + 1) if n_static % c == 0]
    return n_static // dividing[0] if dividing else -(-n_static // chunks)


def _fit_eagerly(loop_fn, n_static, options: Options) -> Options:
    """Resolve ``parallel_iterations='auto'`` before the run: from static shapes, or
    else by measuring the first iterations (bodies without effects only)."""
    with func_graph.FuncGraph("pfor_budget_trace").as_default():
        body = trace_body(loop_fn)
    measure = _first_iterations(body, n_static, options)
    probe = measure if n_static >= 2 * budget.SMALL else None
    chunk = _balanced(_fit(body, options, n_static, measure, probe)[0], n_static)
    return dataclasses.replace(options, parallel_iterations=chunk)


def _first_iterations(body, n_static, options: Options):
    """A function measuring the allocator's peaks over the loop's first iterations
    (budget.measured_profile): the traced body converted and run eagerly, out of any
    graph being built, on the eager values its captures come from. It raises
    ValueError where the body has effects, which the measured runs would repeat, or a
    capture is a graph's own tensor (no value to run on)."""
    def measure(small=budget.SMALL):
        effects = sorted({op.type for op in body.graph.get_operations()
                          if op._is_stateful and op.type not in _READS})  # pylint: disable=protected-access
        if effects:
            raise ValueError(
                "memory_budget / parallel_iterations='auto': the body's shapes are not all "
                f"static, and measuring a run would repeat its effects ({', '.join(effects)}); "
                "pass parallel_iterations=k.")
        eager = trace.on_eager_values(body)
        fixed = dataclasses.replace(options, parallel_iterations=None, memory_budget=None)

        def run(k):
            k = min(k, n_static)

            def converted():
                conversion = _conversion(fixed, [], tf.range(k), tf.constant(0),
                                         tf.constant(k), k)
                return _finish(conversion, conversion.convert_body(eager), eager, fixed)
            return staging.call(staging.graph_function(converted))
        with tf.init_scope():
            if not tf.executing_eagerly():
                raise ValueError("a tf.compat.v1 graph: no eager context to measure in")
            return budget.measured_profile(run, small)
    return measure


# Stateful ops that only read: measuring a run that has them changes nothing.
_READS = frozenset({"ReadVariableOp", "VarHandleOp", "ResourceGather", "VariableShape",
                    "VarIsInitializedOp", "Placeholder"})


def _no_iterations(body, options, records):
    """Empty outputs for a static ``iters == 0``. As in the loop, nothing of the body
    runs, and nothing of the converted body is built: grappler would see values of
    static size 0 everywhere, and its arithmetic optimizer divides by such dimensions
    (SIGFPE). Only for ``explain`` (``records``) is the body converted, into a graph
    that never runs, for an unknown number of iterations."""
    if records is not None:
        with empty.unrun_graph():
            n = tf.compat.v1.placeholder(tf.int32, [])
            _convert_all(body, n, None, options, records)
    return [empty.ragged_output(t) if options.ragged_outputs else empty.rows(t)
            for t in body.outputs]


def _convert_guarded(body, n, options, records):
    """``_convert_all`` run only when ``n > 0`` (see empty.guard_needed)."""
    made = []

    def convert():
        made[:] = _convert_all(body, n, None, options, records)
        return made

    def nothing():  # traced after ``convert``: ragged outputs are empty ragged ones
        return [empty.ragged_rows(t, like) if isinstance(like, tf.RaggedTensor)
                else empty.rows(t) for t, like in zip(body.outputs, made)]

    outs = tf.cond(n > 0, convert, nothing)
    outs = tf.nest.flatten(outs, expand_composites=False)
    for t, original in zip(outs, body.outputs):
        if not isinstance(t, tf.RaggedTensor):
            t.set_shape(tf.TensorShape([None]).concatenate(original.shape))
    return outs


def _conversion(options, records, indices, start, n, n_static, chunks=None, reported=None):
    return Conversion(registry=default_registry(), options=options, indices=indices,
                      start=start, n=n, n_static=n_static, records=records, chunks=chunks,
                      reported=reported)


def _finish(conversion, layouts, body, options):
    """The outputs (see outputs.py)."""
    return outputs_.finish(conversion, layouts, body, options.ragged_outputs)


def _convert_all(body, n, n_static, options, records):
    indices = tf.range(n) if n_static is None else tf.range(n_static)
    conversion = _conversion(options, records, indices, tf.constant(0), n, n_static)
    layouts = conversion.convert_body(body)
    outs = _finish(conversion, layouts, body, options)
    if not body.outputs and conversion.side_effects:
        tf.group(conversion.side_effects)
    return outs


def _convert_chunked(body, n, n_static, k, options, records):
    """The body converted for ``k`` iterations at a time, in a while loop over the
    chunks. Under XLA, which needs static shapes, with a static ``n``: every chunk in
    the loop has the static size ``k`` and the ``n % k`` iterations left over are
    converted once more, after the loop. (Not elsewhere: a second copy of a seeded
    stateful random op would repeat the draws of the loop's copy.) Outputs travel from
    the chunks as outputs.py says (ragged ones as elements and shapes)."""
    seed = None
    if options.randomness == "same":
        # Drawn once, before the chunks: a random op of the body seeds its one draw from
        # it in every chunk (the random converters), so all chunks share it.
        seed = tf.random.uniform([2], minval=-2**62, maxval=2**62, dtype=tf.int64)
    chunks = Chunks(total=n, seed=seed)
    reported = Reported()  # the loop's chunk and the rest warn once, together
    found: dict = {}  # output -> its ragged dimensions, learnt while tracing a chunk

    def convert(start, size, size_static, records):
        if size_static is not None:
            indices = start + tf.range(size_static)
        else:
            indices = tf.range(start, start + size)
        conversion = _conversion(options, records, indices, start, size, size_static,
                                 chunks=chunks, reported=reported)
        layouts = conversion.convert_body(body)
        return outputs_.chunk_parts(conversion, layouts, body, found), conversion

    if n_static is not None and control_flow_util.GraphOrParentsInXlaContext(
            tf.compat.v1.get_default_graph()):
        count, chunk_static, rest = tf.constant(n_static // k), k, n_static % k
    elif n_static is not None and n_static % k == 0:
        count, chunk_static, rest = tf.constant(n_static // k), k, 0
    else:
        count, chunk_static, rest = (n + (k - 1)) // k, None, 0
    arrays = outputs_.chunk_arrays(body, count, chunk_static)

    def chunk(c, *arrays):
        start = c * k
        size = tf.constant(k) if chunk_static else tf.minimum(k, n - start)
        parts, conversion = convert(start, size, chunk_static, records)
        if not parts and conversion.side_effects:
            with tf.control_dependencies(conversion.side_effects):
                return (tf.identity(c + 1),)
        return (c + 1,) + outputs_.write_chunk(arrays, c, parts)

    result = tf.while_loop(lambda c, *_: c < count, chunk, (tf.constant(0),) + arrays,
                           parallel_iterations=1)
    last = None
    if rest:
        # After the loop's chunks (the loop's result orders the rest's effects after).
        with tf.control_dependencies([result[0]]):
            start = tf.constant(n_static - rest)
        last, conversion = convert(start, tf.constant(rest), rest, None)
        if not body.outputs and conversion.side_effects:
            tf.group(conversion.side_effects)
    return outputs_.gather_chunks(result[1:], count, n_static, body, found,
                                  options.ragged_outputs, chunk_static=chunk_static,
                                  last=last)


def vectorized_map(fn, elems, *, fallback="warn", parallel_iterations=None,
                   memory_budget=None, ragged_outputs=False):
    """Like ``tf.vectorized_map``: ``fn`` gets one row of every tensor in ``elems``.

    A tensor of one row is broadcast: every iteration gets that row. Extension types
    are mapped field by field, other composite tensors of a batchable type spec by
    their spec, a variable as its value; ``fn`` may return them, SparseTensors and
    ``None``. A ``tf.RaggedTensor`` in ``elems`` gives each iteration its row;
    ``ragged_outputs`` is as for ``pf.pfor``.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.vectorized_map(tf.reduce_max, x, fallback="error").numpy()
    array([2., 4., 6.], dtype=float32)
    """
    checks.callable_arg(fn, "fn")
    return _map(fn, elems, broadcast=True, fallback=fallback,
                parallel_iterations=parallel_iterations, memory_budget=memory_budget,
                ragged_outputs=ragged_outputs)


def _map(fn, elems, *, broadcast, fallback, parallel_iterations, memory_budget,
         signature=None, ragged_outputs=False):
    """``fn`` over the rows of ``elems`` (``broadcast``: one row is shared by all),
    each result checked against ``signature`` when given."""
    flat = mapped.flatten(elems)
    fn = autograph.convert_user_fn(fn, autograph.caller_status())
    n = mapped.leading_size(flat.tensors, flat.names, "the tensors in elems",
                            broadcast=broadcast)
    sources = [mapped.rows_source(t, n, broadcast) for t in flat.tensors]
    ragged_spec = signature is not None and any(
        isinstance(s, tf.RaggedTensorSpec) for s in tf.nest.flatten(signature))

    def loop_fn(i):
        out = fn(flat.rows([mapped.row_of(source, i) for source in sources]))
        if signature is not None:
            checks.output_signature(out, signature)
            if ragged_spec:
                out = mapped.ragged_as_signed(out, signature)
        return out

    result = pfor(loop_fn, n, fallback=fallback, parallel_iterations=parallel_iterations,
                  memory_budget=memory_budget, ragged_outputs=ragged_outputs or ragged_spec)
    return mapped.ragged_results(result, signature) if ragged_spec else result


def map_fn(fn, elems, *, fn_output_signature=None, fallback="warn", parallel_iterations=None,
           memory_budget=None):
    """A vectorized drop-in for the common uses of ``tf.map_fn``.

    ``fn_output_signature`` (a dtype, ``tf.TensorSpec``, ``tf.RaggedTensorSpec`` or
    extension-type spec, or a nested structure of them) is checked against what ``fn``
    returns: structure, dtypes and per-element shapes. Where it holds a
    ``tf.RaggedTensorSpec``, the result is a ``tf.RaggedTensor`` of ragged rank one
    more than the spec's, as ``tf.map_fn`` gives (``fn`` may return a dense value whose
    shape differs between elements, or a ``tf.RaggedTensor``).

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.map_fn(lambda row: row[0] + row[1], x, fn_output_signature=tf.float32,
    ...           fallback="error").numpy()
    array([ 3.,  7., 11.], dtype=float32)
    """
    checks.callable_arg(fn, "fn")
    if fn_output_signature is not None:
        checks.signature(fn_output_signature)
    return _map(fn, elems, broadcast=False, fallback=fallback,
                parallel_iterations=parallel_iterations, memory_budget=memory_budget,
                signature=fn_output_signature)
