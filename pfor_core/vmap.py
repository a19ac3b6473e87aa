"""``pf.vmap``: a vectorizing decorator that converts once per input signature.

The returned callable wraps the batched computation in one ``tf.function``, whose
cache is keyed by the input signature: a repeated call with the same shapes and dtypes
neither retraces ``fn`` nor reconverts it. ``trace_count`` tells how often it traced.
"""

from __future__ import annotations

import collections.abc
import functools

import tensorflow as tf

from tensorflow.python.util import nest

from pfor_core import api, call_values, checks, eager_values, staging
from pfor_core import mapped as mapped_args
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
    if isinstance(tensor, tf.RaggedTensor):
        raise ValueError(f"{name}: a tf.RaggedTensor is mapped along axis 0 only (its rows); "
                         f"got axis {given}.")
    perm = [d for d in range(rank) if d != source]
    perm.insert(dest, source)
    return tf.transpose(tensor, perm)


def _flat_axes(axes, structure, name, path="") -> list:
    """One axis per leaf of ``structure`` (in ``tf.nest.flatten`` order), from an axis
    spec that matches it as a prefix, as JAX's do: an int or None applies to every leaf
    below it; a tuple or list matches a tuple or list (either kind) entry by entry, a
    dict matches a dict key by key. Flat, so the spec's container types never have to
    equal the structure's."""
    if axes is None or (isinstance(axes, int) and not isinstance(axes, bool)):
        return [axes] * len(tf.nest.flatten(structure))
    where = f"{name}{path}"
    shape = tf.nest.map_structure(lambda _: ".", structure)
    if isinstance(axes, collections.abc.Mapping):
        if not isinstance(structure, collections.abc.Mapping):
            raise ValueError(f"{where}={axes!r} is a dict but the value it maps is "
                             f"{shape}: give a dict only for a dict argument.")
        if set(axes) != set(structure):
            raise ValueError(f"{where} has keys {sorted(axes, key=str)} but the dict it "
                             f"maps has keys {sorted(structure, key=str)}: give one entry "
                             "per key.")
        keys = sorted(structure)  # tf.nest flattens a dict in sorted key order
        return [ax for k in keys
                for ax in _flat_axes(axes[k], structure[k], name, f"{path}[{k!r}]")]
    if isinstance(axes, (list, tuple)):
        if isinstance(structure, (list, tuple)) and len(axes) == len(structure):
            return [ax for k, (a, s) in enumerate(zip(axes, structure))
                    for ax in _flat_axes(a, s, name, f"{path}[{k}]")]
        raise ValueError(f"{where}={axes!r} does not match the structure of the "
                         f"{'outputs' if name == 'out_axes' else 'arguments'} {shape}: "
                         "give one entry per element.")
    raise TypeError(f"{name} entries must be ints or None, got {axes!r} at {where}.")


def _move_outputs(out, out_axes):
    """Each output's mapped axis (0) moved to its ``out_axes`` entry."""
    flat, axes = tf.nest.flatten(out), _flat_axes(out_axes, out, "out_axes")
    moved = []
    for k, (t, ax) in enumerate(zip(flat, axes)):
        if t is not None and ax is None:
            raise ValueError(f"out_axes gives None for output {k}: every output of a "
                             "vmapped function has the mapped axis; give the axis where "
                             "it goes (an int).")
        if t is None or (ax == 0 and not isinstance(t, tf.Tensor)):
            moved.append(t)  # None, or a composite (a distribution, ...) left as it is
            continue
        if not isinstance(t, (tf.Tensor, tf.RaggedTensor)):
            raise ValueError(f"out_axes gives {ax} for output {k}, a "
                             f"{type(t).__name__}: only tensors move their mapped axis; "
                             "give 0 for it.")
        moved.append(_move_axis(t, 0, ax, "out_axes"))
    return tf.nest.pack_sequence_as(out, moved)


class _Vmapped:
    def __init__(self, fn, in_axes, out_axes, fallback, chunk_size, memory_budget,
                 ragged_outputs):
        checks.callable_arg(fn, "fn")
        self._options = checks.options(fallback=fallback, randomness="different",
                                       parallel_iterations=chunk_size,
                                       memory_budget=memory_budget, chunk_name="chunk_size",
                                       ragged_outputs=ragged_outputs)
        self._fn = autograph.convert_user_fn(fn, autograph.caller_status())
        self._in_axes = in_axes
        self._out_axes = out_axes
        self.trace_count = 0
        self._eager_args = None  # the arguments of the eager call being run (_run)
        self._batched = tf.function(self._run, autograph=False)
        functools.update_wrapper(self, fn)

    def __call__(self, *args):
        if not args:
            raise ValueError("a vmapped function needs at least one argument to map over")
        if eager_values.building_v1_graph():
            # A v1 graph holds no eager value: eager arguments become constants, and an
            # eager variable (given or used by fn) is a clear error (eager_values.py).
            args = tuple(tf.nest.map_structure(
                lambda a: eager_values.graph_value(a, "args holds"), args))
            with eager_values.refused_as("fn"):
                return self._call(args)
        return self._call(args)

    def _call(self, args):
        if not all(isinstance(a, tf.Tensor) for a in args):  # fast path: plain tensors
            args = tuple(tf.nest.map_structure(
                lambda a: a if isinstance(a, (tf.Tensor, tf.RaggedTensor))
                else tf.convert_to_tensor(a), args))
        self._eager_args = args if tf.executing_eagerly() else None
        try:
            return staging.call(self._batched, *args)
        finally:
            self._eager_args = None

    def _run(self, *args):
        # Traced for an eager call: choices made while converting may read its values
        # (call_values.py); the trace keeps them for this input signature.
        eager = self._eager_args
        pairs = () if eager is None else zip(tf.nest.flatten(args, expand_composites=True),
                                             tf.nest.flatten(eager, expand_composites=True))
        with call_values.tracing(pairs):
            return self._traced(*args)

    def _traced(self, *args):
        self.trace_count += 1
        paths = nest.flatten_with_tuple_paths(args)
        flat_args = [a for _, a in paths]
        flat_axes = _flat_axes(self._in_axes, args, "in_axes")
        mapped = [_move_axis(a, ax, 0) if ax is not None else a
                  for a, ax in zip(flat_args, flat_axes)]
        if not any(ax is not None for ax in flat_axes):
            raise ValueError("in_axes maps no argument: give at least one argument an int axis")
        names = [f"args{''.join(f'[{p!r}]' for p in path)} (axis {ax})"
                 for (path, _), ax in zip(paths, flat_axes) if ax is not None]
        n = mapped_args.leading_size([m for m, ax in zip(mapped, flat_axes) if ax is not None],
                                     names, "the mapped axes of vmap's arguments")

        def loop_fn(i):
            row = [tf.gather(m, i) if ax is not None else m for m, ax in zip(mapped, flat_axes)]
            return self._fn(*tf.nest.pack_sequence_as(args, row))

        return _move_outputs(api.build(loop_fn, n, self._options), self._out_axes)


def vmap(fn, in_axes=0, out_axes=0, *, fallback="warn", chunk_size=None, memory_budget=None,
         ragged_outputs=False):
    """Return ``fn`` vectorized over axis ``in_axes`` of its arguments (docs/api.rst).

    A ``tf.RaggedTensor`` argument is mapped over its rows (axis 0); ``ragged_outputs``
    is as for ``pf.pfor``.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> dot = pf.vmap(lambda a, b: tf.tensordot(a, b, 1), in_axes=(0, None),
    ...               fallback="error")
    >>> dot(x, tf.constant([1., -1.])).numpy()
    array([-1., -1., -1.], dtype=float32)
    """
    return _Vmapped(fn, in_axes, out_axes, fallback, chunk_size, memory_budget, ragged_outputs)
