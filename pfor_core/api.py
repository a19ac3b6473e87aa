"""``pf.pfor``: trace the body once, convert it, return stacked outputs.

Eagerly, the trace-convert-run is wrapped in a ``tf.function``; inside a graph
(``tf.function``, ``jit_compile``, legacy v1 graphs) the converted ops go straight into
the caller's graph. ``parallel_iterations=k`` converts the body once inside a
``tf.while_loop`` over chunks of at most k iterations.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core import checks
from pfor_core import autograph
from pfor_core.context import broadcast_invariant
from pfor_core.plugins import default_registry
from pfor_core.trace import trace_body
from pfor_core.walk import Conversion, Options


def pfor(loop_fn, iters, *, fallback="warn", parallel_iterations=None,
         randomness="different"):
    """Run ``loop_fn(i)`` for ``i`` in ``range(iters)``, vectorized (docs/api.rst).

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.pfor(lambda i: tf.gather(x, i) ** 2, 3, fallback="error").numpy()
    array([[ 1.,  4.],
           [ 9., 16.],
           [25., 36.]], dtype=float32)
    """
    options = checks.options(fallback=fallback, randomness=randomness,
                             parallel_iterations=parallel_iterations)
    checks.loop_fn(loop_fn)
    loop_fn = autograph.convert_user_fn(loop_fn, autograph.caller_status())
    if tf.executing_eagerly():
        n_static = checks.iters(iters, eager=True)
        run = tf.function(lambda: build(loop_fn, n_static, options), autograph=False)
        # Each eager call converts anew by design (pf.vmap caches); TF's retracing
        # warning would only be noise here.
        run._omit_frequent_tracing_warning = True  # pylint: disable=protected-access
        return checks.run_eagerly(run)
    return build(loop_fn, iters, options)


def build(loop_fn, iters, options: Options, records: list | None = None):
    """Emit the converted loop into the current graph; returns the stacked outputs."""
    if tf.executing_eagerly():
        raise RuntimeError("pfor_core.api.build emits graph ops: call it while a graph is "
                           "being built (pf.pfor wraps it in a tf.function eagerly).")
    n_static = checks.iters(iters, eager=False)
    n = tf.constant(n_static, tf.int32) if n_static is not None else checks.iters_tensor(iters)
    body = trace_body(loop_fn)
    k = options.parallel_iterations
    if k is None or (n_static is not None and n_static <= k):
        outputs = _convert_all(body, n, n_static, options, records)
    else:
        outputs = _convert_chunked(body, n, n_static, k, options, records)
    return tf.nest.pack_sequence_as(body.structure, outputs)


def _conversion(options, records, indices, start, n, n_static, chunked=False):
    return Conversion(registry=default_registry(), options=options, indices=indices,
                      start=start, n=n, n_static=n_static, records=records, chunked=chunked)


def _finish(conversion, layouts, body):
    """Stacked output tensors; invariant ones are broadcast only here, at the end."""
    outs = []
    for value, original in zip(layouts, body.outputs):
        t = value.tensor if value.is_stacked else broadcast_invariant(
            value.tensor, conversion.n, conversion.n_static)
        t.set_shape(tf.TensorShape([conversion.n_static]).concatenate(original.shape))
        outs.append(t)
    if conversion.side_effects:
        # Side effects nobody reads must still happen (also in legacy v1 graphs).
        with tf.control_dependencies(conversion.side_effects):
            outs = [tf.identity(t) for t in outs]
    return outs


def _convert_all(body, n, n_static, options, records):
    indices = tf.range(n) if n_static is None else tf.range(n_static)
    conversion = _conversion(options, records, indices, tf.constant(0), n, n_static)
    layouts = conversion.convert_body(body)
    outs = _finish(conversion, layouts, body)
    if not body.outputs and conversion.side_effects:
        tf.group(conversion.side_effects)
    return outs


def _convert_chunked(body, n, n_static, k, options, records):
    chunks = (n + (k - 1)) // k
    chunk_static = k if n_static is not None and n_static % k == 0 else None
    arrays = tuple(
        tf.TensorArray(t.dtype, size=chunks, infer_shape=False,
                       element_shape=tf.TensorShape([None]).concatenate(t.shape))
        for t in body.outputs)

    def chunk(c, *arrays):
        start = c * k
        size = tf.minimum(k, n - start)
        indices = tf.range(start, start + size)
        conversion = _conversion(options, records, indices, start, size, chunk_static,
                                 chunked=True)
        outs = _finish(conversion, conversion.convert_body(body), body)
        if not outs and conversion.side_effects:
            with tf.control_dependencies(conversion.side_effects):
                return (tf.identity(c + 1),)
        return (c + 1,) + tuple(a.write(c, t) for a, t in zip(arrays, outs))

    result = tf.while_loop(lambda c, *_: c < chunks, chunk, (tf.constant(0),) + arrays,
                           parallel_iterations=1)
    outs = []
    for array, original in zip(result[1:], body.outputs):
        t = _concat_chunks(array, chunks, original)
        t.set_shape(tf.TensorShape([n_static]).concatenate(original.shape))
        outs.append(t)
    return outs


def _concat_chunks(array, chunks, original):
    """Concatenate the chunks' outputs; with no chunk (n == 0 at run time) an empty
    tensor, whose unknown per-iteration dimensions are taken as 0."""
    if original.shape.is_fully_defined():
        return array.concat()
    empty_shape = [0] + [d if d is not None else 0 for d in original.shape.as_list()] \
        if original.shape.rank is not None else [0]
    return tf.cond(chunks > 0, array.concat, lambda: tf.zeros(empty_shape, original.dtype))


def vectorized_map(fn, elems, *, fallback="warn", parallel_iterations=None):
    """Like ``tf.vectorized_map``: ``fn`` gets one row of every tensor in ``elems``.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.vectorized_map(tf.reduce_max, x, fallback="error").numpy()
    array([2., 4., 6.], dtype=float32)
    """
    checks.callable_arg(fn, "fn")
    flat, n = checks.elems(elems)
    fn = autograph.convert_user_fn(fn, autograph.caller_status())

    def loop_fn(i):
        return fn(tf.nest.pack_sequence_as(elems, [tf.gather(e, i) for e in flat]))

    return pfor(loop_fn, n, fallback=fallback, parallel_iterations=parallel_iterations)


def map_fn(fn, elems, *, fn_output_signature=None, fallback="warn"):
    """A vectorized drop-in for the common uses of ``tf.map_fn``.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.map_fn(lambda row: row[0] + row[1], x, fn_output_signature=tf.float32,
    ...           fallback="error").numpy()
    array([ 3.,  7., 11.], dtype=float32)
    """
    checks.callable_arg(fn, "fn")
    flat, n = checks.elems(elems)
    fn = autograph.convert_user_fn(fn, autograph.caller_status())

    def loop_fn(i):
        out = fn(tf.nest.pack_sequence_as(elems, [tf.gather(e, i) for e in flat]))
        if fn_output_signature is not None:
            checks.output_signature(out, fn_output_signature)
        return out

    return pfor(loop_fn, n, fallback=fallback)

