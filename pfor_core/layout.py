"""Layout values: what a body tensor becomes in the caller's graph.

A body tensor is either the same in every iteration (``Invariant``: the original
tensor, never tiled) or differs per iteration (``Stacked``: a tensor with a new leading
dimension of size n, row j being iteration j's value). The stacked axis is always 0.

One exception: a stacked ``tf.variant`` value (a tensor list) keeps its scalar handle,
and each element of the list carries the iteration axis instead (element shape
``[n, ...]``). Only the control-flow pack's tensor-list converters read such values.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Invariant:
    """The same value in every iteration.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> value = pf.Invariant(tensor=tf.zeros([2]))
    >>> value.is_stacked, value.shape
    (False, TensorShape([2]))
    """

    tensor: tf.Tensor

    is_stacked = False
    code = "U"

    @property
    def dtype(self):
        return self.tensor.dtype

    @property
    def shape(self) -> tf.TensorShape:
        """Shape of one iteration's value."""
        return self.tensor.shape


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Stacked:
    """One value per iteration, stacked along a new axis 0.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> value = pf.Stacked(tensor=tf.zeros([3, 2]))
    >>> value.is_stacked, value.shape
    (True, TensorShape([2]))
    """

    tensor: tf.Tensor

    is_stacked = True
    code = "S"

    @property
    def dtype(self):
        return self.tensor.dtype

    @property
    def shape(self) -> tf.TensorShape:
        """Shape of one iteration's value (the stacked axis removed)."""
        return self.tensor.shape[1:]


Layout = Invariant | Stacked


def invariant(tensor) -> Invariant:
    return Invariant(tensor=tensor)


def stacked(tensor) -> Stacked:
    return Stacked(tensor=tensor)


def pattern_of(values) -> str:
    """The invariance pattern of a sequence of layout values, e.g. ``"SU"``."""
    return "".join(v.code for v in values)
