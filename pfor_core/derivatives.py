"""Jacobians, hessians and per-example gradients, built on ``pfor``.

A jacobian row is the gradient of one output element: the loop body calls
``tape.gradient`` with a one-hot output gradient picked by the loop index. The forward
pass was recorded outside the body, so inside it only the backward ops depend on the
index: the forward pass is loop-invariant and computed once, not once per row.
Eagerly, the whole computation runs in one ``tf.function`` so that nested
derivatives (a hessian is a jacobian of a jacobian) see plain ops, not function calls.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core import api, autograph, checks, eager_values, forward, staging
from pfor_core.errors import ConversionError

_ZERO = tf.UnconnectedGradients.ZERO


def _in_graph(fn, *args, jit_compile=False):
    """Run ``fn(*args)`` in a graph: directly when already building one, else in a
    ``tf.function`` traced for this call (``args`` become its graph inputs, so a tape
    inside can watch them). With ``jit_compile`` the graph is its own function compiled
    by XLA, also inside a graph being built (that part alone is compiled).

    ``args`` is ``x`` where there are any: in a ``tf.compat.v1`` graph, its eager
    tensors become constants and an eager variable is a clear error (eager_values.py),
    as is TensorFlow's refusal of an eager value that ``f`` itself uses."""
    if not tf.executing_eagerly():
        args = [tf.nest.map_structure(lambda v: eager_values.graph_value(v, "x holds"), a)
                for a in args]
        with eager_values.refused_as("f"):
            if jit_compile:
                return staging.graph_function(fn, jit_compile=True)(*args)
            return fn(*args)
    if jit_compile:
        return _compiled_call(staging.graph_function(fn, jit_compile=True), args)
    return staging.call(staging.graph_function(fn), *args)


_XLA_LISTS = "XLA compilation requires a fixed tensor list size"


def _compiled_call(function, args):
    """``function(*args)`` compiled by XLA; XLA's refusal of a tensor list of no fixed
    size (what a while loop's gradient accumulates into) as a clear error."""
    try:
        return staging.call(function, *args)
    except tf.errors.InvalidArgumentError as err:
        if _XLA_LISTS not in str(err):
            raise
        raise ConversionError(
            "pfor: jit_compile=True: XLA cannot compile the vectorized derivative, which "
            "holds a tensor list of no fixed size (the accumulators of a tf.while_loop's "
            "gradient, e.g. a second derivative through a while loop, or a TensorArray of "
            "dynamic size). Call it with jit_compile=False: pfor vectorizes it without "
            f"XLA. (XLA said: {str(err).splitlines()[0]})") from None


def _check_jit_compile(jit_compile) -> None:
    if not isinstance(jit_compile, bool):
        raise TypeError(f"jit_compile must be True or False, got {jit_compile!r}.")


def _check_sources(sources, name):
    for leaf in tf.nest.flatten(sources):
        if not isinstance(leaf, (tf.Tensor, tf.Variable, tf.__internal__.types.Tensor)):
            raise TypeError(f"{name} must be a tensor, a variable or a nested structure of "
                            f"them, got {type(leaf).__name__}.")
        dtype = tf.as_dtype(leaf.dtype)
        if not (dtype.is_floating or dtype.is_complex):
            # The tape has no gradient for integers: it would give zeros silently.
            raise TypeError(f"{name} must be floating point to differentiate, got "
                            f"{dtype.name}: cast it first, e.g. tf.cast({name}, tf.float32).")


def _check_targets(targets, name="f", what="return"):
    for leaf in tf.nest.flatten(targets):
        if not isinstance(leaf, (tf.Tensor, tf.Variable)):
            raise TypeError(f"{name} must {what} a tensor or a nested structure of tensors, "
                            f"got {type(leaf).__name__}.")
        dtype = tf.as_dtype(leaf.dtype)
        if not (dtype.is_floating or dtype.is_complex):
            # The tape has no gradient through an integer output: zeros, silently.
            raise TypeError(f"{name} must {what} floating-point values to differentiate, "
                            f"got {dtype.name}: compute in floating point (e.g. cast the "
                            "inputs of the integer op, not its output).")


def _watch(tape, sources) -> None:
    """Watch tensors and variables; a Keras 3 variable is watched through the
    ``tf.Variable`` it holds."""
    for leaf in tf.nest.flatten(sources):
        if not isinstance(leaf, (tf.Tensor, tf.Variable)):
            leaf = getattr(leaf, "value", leaf)
        tape.watch(leaf)


def _size(shape: tf.TensorShape, dynamic: tf.Tensor):
    static = shape.num_elements()
    return static if static is not None else tf.reduce_prod(dynamic)


def _row_jacobians(tape, target, sources, options):
    """For each flat element k of ``target``: d target[k] / d sources, stacked."""
    flat_sources = tf.nest.flatten(sources)
    n = _size(target.shape, tf.shape(target))

    def loop_fn(i):
        seed = tf.reshape(tf.one_hot(i, n, dtype=target.dtype), tf.shape(target))
        return tape.gradient(target, flat_sources, output_gradients=seed,
                             unconnected_gradients=_ZERO)

    return api.build(loop_fn, n, options)


def _jacobian_in_graph(tape, target, sources, options):
    flat_sources = tf.nest.flatten(sources)
    out = []
    for y in tf.nest.flatten(target):
        rows = _row_jacobians(tape, y, sources, options)
        shaped = [tf.reshape(r, tf.concat([tf.shape(y), tf.shape(s)], 0))
                  for r, s in zip(rows, flat_sources)]
        out.append(tf.nest.pack_sequence_as(sources, shaped))
    return tf.nest.pack_sequence_as(target, out)


def _options(fallback, parallel_iterations, memory_budget=None):
    return checks.options(fallback=fallback, randomness="different",
                          parallel_iterations=parallel_iterations, memory_budget=memory_budget)


def tape_jacobian(tape, target, sources, *, fallback="warn", parallel_iterations=None,
                  mode="reverse", memory_budget=None):
    """Drop-in for ``GradientTape.jacobian``: shape ``target.shape + source.shape``,
    nested like ``target`` then like ``sources``. The tape must be persistent when it is
    used more than once.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> v = tf.constant([1., 2., 3.])
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(v)
    ...     y = v * v
    >>> pf.tape_jacobian(tape, y, v, fallback="error").numpy()
    array([[2., 0., 0.],
           [0., 4., 0.],
           [0., 0., 6.]], dtype=float32)
    """
    options = _options(fallback, parallel_iterations, memory_budget)
    forward.check_mode(mode, tape_based=True)
    _check_tape(tape)
    _check_sources(sources, "sources")
    _check_targets(target, "target", "be")
    return _in_graph(lambda: _jacobian_in_graph(tape, target, sources, options))


def tape_batch_jacobian(tape, target, source, *, fallback="warn", parallel_iterations=None,
                        mode="reverse", memory_budget=None):
    """Drop-in for ``GradientTape.batch_jacobian``: ``target[b]`` depends only on
    ``source[b]``; shape ``[B] + target.shape[1:] + source.shape[1:]``.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = x * tf.reduce_sum(x, axis=1, keepdims=True)
    >>> pf.tape_batch_jacobian(tape, y, x, fallback="error").shape
    TensorShape([3, 2, 2])
    """
    options = _options(fallback, parallel_iterations, memory_budget)
    forward.check_mode(mode, tape_based=True)
    _check_tape(tape)
    _check_sources(source, "source")
    _check_targets(target, "target", "be")
    return _in_graph(lambda: _batch_jacobian_in_graph(tape, target, source, options))


def _check_tape(tape):
    if not isinstance(tape, tf.GradientTape):
        raise TypeError(f"tape must be the tf.GradientTape that recorded target, got "
                        f"{type(tape).__name__}.")


def _check_batch_rows(target, source):
    if target.shape.rank is not None and target.shape.rank < 1:
        raise ValueError(f"batch_jacobian needs a target with a batch dimension, got shape "
                         f"{target.shape}.")
    rows, sources = target.shape[:1], tf.TensorShape(source.shape)[:1]
    if not rows.is_compatible_with(sources):
        raise ValueError(f"batch_jacobian: the output has {rows[0]} rows but the input has "
                         f"{sources[0]}; output row b must depend only on input row b (use "
                         "jacobian for other functions).")


def _forward_batch_jacobian(f, x, options, check_targets):
    def check(y):
        check_targets(y)
        for leaf in tf.nest.flatten(y):
            _check_batch_rows(leaf, x)

    return forward.batch_jacobian(f, x, options, check)


def _batch_jacobian_in_graph(tape, target, source, options):
    _check_batch_rows(target, source)
    shape = tf.shape(target)
    per_row = _size(target.shape[1:], shape[1:])

    def loop_fn(j):
        # One output feature for every example at once: rows do not mix.
        seed = tf.one_hot(j, per_row, dtype=target.dtype)
        seed = tf.reshape(tf.broadcast_to(seed, tf.stack([shape[0], per_row])), shape)
        return tape.gradient(target, source, output_gradients=seed,
                             unconnected_gradients=_ZERO)

    rows = api.build(loop_fn, per_row, options)  # [J, B, ...source]
    rank = rows.shape.rank
    moved = tf.transpose(rows, [1, 0] + list(range(2, rank)))
    return tf.reshape(moved, tf.concat([shape, tf.shape(source)[1:]], 0))


def _of_function(f, x, options, mode, finish, finish_forward, jit_compile):
    """Record ``f(x)`` on a tape and hand it to ``finish(tape, y, x, options)``, or
    run ``finish_forward(f, x, options, check)`` when forward mode is cheaper."""
    checks.callable_arg(f, "f")
    _check_sources(x, "x")
    forward.check_mode(mode)
    _check_jit_compile(jit_compile)
    f = autograph.convert_user_fn(f, autograph.caller_status())

    def compute(x):
        probe = forward.probe(f, x, _check_targets) if mode != "reverse" else None
        if forward.use_forward(mode, forward.static_size(x), probe):
            try:
                return finish_forward(f, x, options, _check_targets)
            except forward.Unsupported:
                if mode == "forward":
                    raise
        with tf.GradientTape(persistent=True) as tape:
            _watch(tape, x)
            y = f(x)
        _check_targets(y)
        return finish(tape, y, x, options)

    return _in_graph(compute, x, jit_compile=jit_compile)


def jacobian(f, x, *, fallback="warn", parallel_iterations=None, mode="reverse",
             memory_budget=None, jit_compile=False):
    """The jacobian of ``f`` at ``x``: shape ``f(x).shape + x.shape`` (nested).

    ``mode="reverse"`` runs one vectorized backward pass per output element,
    ``"forward"`` one vectorized forward (JVP) pass per input element, ``"auto"``
    forward when ``x`` has fewer elements than ``f(x)``. ``jit_compile=True`` compiles
    the vectorized computation with XLA (often 2x faster for recurrences on CPU; each
    eager call compiles anew, so call it from a ``tf.function`` to reuse it).

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> pf.jacobian(lambda v: v ** 2, tf.constant([1., 2., 3.]), fallback="error").numpy()
    array([[2., 0., 0.],
           [0., 4., 0.],
           [0., 0., 6.]], dtype=float32)
    """
    return _of_function(f, x, _options(fallback, parallel_iterations, memory_budget), mode,
                        _jacobian_in_graph, forward.jacobian, jit_compile)


def batch_jacobian(f, x, *, fallback="warn", parallel_iterations=None, mode="reverse",
                   memory_budget=None, jit_compile=False):
    """For ``f`` whose output row b depends only on input row b:
    shape ``[B] + y.shape[1:] + x.shape[1:]``. ``mode`` and ``jit_compile`` as for
    ``jacobian`` (``mode`` per row).

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> squares = lambda v: tf.reduce_sum(v ** 2, axis=1, keepdims=True)
    >>> pf.batch_jacobian(squares, x, fallback="error").numpy()
    array([[[ 2.,  4.]],
    <BLANKLINE>
           [[ 6.,  8.]],
    <BLANKLINE>
           [[10., 12.]]], dtype=float32)
    """
    return _of_function(f, x, _options(fallback, parallel_iterations, memory_budget), mode,
                        _batch_jacobian_in_graph, _forward_batch_jacobian, jit_compile)


def hessian(f, x, *, fallback="warn", parallel_iterations=None, mode="auto",
            memory_budget=None, jit_compile=False):
    """Second derivatives: shape ``f(x).shape + x.shape + x.shape``; ``f`` may return a
    non-scalar (a jacobian of a jacobian).

    ``mode="forward"``: forward-over-reverse (one vectorized JVP of the gradient per
    input element, as ``jax.hessian``); ``"reverse"``: reverse-over-reverse;
    ``"auto"``: forward-over-reverse for a non-scalar ``f``, reverse for a scalar.
    ``jit_compile`` as for ``jacobian``.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> pf.hessian(lambda v: tf.reduce_sum(v ** 3), tf.constant([1., 2.]),
    ...            fallback="error").numpy()
    array([[ 6.,  0.],
           [ 0., 12.]], dtype=float32)
    """
    checks.callable_arg(f, "f")
    _check_sources(x, "x")
    if len(tf.nest.flatten(x)) != 1:
        raise ValueError("hessian takes a single tensor or variable x; use jacobian of "
                         "jacobian for structures.")
    options = _options(fallback, parallel_iterations, memory_budget)
    forward.check_mode(mode)
    _check_jit_compile(jit_compile)
    f = autograph.convert_user_fn(f, autograph.caller_status())

    def first_derivatives(v):
        with tf.GradientTape(persistent=True) as tape:
            _watch(tape, v)
            y = f(v)
        _check_targets(y)
        if y.shape.num_elements() == 1:  # a gradient is the jacobian's one row
            grad = tape.gradient(y, v, unconnected_gradients=_ZERO)
            return tf.reshape(grad, tf.concat([tf.shape(y), tf.shape(grad)], 0))
        return _jacobian_in_graph(tape, y, v, options)

    def compute(x):
        probe = forward.probe(f, x, _check_targets) if mode != "reverse" else None
        # Forward-over-reverse for a non-scalar f: 2.1x faster at 64 inputs and 8 outputs,
        # a little slower for a scalar one (benchmarks/jacobian_modes.py).
        if probe and forward.can_run(mode, probe) and (mode == "forward" or probe.size != 1):
            try:
                return forward.jacobian(first_derivatives, x, options, _check_targets)
            except forward.Unsupported:
                if mode == "forward":
                    raise
        with tf.GradientTape(persistent=True) as outer:
            _watch(outer, x)
            with tf.GradientTape(persistent=True) as inner:
                _watch(inner, x)
                y = f(x)
            _check_targets(y)
            first = _jacobian_in_graph(inner, y, x, options)
        return _jacobian_in_graph(outer, first, x, options)

    return _in_graph(compute, x, jit_compile=jit_compile)


def per_example_gradients(loss_fn, variables, *batch, keepdims=False, fallback="warn",
                          parallel_iterations=None, memory_budget=None, jit_compile=False):
    """Gradients of each example's loss: one tensor per variable, ``[B] + var.shape``.

    ``loss_fn(*example)`` gets each ``batch`` tensor sliced to one row (with
    ``keepdims=True`` the row keeps a leading dimension of 1, as Keras models expect).
    ``jit_compile`` as for ``jacobian``.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> w = tf.Variable([1., 1.])
    >>> loss = lambda row: tf.reduce_sum(w * row) ** 2 / 2
    >>> (grads,) = pf.per_example_gradients(loss, [w], x, fallback="error")
    >>> grads.numpy()
    array([[ 3.,  6.],
           [21., 28.],
           [55., 66.]], dtype=float32)
    """
    checks.callable_arg(loss_fn, "loss_fn")
    if not batch:
        raise ValueError("per_example_gradients needs at least one batch tensor after "
                         "variables.")
    _check_sources(variables, "variables")
    flat, n = checks.elems(list(batch), "batch")
    options = _options(fallback, parallel_iterations, memory_budget)
    _check_jit_compile(jit_compile)
    loss_fn = autograph.convert_user_fn(loss_fn, autograph.caller_status())

    def loop_fn(i):
        example = [tf.gather(b, tf.reshape(i, [1])) if keepdims else tf.gather(b, i)
                   for b in flat]
        with tf.GradientTape() as tape:
            _watch(tape, variables)
            loss = loss_fn(*example)
        if loss.shape.rank not in (None, 0) and loss.shape.num_elements() != 1:
            raise ValueError(f"loss_fn must return a scalar loss per example, got shape "
                             f"{loss.shape}.")
        return tape.gradient(loss, variables, unconnected_gradients=_ZERO)

    return _in_graph(lambda: api.build(loop_fn, n, options), jit_compile=jit_compile)
