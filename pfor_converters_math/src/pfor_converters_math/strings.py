"""String ops in every layout.

Ops that keep their input's shape: the kernels act on each string alone, so a stacked
input is converted as it is (attrs such as a regex, a hash key or a format are the same
in every iteration by construction).

- Elementwise ops (upper/lower, static regex replace, to_number, as_string, hashing,
  unicode script/transcode, strip) re-emit the op on the stacked strings.
- RegexReplace takes its pattern and rewrite as scalar inputs: with invariant ones it is
  elementwise; the kernel has one pattern per call, so per-iteration patterns have no
  batched form (the fallback loop runs them).
- Substr broadcasts its string input against ``pos``/``len`` (which must have one
  shape): each operand is broadcast to the stacked shape of the result, so any of the
  three may be per-iteration.
- StringJoin takes scalars or tensors of one shape: stacked scalars and invariant
  tensors are broadcast to ``[n] + shape``; invariant scalars stay as they are.
- ReduceJoin over invariant axes reduces the per-iteration axes (shifted past the
  iteration axis); per-iteration axes have no batched form.
- StringLength (of the tokens, say) is elementwise, for stacked and ragged strings.
- ``tf.strings.split`` of a per-iteration string vector (StringSplitV2): the tokens
  (``values``) and their ``indices`` are ragged along their first dimension, the dense
  ``shape`` (``[strings, most tokens in one string]``) is stacked. One StringSplitV2
  over every iteration's strings at once: each string splits on its own (``maxsplit``
  counts per string), so the tokens come out string after string, that is iteration
  after iteration. A token's row in its iteration is its global string number minus the
  number of strings of the iterations before.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Ragged, Stacked, elementwise, shapes

ELEMENTWISE = ("StringUpper", "StringLower", "StaticRegexReplace", "StringToNumber",
               "AsString", "StringToHashBucket", "StringToHashBucketFast",
               "StringToHashBucketStrong", "UnicodeScript", "UnicodeTranscode", "StringStrip")


def convert_regex_replace(ctx):
    """RegexReplace of stacked strings with an invariant pattern and rewrite."""
    x, pattern, rewrite = ctx.inputs
    return ctx.emit_stacked(x.tensor, pattern.tensor, rewrite.tensor)


def _broadcast_shape(ctx, values):
    """The stacked shape ``[n] + broadcast(per-iteration shapes)`` as a 1-D tensor, and
    the per-iteration rank (an int; declines when it is unknown)."""
    rank = shapes.max_rank(values)
    if not isinstance(rank, int):
        raise Decline("an operand's rank is unknown")
    per_iteration = [tf.shape(v.tensor)[1:] if v.is_stacked else tf.shape(v.tensor)
                     for v in values]
    common = per_iteration[0]
    for s in per_iteration[1:]:
        common = tf.broadcast_dynamic_shape(common, s)
    return tf.concat([tf.reshape(ctx.n, [1]), common], 0), rank


def _per_iteration_shape(value):
    return tf.shape(value.tensor)[1:] if value.is_stacked else tf.shape(value.tensor)


def _same_shapes(ctx, values, message: str):
    """A run-time check that ``values`` have one per-iteration shape (the kernel's rule,
    which broadcasting the operands would otherwise hide); declines on unequal ranks
    (the fallback loop then fails as the loop does). Returns a tensor to order after it."""
    if len({v.shape.rank for v in values}) > 1:
        raise Decline("operands of different ranks (the kernel rejects them)")
    first = _per_iteration_shape(values[0])
    same = tf.reduce_all([tf.reduce_all(tf.equal(first, _per_iteration_shape(v)))
                          for v in values[1:]] or [True])
    return ctx.check(same, message, tensor=first)


def _broadcast_to(ctx, value, target, rank):
    """A layout value broadcast to the stacked ``target`` shape (per-iteration rank
    ``rank``): stacked values get size-1 axes after the iteration axis first."""
    tensor = shapes.insert_axes(value.tensor, rank, ctx.n) if value.is_stacked else value.tensor
    return tf.broadcast_to(tensor, target)


def convert_substr(ctx):
    """Substr(input, pos, len), any of them per-iteration: all three broadcast to the
    result's stacked shape (pos and len keep one shape, as the kernel requires)."""
    target, rank = _broadcast_shape(ctx, ctx.inputs)
    checked = _same_shapes(ctx, ctx.inputs[1:], "pos and len should have the same shape")
    with tf.control_dependencies([checked]):
        target = tf.identity(target)
    out = ctx.emit(*(_broadcast_to(ctx, v, target, rank) for v in ctx.inputs))[0]
    out.set_shape(ctx.stacked_shape(ctx.output_shapes[0]))
    return Stacked(tensor=out)


def convert_string_join(ctx):
    """StringJoin of scalars and same-shape tensors, some of them per-iteration."""
    ranks = [v.shape.rank for v in ctx.inputs]
    if None in ranks:
        raise Decline("an input's rank is unknown")
    shaped = [v for v, r in zip(ctx.inputs, ranks) if r > 0]
    if not shaped:  # all scalars per iteration: the op broadcasts [n] against scalars
        return ctx.emit_stacked(*(v.tensor for v in ctx.inputs))
    target, rank = _broadcast_shape(ctx, shaped)
    checked = _same_shapes(ctx, shaped, "inputs must be scalars or of one shape")
    with tf.control_dependencies([checked]):
        target = tf.identity(target)
    tensors = [v.tensor if not v.is_stacked and r == 0 else _broadcast_to(ctx, v, target, rank)
               for v, r in zip(ctx.inputs, ranks)]
    out = ctx.emit(*tensors)[0]
    out.set_shape(ctx.stacked_shape(ctx.output_shapes[0]))
    return Stacked(tensor=out)


def convert_reduce_join(ctx):
    """ReduceJoin of stacked strings over invariant axes: the axes shifted by one."""
    x, axes = ctx.inputs
    rank = x.shape.rank
    if rank is None:
        raise Decline("the input's rank is unknown")
    indices = axes.tensor
    normal = tf.where(indices < 0, indices + rank, indices)
    # An out-of-range axis becomes one past the stacked rank, so that the kernel
    # rejects it as the loop's would.
    valid = tf.logical_and(normal >= 0, normal < rank)
    shifted = tf.where(valid, normal + 1, tf.fill(tf.shape(normal), tf.cast(rank + 1, normal.dtype)))
    out = ctx.emit(x.tensor, shifted)[0]
    out.set_shape(ctx.stacked_shape(ctx.output_shapes[0]))
    return Stacked(tensor=out)


def convert_string_split(ctx):
    """StringSplitV2 of a stacked or ragged string vector, with an invariant sep."""
    if ctx.compiled:
        return ctx.decline("the number of tokens has no static bound under XLA")
    source, sep = ctx.inputs
    if isinstance(source, Ragged):
        flat, sizes = source.to_flat()
        counts = sizes[:, 0]
    else:
        tensor = ctx.stack(source)
        width = tf.shape(tensor)[1]
        flat, counts = tf.reshape(tensor, [-1]), tf.fill([ctx.n], width)
    indices, values, _ = tf.raw_ops.StringSplitV2(
        input=flat, sep=sep.tensor, maxsplit=ctx.attr("maxsplit"))
    strings = tf.cast(indices[:, 0], tf.int32)  # each token's global string number
    owner_of_string = shapes.owners(counts)
    owner = tf.gather(owner_of_string, strings)
    first_string = tf.cumsum(counts, exclusive=True)
    local = tf.cast(strings - tf.gather(first_string, owner), tf.int64)
    tokens = tf.math.bincount(owner, minlength=ctx.n, maxlength=ctx.n, dtype=tf.int32)
    local_indices = tf.stack([local, indices[:, 1]], axis=1)
    # Most tokens in one string, per iteration (0 for an iteration with no string).
    per_string = tf.math.bincount(strings, minlength=tf.size(flat), maxlength=tf.size(flat),
                                  dtype=tf.int64)
    most = tf.maximum(tf.math.unsorted_segment_max(per_string, owner_of_string, ctx.n), 0)
    shape = tf.stack([tf.cast(counts, tf.int64), most], axis=1)
    return [Ragged.from_row_lengths(local_indices, tokens),
            Ragged.from_row_lengths(values, tokens),
            Stacked(tensor=shape)]


def convert_string_length(ctx):
    """StringLength (``tf.strings.length``), elementwise: of a ragged input the padding
    is ``""``, whose length is the zero a ragged value's padding must be."""
    x = ctx.inputs[0]
    padded = x.padded if isinstance(x, Ragged) else x.tensor
    lengths = tf.strings.length(padded, unit=ctx.attr("unit"))
    return x.with_padded(lengths) if isinstance(x, Ragged) else Stacked(tensor=lengths)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("StringSplitV2", convert_string_split, inputs="SU")
    registry.add("StringSplitV2", convert_string_split, inputs="RU")
    registry.add("StringLength", convert_string_length, inputs="S")
    registry.add("StringLength", convert_string_length, inputs="R")
    registry.add(ELEMENTWISE, elementwise, inputs="S")
    registry.add("RegexReplace", convert_regex_replace, inputs="SUU")
    registry.add("Substr", convert_substr, inputs="***")
    registry.add("StringJoin", convert_string_join, inputs="*...")
    registry.add("ReduceJoin", convert_reduce_join, inputs="SU")
