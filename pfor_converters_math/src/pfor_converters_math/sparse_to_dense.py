"""SparseToDense (what ``tf.sparse.to_dense`` emits) of per-iteration sparse tensors: the
indices, values, dense shape and default may each be invariant, stacked or (indices and
values, e.g. a decoder's output) ragged.

Every iteration's entries, one after the other, get their iteration number as a leading
index coordinate: one SparseToDense onto ``[n] + shape`` then builds all dense values,
and the kernel's checks (order, duplicates, bounds) still hold per iteration, since the
iteration coordinate only grows. A per-iteration dense shape gives results of different
shapes: the kernel fills the largest shape, the entries are checked against their own
iteration's shape (which the larger one would accept), and the result is ragged. A
per-iteration default fills what no entry set.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Ragged, Stacked, shapes


def _entries(ctx, value):
    """A component with a leading entry axis (indices [N, r], values [N]) as every
    iteration's entries one after the other, with each entry's iteration."""
    if isinstance(value, Ragged):
        flat, sizes = value.to_flat()
        counts = sizes[:, 0]
        inner = shapes.dims(value.padded)[2:]
        flat = shapes.reshape(flat, [tf.reduce_sum(counts)] + inner)
        return flat, shapes.owners(counts)
    tensor = ctx.stack(value)
    d = ctx.dims(tensor)
    return shapes.reshape(tensor, [d[0] * d[1]] + d[2:]), shapes.owners(tf.fill([ctx.n], d[1]))


def convert_sparse_to_dense(ctx):
    indices, dense_shape, values, default = ctx.inputs
    rank = dense_shape.shape[0] if dense_shape.shape.rank == 1 else None
    if indices.shape.rank not in (1, 2) or rank is None:
        raise Decline("indices of rank 1 or 2 and a 1-D output_shape of static size are "
                      "converted")
    flat, owner = _entries(ctx, indices)
    if indices.shape.rank == 1:  # a vector's positions
        flat = flat[:, None]
    index_dtype = flat.dtype
    if values.shape.rank == 0:  # one value for every entry
        vals = tf.gather(values.tensor, owner) if values.is_stacked else values.tensor
    else:
        vals, _ = _entries(ctx, values)
    n = tf.reshape(tf.cast(ctx.n, index_dtype), [1])
    full = tf.concat([tf.cast(owner, index_dtype)[:, None], flat], 1)
    if dense_shape.is_stacked:
        # Each entry within its own iteration's shape; the kernel checks the largest.
        own = tf.gather(dense_shape.tensor, owner)
        inside = tf.reduce_all(tf.logical_and(flat >= 0, flat < own))
        full = ctx.check(inside, "an index is out of bounds of its output_shape",
                         tensor=full)
        size = tf.reduce_max(tf.concat([dense_shape.tensor,
                                        tf.zeros_like(dense_shape.tensor[:1])], 0), 0)
    else:
        size = dense_shape.tensor
    out_shape = tf.concat([n, tf.cast(size, index_dtype)], 0)
    validate = ctx.attr("validate_indices")
    if default.is_stacked:
        zero = tf.zeros([], vals.dtype)
        dense = tf.raw_ops.SparseToDense(sparse_indices=full, output_shape=out_shape,
                                         sparse_values=vals, default_value=zero,
                                         validate_indices=validate)
        is_set = tf.raw_ops.SparseToDense(sparse_indices=full, output_shape=out_shape,
                                          sparse_values=True, default_value=False,
                                          validate_indices=False)
        fill = shapes.insert_axes(default.tensor, rank, ctx.n)
        dense = tf.where(is_set, dense, fill)
    else:
        dense = ctx.emit(full, out_shape, vals, default.tensor)[0]
    if not dense_shape.is_stacked:
        dense.set_shape(ctx.stacked_shape(ctx.output_shapes[0]))
        return Stacked(tensor=dense)
    static = ctx.output_shapes[0].as_list() if ctx.output_shapes[0].rank else [None] * rank
    dense.set_shape([ctx.n_static] + static)
    # Dimensions the body knows statically are the same in every iteration.
    lengths = tuple(None if static[d] is not None else
                    tf.cast(dense_shape.tensor[:, d], tf.int32) for d in range(rank))
    if all(length is None for length in lengths):
        return Stacked(tensor=dense)
    return Ragged.from_stacked(dense, lengths)


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("SparseToDense", convert_sparse_to_dense, inputs="?*?*")
