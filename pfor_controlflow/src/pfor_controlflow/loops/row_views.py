"""Per-iteration values a loop with per-iteration trip counts only reads an item of.

The active-subset loop (trip_counts.py) runs its body on the rows still running. A
per-iteration value from outside the loop, such as each example's whole input
sequence, would have to be compacted with those rows whenever some finish: at a large
batch almost every step, copying every sequence. Where the body only reads one item of
it per step (``x[t]``, ``tf.gather(x, t)``), the body sees a ``RowView`` instead: the
uncompacted value and the rows being converted. The slicing converters here read the
item straight from it by row number; any other converter gets the view materialized (its
rows gathered), as the core hands views to converters that do not declare they take them.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Stacked, View

# Body ops that read one item of a value; the converters below take them on a view.
READERS = ("StridedSlice", "GatherV2")


class RowView(View):
    """The rows ``rows`` of the stacked value ``base``, gathered only when read whole:
    ``base`` is ``[N, ...]`` for all N iterations of the enclosing loop, ``rows`` an
    int32 vector of the ones being converted; ``tensor`` is the gathered value."""

    __slots__ = ("base", "rows")

    def __init__(self, base: tf.Tensor, rows: tf.Tensor):  # pylint: disable=super-init-not-called
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "rows", rows)

    @property
    def tensor(self) -> tf.Tensor:  # pylint: disable=invalid-overridden-method
        return tf.gather(self.base, self.rows)

    def materialize(self) -> Stacked:
        """The converted rows of ``base``, gathered."""
        return Stacked(tensor=self.tensor)

    @property
    def dtype(self):
        return self.base.dtype

    @property
    def shape(self) -> tf.TensorShape:
        return self.base.shape[1:]

    def __repr__(self):
        return f"RowView(base={self.base!r})"


def only_read_by_item(graph, tensor) -> bool:
    """Whether every op of ``graph`` that reads ``tensor`` (a function input) reads one
    item of it, as its first input."""
    readers = [op for op in graph.get_operations() if any(t is tensor for t in op.inputs)]
    return bool(readers) and all(op.type in READERS and op.inputs[0] is tensor
                                 and not any(t is tensor for t in op.inputs[1:])
                                 for op in readers)


def _item(view, index, from_end=False):
    """``view``'s rows' items at ``index`` (an integer vector, one per row); with
    ``from_end``, negative indices count from the end, as in ``x[-1]``."""
    if from_end:
        size = tf.shape(view.base, out_type=index.dtype)[1]
        index = tf.where(index < 0, index + size, index)
    return tf.gather_nd(view.base, tf.stack([tf.cast(view.rows, index.dtype), index], 1))


def _constant(tensor, expected) -> bool:
    value = tf.get_static_value(tensor)
    return value is not None and list(value.reshape(-1)) == expected


def convert_item_slice(ctx):
    """``x[t]`` of a view: begin ``[t]``, the first axis shrunk, no other mask."""
    view = ctx.inputs[0]
    if not isinstance(view, RowView):
        return ctx.decline("not a row view")
    masks = [ctx.attr(m) for m in ("begin_mask", "end_mask", "ellipsis_mask",
                                   "new_axis_mask")]
    begin, strides = ctx.inputs[1], ctx.op.inputs[3]
    if (ctx.attr("shrink_axis_mask") != 1 or any(masks) or begin.shape != [1]
            or not _constant(strides, [1])):
        return ctx.decline("not a single item of the first axis")
    index = tf.reshape(ctx.stack(begin), [-1])
    return Stacked(tensor=_item(view, index, from_end=True))


def convert_item_gather(ctx):
    """``tf.gather(x, t)`` of a view with one index per row on the first axis."""
    view, index = ctx.inputs[0], ctx.inputs[1]
    if not isinstance(view, RowView):
        return ctx.decline("not a row view")
    if (index.shape.rank != 0 or ctx.attr("batch_dims") != 0
            or not _constant(ctx.op.inputs[2], [0])):
        return ctx.decline("not one index on the first axis")
    return Stacked(tensor=_item(view, ctx.stack(index)))
