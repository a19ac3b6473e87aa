"""Parsing serialized records: tf.Example protos (ParseExampleV2, ParseSingleExample) and
CSV lines (DecodeCSV), as in ``tf.data`` bodies that parse one record per element.

- ParseExampleV2 already parses a vector of protos into dense values with a leading
  batch axis, so one parse over the stacked strings (flattened to a vector when each
  iteration parses a vector itself) gives every iteration's dense values, stacked.
  ParseSingleExample (one proto, keys as attrs) becomes that same ParseExampleV2.
  Only dense features of fully defined shapes are batched: sparse and ragged outputs
  have per-iteration numbers of values (their indices / row splits would have to be
  split apart again), and a dense feature of unknown length (FixedLenSequenceFeature)
  is padded to the longest proto of the batch, which is not what one iteration gets.
  Those are declined. ``names`` only label parse errors: stacked names are kept, an
  invariant list (it cannot line up with the stacked protos) is dropped.
- DecodeCSV is elementwise over its records: one DecodeCSV over the stacked records
  gives stacked fields. The per-column defaults must be invariant.

The keys and the defaults of every feature must be invariant (the invariance patterns
say so); a malformed record fails the batched parse as it would fail its iteration.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Stacked, shapes


def _dense_only(num_sparse: int, num_ragged: int, dense_shapes) -> str | None:
    """Why a parse cannot be batched here, or None."""
    if num_sparse:
        return (f"{num_sparse} sparse feature(s) (VarLenFeature / SparseFeature): their "
                "per-iteration value counts differ; only dense features are batched")
    if num_ragged:
        return (f"{num_ragged} ragged feature(s) (RaggedFeature): their per-iteration value "
                "counts differ; only dense features are batched")
    for k, shape in enumerate(dense_shapes):
        if not tf.TensorShape(shape).is_fully_defined():
            return (f"dense feature {k} has shape {tf.TensorShape(shape)}, not fully "
                    "defined (FixedLenSequenceFeature): a batched parse pads it to the "
                    "longest record of the batch")
    return None


def _flat_records(ctx, value):
    """Stacked records ``[n]`` or ``[n, b]`` as a vector, and the leading dims to restore."""
    rank = value.shape.rank
    if rank is None or rank > 1:
        return None, None
    if rank == 0:
        return value.tensor, None
    lead = ctx.dims(value)[:2]
    return shapes.merge_leading(value.tensor, n=ctx.n), lead


def _restore(tensors, lead):
    """Split ``[n*b, ...]`` outputs back into ``[n, b, ...]``."""
    if lead is None:
        return [Stacked(tensor=t) for t in tensors]
    return [Stacked(tensor=shapes.reshape(t, lead + shapes.dims(t)[1:])) for t in tensors]


def convert_parse_example_v2(ctx):
    serialized, names, sparse_keys, dense_keys, ragged_keys, *defaults = ctx.inputs
    why = _dense_only(ctx.attr("num_sparse"), len(ctx.attr("ragged_value_types")),
                      ctx.attr("dense_shapes"))
    if why:
        return ctx.decline(why)
    records, lead = _flat_records(ctx, serialized)
    if records is None:
        return ctx.decline("serialized must be a scalar or a vector of known rank per "
                           "iteration")
    if names.is_stacked and names.shape.rank == serialized.shape.rank:
        labels = _flat_records(ctx, names)[0]
    else:
        labels = tf.constant([], tf.string)
    outs = ctx.emit(records, labels, sparse_keys.tensor, dense_keys.tensor,
                    ragged_keys.tensor, *(v.tensor for v in defaults))
    return _restore(outs, lead)


def convert_parse_single_example(ctx):
    serialized, *defaults = ctx.inputs
    dense_shapes = ctx.attr("dense_shapes")
    why = _dense_only(ctx.attr("num_sparse"), 0, dense_shapes)
    if why:
        return ctx.decline(why)
    if serialized.shape.rank != 0:
        return ctx.decline("serialized must be a scalar per iteration")
    keys = [k.decode() if isinstance(k, bytes) else k for k in ctx.attr("dense_keys")]
    none = tf.constant([], tf.string)
    outs = tf.raw_ops.ParseExampleV2(
        serialized=serialized.tensor, names=none, sparse_keys=none,
        dense_keys=tf.constant(keys, tf.string, shape=[len(keys)]), ragged_keys=none,
        dense_defaults=[v.tensor for v in defaults], num_sparse=0, sparse_types=[],
        ragged_value_types=[], ragged_split_types=[], dense_shapes=dense_shapes)
    return [Stacked(tensor=t) for t in outs.dense_values]


def convert_decode_csv(ctx):
    records, *defaults = ctx.inputs
    return ctx.emit_stacked(records.tensor, *(v.tensor for v in defaults))


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("ParseExampleV2", convert_parse_example_v2, inputs="S*UUU...")
    registry.add("ParseSingleExample", convert_parse_single_example, inputs="SU...")
    registry.add("DecodeCSV", convert_decode_csv, inputs="SU...")
