"""``pf.vmap``: a vectorizing decorator that converts once per input signature.

The returned callable wraps the batched computation in one ``tf.function``, whose
cache is keyed by the input signature: a repeated call with the same shapes and dtypes
neither retraces ``fn`` nor reconverts it. ``trace_count`` tells how often it traced.
"""

from __future__ import annotations

import functools

import tensorflow as tf

from pfor_core import api, checks
from pfor_core import autograph


def _move_axis(tensor, source: int, dest: int, name: str = "in_axes"):
    """Move axis ``source`` to ``dest``; the one given by the user (``name``) is checked."""
    rank = tensor.shape.rank
    if rank is None:
        raise ValueError("vmap needs inputs and outputs of known rank")
    given = source if name == "in_axes" else dest
    if not -rank <= given < rank:
        what = "an argument" if name == "in_axes" else "an output (with the mapped axis)"
        raise ValueError(f"{name} entry {given} is out of range for {what} of rank {rank}: "
                         f"use an axis in [{-rank}, {rank - 1}]")
    source, dest = source % rank, dest % rank
    if source == dest:
        return tensor
    perm = [d for d in range(rank) if d != source]
    perm.insert(dest, source)
    return tf.transpose(tensor, perm)


def _broadcast_axes(axes, structure, name):
    """Expand an int/None axis spec to the structure of ``structure``."""
    if axes is None or isinstance(axes, int):
        return tf.nest.map_structure(lambda _: axes, structure)
    try:
        tf.nest.assert_same_structure(axes, structure, check_types=False)
    except (ValueError, TypeError):
        # A prefix spec (one entry per argument) applies to all leaves below it.
        if isinstance(axes, (list, tuple)) and len(axes) == len(structure):
            return type(structure)(_broadcast_axes(a, s, name) for a, s in zip(axes, structure))
        raise ValueError(f"{name}={axes!r} does not match the structure of the arguments "
                         f"{tf.nest.map_structure(lambda _: '.', structure)}") from None
    for a in tf.nest.flatten(axes):
        if a is not None and not isinstance(a, int):
            raise TypeError(f"{name} entries must be ints or None, got {a!r}")
    return axes


class _Vmapped:
    def __init__(self, fn, in_axes, out_axes, fallback, chunk_size):
        checks.callable_arg(fn, "fn")
        checks.options(fallback=fallback, randomness="different", parallel_iterations=chunk_size)
        self._fn = autograph.convert_user_fn(fn, autograph.caller_status())
        self._in_axes = in_axes
        self._out_axes = out_axes
        self._fallback = fallback
        self._chunk_size = chunk_size
        self.trace_count = 0
        self._batched = tf.function(self._run, autograph=False)
        functools.update_wrapper(self, fn)

    def __call__(self, *args):
        if not args:
            raise ValueError("a vmapped function needs at least one argument to map over")
        if not all(isinstance(a, tf.Tensor) for a in args):  # fast path: plain tensors
            args = tuple(tf.nest.map_structure(
                lambda a: a if isinstance(a, tf.Tensor) else tf.convert_to_tensor(a), args))
        try:
            return self._batched(*args)
        except tf.errors.InvalidArgumentError as err:
            checks.raise_clear_error(err)
            raise

    def _run(self, *args):
        self.trace_count += 1
        axes = _broadcast_axes(self._in_axes if not isinstance(self._in_axes, list)
                               else tuple(self._in_axes), args, "in_axes")
        flat_args, flat_axes = tf.nest.flatten(args), tf.nest.flatten(axes)
        mapped = [_move_axis(a, ax, 0) if ax is not None else a
                  for a, ax in zip(flat_args, flat_axes)]
        sizes = {m.shape[0] for m, ax in zip(mapped, flat_axes) if ax is not None}
        if not any(ax is not None for ax in flat_axes):
            raise ValueError("in_axes maps no argument: give at least one argument an int axis")
        static = {s for s in sizes if s is not None}
        if len(static) > 1:
            raise ValueError(f"vmap got mapped axes of different sizes {sorted(static)}")
        first = next(m for m, ax in zip(mapped, flat_axes) if ax is not None)
        n = static.pop() if static else tf.shape(first)[0]

        def loop_fn(i):
            row = [tf.gather(m, i) if ax is not None else m for m, ax in zip(mapped, flat_axes)]
            return self._fn(*tf.nest.pack_sequence_as(args, row))

        out = api.build(loop_fn, n, checks.options(
            fallback=self._fallback, randomness="different",
            parallel_iterations=self._chunk_size))
        out_axes = _broadcast_axes(self._out_axes, out, "out_axes")
        return tf.nest.map_structure(lambda t, ax: _move_axis(t, 0, ax, "out_axes"), out,
                                     out_axes)


def vmap(fn, in_axes=0, out_axes=0, *, fallback="warn", chunk_size=None):
    """Return ``fn`` vectorized over axis ``in_axes`` of its arguments (docs/api.rst).

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> dot = pf.vmap(lambda a, b: tf.tensordot(a, b, 1), in_axes=(0, None),
    ...               fallback="error")
    >>> dot(x, tf.constant([1., -1.])).numpy()
    array([-1., -1., -1.], dtype=float32)
    """
    return _Vmapped(fn, in_axes, out_axes, fallback, chunk_size)
