"""Conditionals whose branches give values of per-iteration shapes (ragged values, or
stacked values whose shape differs between the branches), e.g.
``tf.cond(p, lambda: tf.boolean_mask(x, x > 0), lambda: x[:2])``.

A branch output travels out of the branch as its *parts*: a padded tensor and every
per-iteration dimension's extent per row (``[n]`` int32 each; a stacked value's are its
sizes). Rows of different branches are put together by padding every branch's padded
tensor with zeros to the largest size along each dimension, then stitching (a
per-iteration predicate, subsets of rows) or selecting (masked: every branch on all
rows) padded tensors and extents alike. The result is ragged along the dimensions where
some branch is ragged or where the branches' sizes may differ; where they differ only if
a size unknown statically differs at run time, the lengths are marked usually uniform
(a graph of unknown shapes: ops without ragged converters then take the value stacked
where all rows agree, pfor_core/uniform_or_loop.py). Zero padding written by
``tf.pad``, ``dynamic_stitch`` and ``where`` keeps the ragged layout's promise: no
gradient flows through it.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from pfor_core.extend import Ragged, Stacked, usually_uniform


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Form:
    """How one branch gave one output: its static per-iteration shape and the
    dimensions along which it is ragged (``()`` for a stacked value)."""

    shape: tf.TensorShape
    ragged_axes: tuple

    @staticmethod
    def of(value) -> "Form":
        if isinstance(value, Ragged):
            return Form(shape=value.shape, ragged_axes=value.ragged_axes)
        return Form(shape=value.shape, ragged_axes=())


def rows_of(value, positions):
    """The rows at ``positions`` of a per-iteration input (stacked or ragged)."""
    if isinstance(value, Ragged):
        return Ragged(padded=tf.gather(value.padded, positions), lengths=tuple(
            None if length is None else tf.gather(length, positions)
            for length in value.lengths))
    return Stacked(tensor=tf.gather(value.tensor, positions))


def needs_parts(forms) -> bool:
    """Whether branches that gave an output in ``forms`` (one per branch that may run)
    need its parts to be put together: unless their static shapes are all known and
    the same (a plain stitch of rows of different shapes would fail)."""
    if any(f.ragged_axes for f in forms):
        return True
    shapes = [f.shape for f in forms]
    return (not all(s.is_fully_defined() for s in shapes)
            or len({tuple(s.as_list()) for s in shapes}) > 1)


def parts(value, stack) -> list[tf.Tensor]:
    """A branch output as its padded tensor followed by one extent vector per
    per-iteration dimension (``stack``: a layout value as a stacked tensor)."""
    if isinstance(value, Ragged):
        return [value.padded] + value.extents()
    tensor = stack(value)
    dims = tf.shape(tensor, out_type=tf.int32)
    return [tensor] + [tf.fill(dims[:1], dims[1 + d]) for d in range(tensor.shape.rank - 1)]


def count(rank: int) -> int:
    """How many tensors ``parts`` gives for an output of per-iteration rank ``rank``."""
    return 1 + rank


def varying_axes(forms) -> tuple:
    """The per-iteration dimensions along which rows from these branches may differ."""
    rank = forms[0].shape.rank
    axes = []
    for d in range(rank):
        sizes = {f.shape[d] for f in forms}
        if any(d in f.ragged_axes for f in forms) or None in sizes or len(sizes) > 1:
            axes.append(d)
    return tuple(axes)


def _doubtful_axes(forms) -> tuple:
    """The varying dimensions along which rows differ only if a branch of a statically
    unknown size differs at run time (no branch is ragged there, the known sizes agree):
    usually all rows agree (a graph with unknown shapes), so ops without converters for
    ragged values take them stacked where they do (``usually_uniform``)."""
    return tuple(d for d in varying_axes(forms)
                 if not any(d in f.ragged_axes for f in forms)
                 and len({f.shape[d] for f in forms} - {None}) <= 1)


def _padded_to(tensor, dims):
    """``tensor`` (``[m, ...]``) padded at the end of every dimension but the first with
    zeros to the sizes ``dims``."""
    extra = dims - tf.shape(tensor, out_type=tf.int32)[1:]
    paddings = tf.concat([tf.zeros([1, 2], tf.int32),
                          tf.stack([tf.zeros_like(extra), extra], axis=1)], 0)
    return tf.pad(tensor, paddings)


def static_sizes(pieces) -> bool:
    """Whether every branch's padded tensor has a static size in every dimension but the
    first (padding them to a common size then takes constant amounts, as an outer pfor
    or XLA needs)."""
    return all(p[0].shape[1:].is_fully_defined() for p in pieces)


def _common(pieces, original_shape):
    """Every branch's padded tensor padded to the largest size along each dimension
    (by constant amounts where the sizes are static)."""
    if len(pieces) == 1:
        return pieces
    static = [max(p.shape[1 + d] for p in pieces) if all(
        p.shape[1 + d] is not None for p in pieces) else None
        for d in range(original_shape.rank)]
    if None in static:
        dims = tf.reduce_max(tf.stack([tf.shape(p, out_type=tf.int32)[1:] for p in pieces]), 0)
    else:
        dims = tf.constant(static, tf.int32)
    out = []
    for p in pieces:
        if None in static:
            padded = _padded_to(p, dims)
        else:
            padded = tf.pad(p, [[0, 0]] + [[0, s - p.shape[1 + d]] for d, s in enumerate(static)])
        padded.set_shape([p.shape[0]] + static)
        out.append(padded)
    return out


def _layout(padded, extents, axes, original_shape, n_static, doubtful=()):
    padded.set_shape(tf.TensorShape([n_static]).concatenate(
        [None if d in axes else s for d, s in enumerate(original_shape.as_list())]))
    if not axes:
        return Stacked(tensor=padded)
    lengths = []
    for d, extent in enumerate(extents):
        if d in axes:
            extent.set_shape([n_static])
            lengths.append(usually_uniform(extent) if d in doubtful else extent)
        else:
            lengths.append(None)
    return Ragged(padded=padded, lengths=tuple(lengths))


def stitch(positions, pieces, forms, original_shape, n_static):
    """The output for all rows from the branches' parts (``pieces[b]``: branch b's, for
    its rows at ``positions[b]``)."""
    padded = _common([p[0] for p in pieces], original_shape)
    value = tf.dynamic_stitch(positions, padded)
    extents = [tf.dynamic_stitch(positions, [p[1 + d] for p in pieces])
               for d in range(original_shape.rank)]
    return _layout(value, extents, varying_axes(forms), original_shape, n_static,
                   _doubtful_axes(forms))


def select(taken, pieces, forms, original_shape, n_static):
    """The output for all rows, row j from the parts of branch ``taken[j]`` (every
    branch's parts hold all rows)."""
    padded = _common([p[0] for p in pieces], original_shape)
    value, extents = padded[-1], list(pieces[-1][1:])
    for b in reversed(range(len(pieces) - 1)):
        takes = tf.equal(taken, b)
        rows = tf.reshape(takes, [-1] + [1] * original_shape.rank)
        value = tf.where(rows, padded[b], value)
        extents = [tf.where(takes, e, f) for e, f in zip(pieces[b][1:], extents)]
    return _layout(value, extents, varying_axes(forms), original_shape, n_static,
                   _doubtful_axes(forms))


def chosen(taken_parts, forms, original_shape, n_static):
    """The output of an invariant predicate's conditional from the parts the taken
    branch gave (every row took it: it is ragged only where a branch is ragged)."""
    axes = tuple(sorted({d for f in forms for d in f.ragged_axes}))
    return _layout(taken_parts[0], list(taken_parts[1:]), axes, original_shape, n_static)
