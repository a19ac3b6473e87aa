"""Mapped arguments: what ``vectorized_map``, ``map_fn``, ``vmap`` and
``per_example_gradients`` slice one row of per iteration.

The arguments are flattened to dense tensors (composite values to their components,
see ``composites``), each named for messages (``elems['x']``, ``batch[1]``). Their
leading sizes must agree: statically known sizes are compared at once (a
``ValueError`` naming the arguments and their sizes); sizes known only at run time are
compared by a check that the loop length depends on, so a mismatch fails before any row
is read, with the same text. ``vectorized_map`` also broadcasts arguments of one row
against the others, as ``tf.vectorized_map`` does.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf
from tensorflow.python.util import nest

from pfor_core import composites, emit


@dataclasses.dataclass(frozen=True)
class Mapped:
    """Flat mapped tensors, their names, and how to rebuild one row of the structure."""

    structure: object
    encoded: list  # one composites.Encoded per leaf of ``structure``
    tensors: list  # the flat dense tensors, rows along axis 0
    names: list  # one name per tensor

    def rows(self, rows: list):
        """The structure of one iteration, from one row (or a shared value) per tensor."""
        values, k = [], 0
        for encoded in self.encoded:
            count = len(encoded.tensors)
            values.append(encoded.rebuild(list(rows[k:k + count])))
            k += count
        return tf.nest.pack_sequence_as(self.structure, values)


def _name(name: str, path: tuple) -> str:
    return name + "".join(f"[{p!r}]" for p in path)


def flatten(value, name: str = "elems") -> Mapped:
    """``value`` (the argument ``name``) as flat dense tensors with rows."""
    leaves = nest.flatten_with_tuple_paths(value)
    if not leaves:
        raise ValueError(f"{name} must hold at least one tensor to map over.")
    encoded, tensors, names = [], [], []
    for path, leaf in leaves:
        label = _name(name, path)
        enc = composites.encode_mapped(leaf, label, what=f"{name} holds")
        encoded.append(enc)
        for k, t in enumerate(enc.tensors):
            names.append(label if len(enc.tensors) == 1 else f"{label} (component {k})")
            tensors.append(t)
    for t, label in zip(tensors, names):
        if t.shape.rank == 0:
            raise ValueError(f"{label} is a scalar; every tensor in {name} needs a leading "
                             "dimension to map over.")
    return Mapped(structure=value, encoded=encoded, tensors=tensors, names=names)


def _size(tensor):
    """The leading size: an int where static, else a scalar int32 tensor."""
    if tensor.shape.rank is not None and tensor.shape[0] is not None:
        return tensor.shape[0]
    if isinstance(tensor, tf.RaggedTensor):
        return tf.cast(tensor.nrows(), tf.int32)
    return tf.shape(tensor, out_type=tf.int32)[0]


def _listing(names, sizes) -> str:
    return ", ".join(f"{name} has {size}" for name, size in zip(names, sizes)
                     if isinstance(size, int))


def leading_size(tensors, names, what: str, *, broadcast: bool = False):
    """The common leading size of ``tensors`` (named ``names``; ``what`` names them
    together, e.g. "the tensors in elems"): an int where static, else a scalar tensor
    that carries the run-time check. With ``broadcast``, a size of 1 broadcasts against
    the others (as in numpy: against 0 too)."""
    sizes = [_size(t) for t in tensors]
    if len(sizes) == 1:
        return sizes[0]
    rule = ("each must have the same number of rows, or 1" if broadcast else
            "they must all have the same number of rows")
    static = [s for s in sizes if isinstance(s, int)]
    wanted = {s for s in static if not (broadcast and s == 1)}
    if len(wanted) > 1:
        raise ValueError(f"{what} have different leading sizes {sorted(set(static))}: "
                         f"{_listing(names, sizes)}; {rule}.")
    if len(static) == len(sizes):
        return wanted.pop() if wanted else 1
    # Some sizes are known only at run time: every size must equal the loop length
    # (or be 1 when broadcasting), checked before the loop length is used.
    sizes_t = tf.stack([tf.cast(s, tf.int32) for s in sizes])
    if wanted:
        n = tf.constant(wanted.pop(), tf.int32)
    elif broadcast:
        largest = tf.reduce_max(tf.where(tf.equal(sizes_t, 1), -1, sizes_t))
        n = tf.where(largest < 0, 1, largest)
    else:
        n = sizes_t[0]
    fits = tf.equal(sizes_t, n)
    if broadcast:
        fits = tf.logical_or(fits, tf.equal(sizes_t, 1))
    data = [f"pfor: {what} have different leading sizes ({rule}):"]
    for label, size in zip(names, sizes):
        data += [f"{label}:", size if isinstance(size, tf.Tensor) else str(size)]
    return emit.checked(n, tf.reduce_all(fits), data)


def rows_source(tensor, n, broadcast: bool):
    """What the body reads row ``i`` of: ``(tensor, shared)``. With ``broadcast``, a
    tensor of one row is shared by every iteration (read whole, as ``tensor[0]``) when
    its size is static; one whose size is known only at run time is broadcast to ``n``
    rows first (no copy when it has them), so the body still reads rows of the loop
    index, which converts to a slice."""
    if broadcast:
        size = _size(tensor)
        if isinstance(size, int) and size == 1:
            return tensor, True
        if not isinstance(size, int) and isinstance(tensor, tf.RaggedTensor):
            row = tf.minimum(tf.cast(tensor.nrows(), tf.int32) - 1, 0)
            return tensor, False  # one row only if n is 1 too: rows of the loop index
        if not isinstance(size, int):
            target = tf.concat([tf.reshape(tf.cast(n, tf.int32), [1]),
                                tf.shape(tensor, out_type=tf.int32)[1:]], 0)
            return tf.broadcast_to(tensor, target), False
    return tensor, False


def ragged_as_signed(out, signature):
    """What ``fn`` returned, with dense values where ``signature`` has a
    ``tf.RaggedTensorSpec`` of ragged rank >= 1 made ``tf.RaggedTensor``s of that rank."""
    def convert(spec, leaf):
        if (isinstance(spec, tf.RaggedTensorSpec) and spec.ragged_rank >= 1
                and not isinstance(leaf, tf.RaggedTensor)):
            return tf.RaggedTensor.from_tensor(leaf, ragged_rank=spec.ragged_rank)
        return leaf
    return _map_leaves(convert, signature, out)


def _map_leaves(fn, signature, value):
    """``fn(spec, leaf)`` over the leaves of ``value``, whose structure matches
    ``signature`` (checked before; lists and tuples may differ)."""
    leaves = [fn(s, v) for s, v in zip(tf.nest.flatten(signature), tf.nest.flatten(value))]
    return tf.nest.pack_sequence_as(value, leaves)


def ragged_results(result, signature):
    """Results where ``signature`` has a ``tf.RaggedTensorSpec``, as ``tf.RaggedTensor``s
    (of ragged rank one more than the spec's) even when every row has one shape."""
    def convert(spec, leaf):
        if isinstance(spec, tf.RaggedTensorSpec) and not isinstance(leaf, tf.RaggedTensor):
            leaf = tf.RaggedTensor.from_tensor(leaf, ragged_rank=spec.ragged_rank + 1)
        if isinstance(spec, tf.RaggedTensorSpec) and leaf.row_splits.dtype != spec.row_splits_dtype:
            leaf = leaf.with_row_splits_dtype(spec.row_splits_dtype)
        return leaf
    return _map_leaves(convert, signature, result)


def row_of(source, i):
    """Row ``i`` of what ``rows_source`` returned."""
    tensor, shared = source
    if isinstance(tensor, tf.RaggedTensor):  # slices with per-iteration bounds
        return tensor[0] if shared else tensor[i]
    return tensor[0] if shared else tf.gather(tensor, i)
