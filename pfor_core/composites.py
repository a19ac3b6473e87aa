"""Composite tensors at the edges of a loop: flattened to dense components, rebuilt.

pfor converts dense tensors only, so a composite value that ``loop_fn`` returns, or
that ``vectorized_map`` / ``map_fn`` map over, travels as its component tensors:

- A composite tensor whose type spec is batchable (a ``BatchableTypeSpec``:
  ``tf.experimental.BatchableExtensionType``, a TensorFlow Probability distribution,
  or a user's ``tf.__internal__.CompositeTensor`` with such a spec) is taken apart and
  rebuilt by its own type spec, as ``tf.vectorized_map`` does: returned, its tensor
  list is stacked and rebuilt by the spec batched to the number of iterations; mapped
  over, its batched tensor list gives rows, each iteration's value rebuilt by the
  unbatched spec. Other composites are refused with a ``TypeError``.
- ``tf.experimental.ExtensionType`` values whose fields are tensors (or nested such
  types): a plain (not batchable) one travels field by field, stacked or sliced.
- ``tf.SparseTensor`` returned by the body: one SparseTensor with the iteration as a new
  first dimension (indices ``[n*nnz, 1 + rank]``, each dimension as large as the
  largest iteration's), as ``tf.vectorized_map`` builds it. Every iteration must hold
  the same number of values. Mapping over a SparseTensor is refused: its rows have
  different numbers of values.
- ``tf.IndexedSlices`` become the dense tensor they stand for, as in
  ``tf.vectorized_map``; so do ``tf.Variable`` values (read once, outside the loop, when
  mapped over).
- ``tf.RaggedTensor`` returned by the body: its flat values and row lengths, which
  differ in size between iterations (ragged values); rebuilt as a ``tf.RaggedTensor``
  with one more ragged dimension, row j being iteration j's value, as ``tf.map_fn``
  gives with a ``RaggedTensorSpec``. Mapped over, it is kept whole: the body takes its
  row ``rt[i]`` (slices with per-iteration bounds, see ``mapped``).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import tensorflow as tf
from tensorflow.python.framework import type_spec as type_spec_module

from pfor_core import eager_values


@dataclasses.dataclass(frozen=True)
class Encoded:
    """One user-level value as dense component tensors, and how to rebuild it."""

    tensors: list
    rebuild: Callable  # rebuild(tensors) -> the value
    ragged: bool = False  # components of a RaggedTensor (rebuilt from ragged values)
    path: str = "output"

    @property
    def names(self) -> list[str]:
        """A name per component tensor, for messages."""
        if len(self.tensors) == 1:
            return [self.path]
        return [f"{self.path} (component {k})" for k in range(len(self.tensors))]


def _dense(leaf, path, what):
    # An eager value while a v1 graph is built: a constant of it, or a clear error.
    leaf = eager_values.graph_value(leaf, f"{path} is")
    try:
        return tf.convert_to_tensor(leaf)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{what} {type(leaf).__name__} at {path}, which is not a tensor: "
                        f"{err}") from err


def _check_fields(value, path, what):
    """Every field of an ExtensionType must be a tensor or a nested ExtensionType: its
    components are then stacked or sliced one by one."""
    for field in type(value)._tf_extension_type_fields():  # pylint: disable=protected-access
        for leaf in tf.nest.flatten(getattr(value, field.name)):
            if isinstance(leaf, tf.experimental.ExtensionType):
                _check_fields(leaf, f"{path}.{field.name}", what)
            elif isinstance(leaf, tf.__internal__.CompositeTensor):
                raise TypeError(
                    f"{what} a {type(value).__name__} at {path} whose field "
                    f"'{field.name}' is a {type(leaf).__name__}: pfor maps extension "
                    "types whose fields are dense tensors only.")


def _batchable(value):
    spec = value._type_spec  # pylint: disable=protected-access
    return spec if isinstance(spec, type_spec_module.BatchableTypeSpec) else None


def _refuse(leaf, path, what, *, mapped):
    if isinstance(leaf, tf.SparseTensor) and mapped:
        raise TypeError(
            f"{what} a SparseTensor at {path}: its rows hold different numbers of "
            "values, which pfor cannot map over; map over tf.sparse.to_dense(...) "
            "instead.")


def _not_batchable(leaf, path, what, *, mapped) -> TypeError:
    spec = type(leaf._type_spec).__name__  # pylint: disable=protected-access
    verb = "maps over" if mapped else "supports"
    return TypeError(
        f"{what} a {type(leaf).__name__} at {path}, a composite tensor whose type spec "
        f"{spec} is not batchable: pfor {verb} dense tensors, SparseTensors, "
        "RaggedTensors, extension types and composite tensors whose type spec is a "
        "BatchableTypeSpec (tf.experimental.BatchableExtensionType, or a "
        "tf.__internal__.CompositeTensor whose spec subclasses BatchableTypeSpec).")


def _stacked_by_spec(leaf, spec) -> Encoded:
    """A returned composite as its spec's tensor list, rebuilt by the spec batched to
    the number of iterations (the stacked components' leading size)."""
    def rebuild(tensors):
        n = tensors[0].shape[0] if tensors else None
        return spec._batch(n)._from_compatible_tensor_list(tensors)  # pylint: disable=protected-access
    return Encoded(spec._to_tensor_list(leaf), rebuild)  # pylint: disable=protected-access


def _rows_by_spec(leaf, spec, path, what) -> Encoded:
    """A mapped composite as its spec's batched tensor list; a row of each rebuilds one
    iteration's value by the unbatched spec."""
    try:
        tensors = spec._to_batched_tensor_list(leaf)  # pylint: disable=protected-access
        row_spec = spec._unbatch()  # pylint: disable=protected-access
    except (TypeError, ValueError, NotImplementedError) as err:
        raise TypeError(f"{what} a {type(leaf).__name__} at {path} whose type spec "
                        f"cannot split it into rows to map over: {err}") from err
    return Encoded(tensors, row_spec._from_compatible_tensor_list)  # pylint: disable=protected-access


def _plain_extension_type(leaf) -> Encoded:
    """A plain extension type, field by field."""
    return Encoded(tf.nest.flatten(leaf, expand_composites=True),
                   lambda ts: tf.nest.pack_sequence_as(leaf, ts, expand_composites=True))


def _composite(leaf, path, what, *, mapped) -> Encoded:
    """An extension type or another composite, by its type spec where that is
    batchable (as ``tf.vectorized_map`` does), a plain extension type field by field."""
    if isinstance(leaf, tf.experimental.ExtensionType):
        _check_fields(leaf, path, what)
    spec = _batchable(leaf)
    if spec is not None:
        return _rows_by_spec(leaf, spec, path, what) if mapped else _stacked_by_spec(leaf, spec)
    if isinstance(leaf, tf.experimental.ExtensionType):
        return _plain_extension_type(leaf)
    raise _not_batchable(leaf, path, what, mapped=mapped)


def encode_output(leaf, path, what="loop_fn returned") -> Encoded:
    """One value a loop body returned, as per-iteration dense tensors; ``rebuild``
    takes their stacked forms."""
    _refuse(leaf, path, what, mapped=False)
    if isinstance(leaf, tf.RaggedTensor):
        return Encoded([leaf.flat_values, *leaf.nested_row_lengths()], _stacked_ragged,
                       ragged=True)
    if isinstance(leaf, tf.SparseTensor):
        return Encoded([leaf.indices, leaf.values, leaf.dense_shape], _stacked_sparse)
    if isinstance(leaf, (tf.IndexedSlices, tf.Variable)) or not isinstance(
            leaf, tf.__internal__.CompositeTensor):  # as it is: the caller makes it dense
        return Encoded([leaf], lambda ts: ts[0])
    return _composite(leaf, path, what, mapped=False)


def _stacked_sparse(tensors):
    """One SparseTensor from stacked components ``[n, nnz, r]``, ``[n, nnz]``,
    ``[n, r]``: the iteration number becomes the first index of every value."""
    indices, values, shapes = tensors
    n = tf.shape(indices, out_type=tf.int64)[0]
    nnz = tf.shape(indices, out_type=tf.int64)[1]
    rank = indices.shape[-1] if indices.shape[-1] is not None else tf.shape(indices)[-1]
    rows = tf.broadcast_to(tf.range(n, dtype=tf.int64)[:, None, None], tf.stack([n, nnz, 1]))
    flat = tf.reshape(tf.concat([rows, indices], -1), tf.stack([n * nnz, 1 + rank]))
    largest = tf.maximum(tf.reduce_max(shapes, axis=0), 0)  # zeros when n == 0
    dense_shape = tf.concat([tf.reshape(n, [1]), largest], 0)
    return tf.SparseTensor(flat, tf.reshape(values, tf.reshape(n * nnz, [1])), dense_shape)


def _stacked_ragged(tensors):
    """One RaggedTensor from the iterations' flat values and row lengths (each a
    ``tf.RaggedTensor`` of rows, or a dense tensor where every iteration has the same
    sizes): row j is iteration j's RaggedTensor."""
    values, *lengths = [t if isinstance(t, tf.RaggedTensor) else
                        tf.RaggedTensor.from_tensor(t) for t in tensors]
    outer = lengths[0].row_lengths()  # each iteration's number of rows
    nested = [outer] + [tf.cast(t.values, outer.dtype) for t in lengths]
    return tf.RaggedTensor.from_nested_row_lengths(values.values, nested, validate=False)


def encode_mapped(leaf, path, what="elems holds") -> Encoded:
    """One mapped value (rows along axis 0) as dense tensors with rows; ``rebuild``
    takes one row of each and gives one row of the value."""
    _refuse(leaf, path, what, mapped=True)
    if isinstance(leaf, tf.RaggedTensor):  # kept whole: the body reads its rows
        return Encoded([leaf], lambda ts: ts[0], path=path)
    if isinstance(leaf, (tf.IndexedSlices, tf.Variable)) or not isinstance(
            leaf, tf.__internal__.CompositeTensor):  # a variable is read once, here
        return Encoded([_dense(leaf, path, what)], lambda ts: ts[0])
    return _composite(leaf, path, what, mapped=True)
