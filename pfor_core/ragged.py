"""The ragged layout: a per-iteration value whose shape differs between iterations.

A ``Ragged`` value is a padded stacked tensor ``[n, D_0, ..., D_{r-1}]`` and, for every
dimension ``d`` that varies, an int32 ``[n]`` tensor of each iteration's extent
(``lengths[d]``; ``None`` for a dimension that is ``D_d`` in every iteration). Iteration
j's value is ``padded[j, :lengths[0][j], :lengths[1][j], ...]``.

What every ragged value promises (converters that make one must keep it):

- the padding (every element outside an iteration's extent) is zero (``False``, ``""``);
- the padding was written by a select-like op (``tf.where``, a pad, a scatter), so a
  gradient that reaches the padding goes no further: converters may compute garbage,
  even NaN, in the padding of what they build, as long as they mask their own outputs
  (``Ragged.masked``) before returning them;
- ``lengths[d][j] <= D_d``; the padded size may exceed every iteration's extent.

A ragged value dispatches with the pattern letter ``R``. Converters registered with a
pattern that has no ``R`` never see one: the op takes the fallback loop, which slices
each iteration's value out of the padding and pads what it makes. Reading ``.tensor``
of a ragged value raises ``NotStacked`` (a ``Decline``), so code written for stacked
values that meets one by accident (a function body's output, say) declines instead of
using the padding as data.

An ``Unranked`` value is the fallback loop's output of no static rank (a
``tf.numpy_function`` without ``set_shape``): each iteration's elements, shape and rank
as the loop found them. Only the core handles it (see the class).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from pfor_core.errors import Decline
from pfor_core.layout import Stacked
from pfor_core.shapes import dims as dims_of
from pfor_core.shapes import masked_elements, owners


class NotStacked(Decline):
    """Raised when code written for stacked values reads ``.tensor`` of a ragged one."""


_USUALLY_UNIFORM = "_pfor_usually_uniform"


def usually_uniform(lengths: tf.Tensor) -> tf.Tensor:
    """``lengths`` (int32 ``[n]``) marked as equal in every iteration but for edge
    cases (``x[i:i + k]`` clipped at the end of the axis). An op with no converter for
    ragged values then gets such a value as stacked, checked at run time to have one
    shape (``Ragged.uniform``), instead of taking the fallback loop."""
    marked = tf.identity(lengths)
    setattr(marked, _USUALLY_UNIFORM, True)
    return marked


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Ragged:
    """One value per iteration, of a shape that differs between iterations.

    >>> import tensorflow as tf
    >>> from pfor_core.extend import Ragged
    >>> value = Ragged.from_row_lengths(tf.constant([1., 2., 3.]), tf.constant([2, 0, 1]))
    >>> value.padded.numpy().tolist(), value.code
    ([[1.0, 2.0], [0.0, 0.0], [3.0, 0.0]], 'R')
    >>> value.to_ragged_tensor().to_list()
    [[1.0, 2.0], [], [3.0]]
    """

    padded: tf.Tensor
    lengths: tuple

    is_stacked = True  # one value per iteration (but not as a plain stacked tensor)
    code = "R"

    def __post_init__(self):
        rank = self.padded.shape.rank
        if rank is None or rank < 1:
            raise ValueError(f"Ragged: padded must have a known rank >= 1, got {self.padded.shape}")
        if len(self.lengths) != rank - 1:
            raise ValueError(f"Ragged: {rank - 1} entries of lengths expected (one per "
                             f"per-iteration dimension), got {len(self.lengths)}")
        if all(length is None for length in self.lengths):
            raise ValueError("Ragged: at least one dimension must vary (else use Stacked)")

    # -- what it is ---------------------------------------------------------------
    @property
    def tensor(self):
        raise NotStacked("a ragged input (its shape differs between iterations): only "
                         "converters registered for the pattern letter R take it")

    @property
    def dtype(self):
        """The value's dtype."""
        return self.padded.dtype

    @property
    def rank(self) -> int:
        """Rank of one iteration's value."""
        return self.padded.shape.rank - 1

    @property
    def shape(self) -> tf.TensorShape:
        """Static shape of one iteration's value: ``None`` where it varies."""
        dims = self.padded.shape.as_list()[1:]
        return tf.TensorShape([None if length is not None else d
                               for d, length in zip(dims, self.lengths)])

    @property
    def ragged_axes(self) -> tuple[int, ...]:
        """The per-iteration dimensions that vary."""
        return tuple(d for d, length in enumerate(self.lengths) if length is not None)

    @property
    def usually_uniform(self) -> bool:
        """Whether every length that varies is marked ``usually_uniform``."""
        return all(getattr(length, _USUALLY_UNIFORM, False)
                   for length in self.lengths if length is not None)

    def with_padded(self, padded) -> "Ragged":
        """The same lengths over another padded tensor (whose padding must be zero)."""
        return Ragged(padded=padded, lengths=self.lengths)

    # -- extents and masks -----------------------------------------------------------
    def extents(self) -> list[tf.Tensor]:
        """Each iteration's extent of every dimension: ``rank`` int32 ``[n]`` tensors."""
        n, *dims = dims_of(self.padded)
        return [length if length is not None else tf.fill([n], dims[d])
                for d, length in enumerate(self.lengths)]

    def shapes(self) -> tf.Tensor:
        """Each iteration's shape: int32 ``[n, rank]``."""
        if self.rank == 0:
            return tf.zeros([dims_of(self.padded)[0], 0], tf.int32)
        return tf.stack(self.extents(), axis=1)

    def mask(self, axes=None) -> tf.Tensor:
        """Boolean, True inside each iteration's extent along ``axes`` (per-iteration
        dimensions; default all that vary). Its shape is ``[n, ...]`` with size 1 in
        the dimensions it does not depend on, so it broadcasts against ``padded``."""
        axes = self.ragged_axes if axes is None else tuple(axes)
        dims = dims_of(self.padded)
        rank = self.rank
        mask = None
        for d in axes:
            length = self.lengths[d]
            if length is None:
                continue
            along = [1] * (1 + d) + [-1] + [1] * (rank - d - 1)
            if isinstance(dims[1 + d], int):  # one constant
                positions = tf.constant(np.arange(dims[1 + d], dtype=np.int32).reshape(along))
            else:
                positions = tf.reshape(tf.range(dims[1 + d]), along)
            inside = positions < tf.reshape(length, [-1] + [1] * rank)
            mask = inside if mask is None else tf.logical_and(mask, inside)
        if mask is None:
            return tf.ones([1] * (rank + 1), tf.bool)
        return mask

    def masked(self, tensor=None, fill=None) -> tf.Tensor:
        """``tensor`` (default ``padded``; same shape) with the padding set to ``fill``
        (default zero) by a select, so no gradient reaches through the padding."""
        tensor = self.padded if tensor is None else tensor
        fill = tf.zeros([], tensor.dtype) if fill is None else tf.cast(fill, tensor.dtype)
        return tf.where(self.mask(), tensor, fill)

    # -- conversions ------------------------------------------------------------------
    def row(self, i) -> tf.Tensor:
        """Iteration ``i``'s value (for loops over the iterations)."""
        sizes = [-1 if length is None else length[i] for length in self.lengths]
        value = self.padded[i]
        if not sizes:
            return value
        return tf.slice(value, tf.zeros([self.rank], tf.int32), tf.stack(sizes))

    def to_flat(self) -> tuple[tf.Tensor, tf.Tensor]:
        """Every iteration's elements in row-major order, one after the other (1-D),
        and the iterations' shapes ``[n, rank]``."""
        mask = tf.broadcast_to(self.mask(), tf.shape(self.padded))
        return masked_elements(self.padded, mask), self.shapes()

    def to_ragged_tensor(self) -> tf.RaggedTensor:
        """A ``tf.RaggedTensor`` whose row j is iteration j's value (ragged along the
        dimensions that vary, uniform elsewhere)."""
        flat, shapes = self.to_flat()
        return from_flat(flat, shapes, self.ragged_axes, self.padded.shape[1:])

    def uniform(self, message: str) -> Stacked:
        """The value as ``Stacked``, checked at run time to have the same shape in
        every iteration (else an ``InvalidArgumentError`` saying ``message``)."""
        check = tf.debugging.Assert(self.is_uniform(), [message], summarize=1)
        with tf.control_dependencies([check]):
            return self.as_stacked()

    def fitted(self, shape) -> "Ragged | Stacked":
        """The value as seen through a body tensor of static per-iteration ``shape``
        (an identity with ``set_shape``, as a gradient's conditional branch has): uniform
        along the ragged dimensions that ``shape`` knows, cut or padded to that size.
        The body's static shape is TensorFlow's promise about every iteration's value,
        which its graph optimizations rely on as well, so it is not checked again."""
        shape = tf.TensorShape(shape)
        if shape.rank != self.rank:
            return self
        static = {d: shape[d] for d in self.ragged_axes if shape[d] is not None}
        if not static:
            return self
        dims = tf.shape(self.padded, out_type=tf.int32)
        sizes = [static.get(d, dims[1 + d]) for d in range(self.rank)]
        extra = [[0, 0]] + [[0, tf.maximum(0, s - dims[1 + d]) if d in static else 0]
                            for d, s in enumerate(sizes)]
        padded = tf.slice(tf.pad(self.padded, extra), tf.zeros([self.rank + 1], tf.int32),
                          tf.stack([dims[0]] + sizes))
        padded.set_shape(self.padded.shape[:1].concatenate(
            [static.get(d, s) for d, s in enumerate(self.padded.shape[1:].as_list())]))
        lengths = tuple(None if d in static else length
                        for d, length in enumerate(self.lengths))
        if all(length is None for length in lengths):
            return Stacked(tensor=padded)
        return Ragged(padded=padded, lengths=lengths)

    def _first(self) -> list[tf.Tensor]:
        """The first iteration's extent of every dimension (0 when n == 0)."""
        return [tf.concat([e, [0]], 0)[0] for e in self.extents()]

    def is_uniform(self) -> tf.Tensor:
        """Whether every iteration has the same shape (a boolean scalar tensor)."""
        return tf.reduce_all([tf.reduce_all(tf.equal(e, f))
                              for e, f in zip(self.extents(), self._first())])

    def as_stacked(self) -> Stacked:
        """The value as ``Stacked``, for iterations that all have the same shape
        (``is_uniform``; unchecked): the padded tensor cut to the first's extents."""
        n = tf.shape(self.padded, out_type=tf.int32)[0]
        begin = tf.zeros([self.rank + 1], tf.int32)
        size = tf.stack([n] + [f if length is not None else -1
                               for f, length in zip(self._first(), self.lengths)])
        return Stacked(tensor=tf.slice(self.padded, begin, size))

    @staticmethod
    def from_row_lengths(values, row_lengths, width=None) -> "Ragged":
        """Ragged along the first per-iteration dimension: iteration j's value is the
        next ``row_lengths[j]`` rows of ``values``; padded to ``width`` rows (default
        the largest length)."""
        values = tf.convert_to_tensor(values)
        row_lengths = tf.cast(row_lengths, tf.int32)
        rt = tf.RaggedTensor.from_row_lengths(values, row_lengths, validate=False)
        padded = rt.to_tensor(shape=None if width is None else
                              [None, width] + values.shape.as_list()[1:])
        lengths = (row_lengths,) + (None,) * (values.shape.rank - 1)
        return Ragged(padded=padded, lengths=lengths)

    @staticmethod
    def from_stacked(tensor, lengths) -> "Ragged":
        """A stacked tensor read as padded: its elements outside ``lengths`` (one entry
        per per-iteration dimension, ``None`` where it does not vary) are set to zero."""
        value = Ragged(padded=tensor, lengths=tuple(
            None if length is None else tf.cast(length, tf.int32) for length in lengths))
        return value.with_padded(value.masked())


def from_flat(flat, shapes, ragged_axes, inner_shape=None) -> tf.RaggedTensor:
    """A ``tf.RaggedTensor`` of ``n`` rows from every row's elements in row-major order
    (``flat``, 1-D) and the rows' shapes (``[n, rank]``): ragged along ``ragged_axes``
    and the dimensions before the last of them, uniform after it."""
    shapes = tf.cast(shapes, tf.int64)
    rank = shapes.shape[1]
    last = max(ragged_axes) + 1
    inner_static = [None] * rank if inner_shape is None else list(inner_shape)
    first = tf.maximum(tf.reduce_max(shapes, axis=0), 0)  # the uniform sizes (0 if n == 0)
    inner = [inner_static[d] if inner_static[d] is not None else first[d]
             for d in range(last, rank)]
    values = tf.reshape(flat, tf.stack([-1] + [tf.cast(d, tf.int64) for d in inner])
                        if inner else [-1])
    # Row lengths, innermost partition first: at per-iteration dimension d each of
    # the prod(shape[:d]) rows of an iteration has shape[d] elements.
    partitions, counts = [shapes[:, 0]], shapes[:, 0]
    for d in range(1, last):
        partitions.append(tf.gather(shapes[:, d], owners(counts)))
        counts = counts * shapes[:, d]
    result = values
    for d in reversed(range(last)):
        result = tf.RaggedTensor.from_row_lengths(result, partitions[d], validate=False)
    return result


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Unranked:
    """One value per iteration whose rank the body does not know (a
    ``tf.numpy_function`` without ``set_shape``), so its shape, even its rank, may
    differ between iterations in ways no static layout can say: it is kept as the
    fallback loop found it when it ran. ``flat`` holds every iteration's elements in
    row-major order, one iteration after the other; ``items`` every iteration's shape,
    one after the other; ``starts`` and ``item_starts`` (int32 ``[n + 1]``) where each
    iteration's part of them begins (``Unranked.of`` computes them from the sizes and
    ranks).

    Converters never see one: the walk runs an elementwise op of such values (sharing
    their shapes) and scalars on ``flat``; it gives any other op that reads one the
    stacked value (``as_stacked``) when all iterations have one shape at run time, else
    runs it in the fallback loop (``uniform_or_loop``). It dispatches with the letter ``R``.
    """

    flat: tf.Tensor
    items: tf.Tensor
    starts: tf.Tensor
    item_starts: tf.Tensor

    is_stacked = True
    code = "R"

    @staticmethod
    def of(flat, items, ranks, sizes) -> "Unranked":
        """The value of iterations of ``ranks`` and ``sizes`` (numbers of elements;
        int32 ``[n]`` each) whose elements are ``flat`` and shapes ``items``, one
        iteration after the other."""
        zero = tf.zeros([1], tf.int32)
        return Unranked(flat=tf.reshape(flat, [-1]), items=tf.cast(items, tf.int32),
                        starts=tf.concat([zero, tf.cumsum(tf.cast(sizes, tf.int32))], 0),
                        item_starts=tf.concat([zero, tf.cumsum(tf.cast(ranks, tf.int32))], 0))

    @staticmethod
    def from_value(value) -> "Unranked":
        """A stacked (``[n, ...]``) or ragged value as an ``Unranked`` one."""
        if isinstance(value, Unranked):
            return value
        if isinstance(value, Ragged):
            flat, shapes = value.to_flat()
        else:
            dims = tf.shape(value.tensor, out_type=tf.int32)
            flat = value.tensor
            shapes = tf.tile(dims[None, 1:], tf.stack([dims[0], 1]))
        n = tf.shape(shapes)[:1]
        return Unranked.of(flat, tf.reshape(shapes, [-1]), tf.fill(n, tf.shape(shapes)[1]),
                           tf.reduce_prod(shapes, axis=1))

    @property
    def tensor(self):
        raise NotStacked("a value of unknown rank whose shape may differ between "
                         "iterations: only the fallback loop takes it")

    @property
    def dtype(self):
        """The value's dtype."""
        return self.flat.dtype

    @property
    def shape(self) -> tf.TensorShape:
        """Static shape of one iteration's value: unknown."""
        return tf.TensorShape(None)

    @property
    def ranks(self) -> tf.Tensor:
        """Every iteration's rank (int32 ``[n]``)."""
        return self.item_starts[1:] - self.item_starts[:-1]

    def parts(self) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """``flat``, ``items``, the ranks and the sizes: what ``Unranked.of`` takes."""
        return self.flat, self.items, self.ranks, self.starts[1:] - self.starts[:-1]

    def with_flat(self, flat) -> "Unranked":
        """The same shapes over other elements."""
        return dataclasses.replace(self, flat=flat)

    def row(self, i) -> tf.Tensor:
        """Iteration ``i``'s value (for loops over the iterations)."""
        shape = self.items[self.item_starts[i]:self.item_starts[i + 1]]
        return tf.reshape(self.flat[self.starts[i]:self.starts[i + 1]], shape)

    def _first(self) -> tuple[tf.Tensor, tf.Tensor]:
        """The first iteration's rank and shape (0 and ``[]`` when n == 0)."""
        rank = tf.concat([self.ranks, [0]], 0)[0]
        return rank, self.items[:rank]

    def is_uniform(self, axis: int = 0) -> tf.Tensor:
        """Whether every iteration has the same shape (from ``axis`` on: one rank and
        one size of each dimension from ``axis`` on); a boolean scalar tensor."""
        rank, first = self._first()
        ranks = self.ranks
        count = tf.size(ranks) * rank
        # The first n * rank items, padded: every iteration's shape where all ranks agree.
        head = tf.concat([self.items, tf.zeros(tf.reshape(count, [1]), tf.int32)], 0)[:count]
        same = tf.equal(tf.reshape(head, tf.stack([tf.size(ranks), rank]))[:, axis:],
                        first[None, axis:])
        return tf.logical_and(tf.reduce_all(tf.equal(ranks, rank)), tf.reduce_all(same))

    def as_stacked(self) -> Stacked:
        """The value as ``Stacked``, for iterations that all have the same shape
        (``is_uniform``; unchecked)."""
        _, first = self._first()
        return Stacked(tensor=tf.reshape(self.flat, tf.concat([tf.shape(self.ranks), first], 0)))

    def uniform(self, message: str) -> Stacked:
        """The value as ``Stacked``, checked at run time to have the same shape in
        every iteration (else an ``InvalidArgumentError`` saying ``message``)."""
        check = tf.debugging.Assert(self.is_uniform(), [message], summarize=1)
        with tf.control_dependencies([check]):
            return self.as_stacked()

    def shapes(self, message: str, rank=None) -> tf.Tensor:
        """Every iteration's shape (int32 ``[n, r]``), checked at run time that all
        iterations have one rank (``rank``, where given; else an
        ``InvalidArgumentError`` saying ``message``)."""
        rank = self._first()[0] if rank is None else tf.constant(rank, tf.int32)
        ranks = self.ranks
        check = tf.debugging.Assert(tf.reduce_all(tf.equal(ranks, rank)), [message],
                                    summarize=1)
        with tf.control_dependencies([check]):
            return tf.reshape(self.items, tf.stack([tf.size(ranks), rank]))

    def ranked(self, shape, message: str) -> "Ragged | Stacked":
        """The value as seen through a body tensor of known rank (an identity with
        ``set_shape``): padded, ragged along every dimension, then ``Ragged.fitted``."""
        shape = tf.TensorShape(shape)
        shapes = self.shapes(message, shape.rank)
        widest = tf.reduce_max(tf.concat([shapes, tf.zeros([1, shape.rank], tf.int32)], 0), 0)
        padded = tf.scatter_nd(_positions(shapes), self.flat,
                               tf.concat([tf.shape(self.ranks), widest], 0))
        padded.set_shape([None] * (shape.rank + 1))
        if shape.rank == 0:
            return Stacked(tensor=padded)
        lengths = tuple(shapes[:, d] for d in range(shape.rank))
        return Ragged(padded=padded, lengths=lengths).fitted(shape)

    def to_ragged_tensor(self, message: str) -> tf.RaggedTensor:
        """A ``tf.RaggedTensor`` whose row j is iteration j's value, ragged along its
        first dimension only (a ragged rank must be static): checked at run time that
        every iteration has one rank >= 1 and one size of every later dimension (else an
        ``InvalidArgumentError`` saying ``message``)."""
        rank, first = self._first()
        ranks = self.ranks
        n = tf.size(ranks)
        fits = tf.logical_or(tf.equal(n, 0), tf.logical_and(rank >= 1, self.is_uniform(1)))
        check = tf.debugging.Assert(fits, [message], summarize=1)
        with tf.control_dependencies([check]):
            values = tf.reshape(self.flat, tf.concat([[-1], first[1:]], 0))
            lengths = tf.gather(self.items, self.item_starts[:-1])  # each first dimension
        return tf.RaggedTensor.from_row_lengths(values, lengths, validate=False)


def _positions(shapes) -> tf.Tensor:
    """Where every element of rows of ``shapes`` (int32 ``[n, r]``; their elements in
    row-major order, one row after the other) sits in their padded stack: int32
    ``[elements, 1 + r]``, its row and its index in the row."""
    sizes = tf.reduce_prod(shapes, axis=1)
    rows = owners(sizes)
    offsets = tf.range(tf.reduce_sum(sizes)) - tf.gather(tf.cumsum(sizes, exclusive=True), rows)
    strides = tf.gather(tf.math.cumprod(shapes, axis=1, exclusive=True, reverse=True), rows)
    # (A row with elements has no dimension of size 0: no division by zero.)
    index = offsets[:, None] // tf.maximum(strides, 1) % tf.maximum(tf.gather(shapes, rows), 1)
    return tf.concat([rows[:, None], index], 1)
