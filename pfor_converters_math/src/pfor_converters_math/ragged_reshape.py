"""``Reshape`` to a per-iteration shape: every iteration's elements, in row-major
order, laid out in its own target shape (the gradient of ``tf.boolean_mask`` reshapes
to the shape of its input, which differs between iterations; a sum's gradient
reshapes its invariant incoming gradient to a shape computed from a ragged input).

The elements are taken out of the padding one iteration after another (``to_flat``),
the ``-1`` of each target is resolved against that iteration's element count (which
must match, as the loop's Reshape checks), and the rows are padded again. A dimension
the body knows statically stays uniform; a result with no varying dimension is
stacked. Under XLA the padded sizes have no static bound: declined.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Ragged, Stacked, ragged_from_flat


def _flat(value, n):
    """Elements of every iteration in order, and each iteration's element count."""
    if isinstance(value, Ragged):
        flat, shapes = value.to_flat()
        return flat, tf.reduce_prod(shapes, axis=1)
    if not value.is_stacked:  # every iteration reshapes the same elements
        elements = tf.reshape(value.tensor, [-1])
        return tf.tile(elements, tf.reshape(n, [1])), tf.fill([n], tf.size(elements))
    tensor = value.tensor
    n = tf.shape(tensor, out_type=tf.int32)[0]
    count = tf.reduce_prod(tf.shape(tensor, out_type=tf.int32)[1:])
    return tf.reshape(tensor, [-1]), tf.fill([n], count)


def convert_reshape_per_iteration(ctx):
    """Reshape of a value (ragged, stacked or invariant) to a per-iteration (stacked)
    shape."""
    if ctx.compiled:
        raise Decline("padded sizes have no static bound under XLA")
    x, shape = ctx.inputs
    targets = tf.cast(ctx.stack(shape), tf.int32)
    rank = targets.shape[1] if targets.shape.rank == 2 else None
    if rank is None:
        raise Decline("the target rank is not static")
    flat, counts = _flat(x, ctx.n)
    # A -1 takes what the other dimensions leave of the iteration's elements.
    unknown = tf.equal(targets, -1)
    known = tf.reduce_prod(tf.where(unknown, 1, targets), axis=1)
    inferred = tf.math.floordiv(counts, tf.maximum(known, 1))
    targets = tf.where(unknown, inferred[:, None], targets)
    fits = tf.reduce_all(tf.equal(tf.reduce_prod(targets, axis=1), counts)) & tf.reduce_all(
        tf.reduce_sum(tf.cast(unknown, tf.int32), axis=1) <= 1)
    targets = ctx.check(fits, "the input's element count does not match the target shape "
                        "in some iteration (as Reshape requires)", tensor=targets)
    static = ctx.output_shapes[0]
    axes = [d for d in range(rank) if static.rank is None or static[d] is None]
    if not axes:  # the body knows the whole shape
        shape = tf.concat([[ctx.n], tf.constant(static.as_list(), tf.int32)], 0)
        return Stacked(tensor=tf.reshape(flat, shape))
    padded = ragged_from_flat(flat, targets, axes, static if static.rank is not None
                              else None).to_tensor()
    lengths = [targets[:, d] if d in axes else None for d in range(rank)]
    return Ragged(padded=padded, lengths=tuple(lengths))


def register(registry):
    registry.add("Reshape", convert_reshape_per_iteration, inputs="RS")
    # After shape_ops' converters for a target proven the same in every iteration.
    registry.add("Reshape", convert_reshape_per_iteration, inputs="SS", priority=-1)
    registry.add("Reshape", convert_reshape_per_iteration, inputs="US", priority=-1)
