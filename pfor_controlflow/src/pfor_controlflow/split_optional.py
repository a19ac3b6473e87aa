"""The layout of a conditional's optional output under a per-iteration predicate: a
``SplitOptional`` holds one part per branch, each part's components stacked (see
conditionals/optionals.py). Here, below the lists and the conditionals, because the
tensor-list converters meet such optionals too (a push of one onto a list)."""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from pfor_core.extend import Stacked, View

_R = tf.raw_ops


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class SplitOptional(View):
    """A stacked optional holding one part per branch: ``parts[b]`` is the
    (dtypes, shapes) spec of branch b's part, or None. ``tensor`` is the optional of
    every part's components, one after the other."""

    parts: tuple

    def materialize(self) -> Stacked:
        """The stacked optional of all parts' components, as a plain value."""
        return Stacked(tensor=self.tensor)

    def part(self, b) -> list[tf.Tensor]:
        """Branch ``b``'s components (all rows)."""
        start = sum(len(encoded(p)[0]) for p in self.parts[:b] if p is not None)
        dtypes, _ = encoded(self.parts[b])
        every = [(d, s) for p in self.parts if p is not None for d, s in zip(*encoded(p))]
        values = _R.OptionalGetValue(
            optional=self.tensor, output_types=[d for d, _ in every],
            output_shapes=[stacked_shape(d, s) for d, s in every])
        return list(values[start:start + len(dtypes)])


def sized(dtype, shape) -> bool:
    """Whether a component is held with its per-iteration shapes (see
    conditionals/optionals.py's docstring)."""
    return dtype != tf.variant and not tf.TensorShape(shape).is_fully_defined()


def encoded(spec) -> tuple[list, list]:
    """The (dtypes, shapes) a stacked optional holds for components ``spec``: each
    component, followed by its per-iteration shapes where its static shape is not
    fully known. Raises ValueError for a component of unknown rank."""
    dtypes, shapes = [], []
    for dtype, shape in zip(*spec):
        shape = tf.TensorShape(shape)
        dtypes.append(dtype)
        shapes.append(shape)
        if sized(dtype, shape):
            if shape.rank is None:
                raise ValueError("an intermediate of unknown rank")
            dtypes.append(tf.int32)
            shapes.append(tf.TensorShape([shape.rank]))
    return dtypes, shapes


def stacked_shape(dtype, shape) -> tf.TensorShape:
    """The shape of a stacked component (a tensor list keeps its scalar handle)."""
    return shape if dtype == tf.variant else tf.TensorShape([None]).concatenate(shape)
