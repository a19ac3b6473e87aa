"""Layout values: what a body tensor becomes in the caller's graph.

A body tensor is either the same in every iteration (``Invariant``: the original
tensor, never tiled) or differs per iteration (``Stacked``: a tensor with a new leading
dimension of size n, row j being iteration j's value). The stacked axis is always 0.

A ``View`` is a per-iteration value kept in another form than stacked because that is
cheaper (the rows of a value an enclosing loop has not compacted, a tensor list of a
whole loop, an optional holding each branch's part). It dispatches like a stacked value
(pattern letter ``S``), and ``materialize()`` gives its stacked form: a converter that
does not declare that it takes views receives them materialized (see ``registry``).

One exception to "stacked means ``[n, ...]``": a stacked ``tf.variant`` value (a tensor
list, an optional) keeps its scalar handle, and each element or component carries the
iteration axis instead (element shape ``[n, ...]``).

Each layout type has a pattern letter (``code``): ``S`` stacked, ``U`` invariant, ``R``
ragged (values whose shape differs between iterations, ``pfor_core.ragged``);
``LETTERS`` lists the letters patterns may use.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Invariant:
    """The same value in every iteration: the original tensor, never tiled.

    >>> import tensorflow as tf
    >>> from pfor_core.extend import Invariant
    >>> value = Invariant(tensor=tf.zeros([2]))
    >>> value.is_stacked, value.code, value.shape
    (False, 'U', TensorShape([2]))
    """

    tensor: tf.Tensor

    is_stacked = False
    code = "U"

    @property
    def dtype(self):
        """The value's dtype."""
        return self.tensor.dtype

    @property
    def shape(self) -> tf.TensorShape:
        """Shape of one iteration's value."""
        return self.tensor.shape


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Stacked:
    """One value per iteration, stacked along a new axis 0: ``tensor`` is ``[n, ...]``.

    >>> import tensorflow as tf
    >>> from pfor_core.extend import Stacked
    >>> value = Stacked(tensor=tf.zeros([3, 2]))
    >>> value.is_stacked, value.code, value.shape
    (True, 'S', TensorShape([2]))
    """

    tensor: tf.Tensor

    is_stacked = True
    code = "S"

    @property
    def dtype(self):
        """The value's dtype."""
        return self.tensor.dtype

    @property
    def shape(self) -> tf.TensorShape:
        """Shape of one iteration's value (the stacked axis removed)."""
        return self.tensor.shape[1:]


class View(Stacked):
    """A per-iteration value stored in another form than stacked, because that is
    cheaper for the converters that know the form.

    What every view promises:

    - it dispatches as a stacked value (``is_stacked`` is True, pattern letter ``S``),
      and ``dtype`` and ``shape`` (one iteration's) are those of its stacked form;
    - ``materialize()`` returns that stacked form as a plain ``Stacked`` for the
      iterations being converted, or a ``Decline`` when the view has none here (the
      converter is then skipped as if it had declined);
    - ``tensor`` is the view's own storage, as the subclass documents it: only code
      that knows the view reads it;
    - a view may define ``stand_in(original, n_static)``, a placeholder value of its own
      type: trial conversions (``ctx.convert_function(..., trial=True)``) then return
      that for an output of this type instead of a plain stacked placeholder.

    A converter registered without ``views=True`` never sees a view: the registry hands
    it every view materialized. A view subclass is defined by the pack that makes it,
    together with the converters (registered with ``views=True``) that read it directly.

    >>> import tensorflow as tf
    >>> from pfor_core.extend import Stacked, View
    >>> class Reversed(View):
    ...     '''Rows stored in reverse order.'''
    ...     __slots__ = ()
    ...     def materialize(self):
    ...         return Stacked(tensor=tf.reverse(self.tensor, [0]))
    >>> Reversed(tensor=tf.constant([[1], [2]])).materialize().tensor.numpy().tolist()
    [[2], [1]]
    """

    __slots__ = ()

    def materialize(self):
        """The stacked form of the view (a ``Stacked``), or a ``Decline``."""
        raise NotImplementedError(f"{type(self).__name__} does not define materialize()")


Layout = Invariant | Stacked

# Letters of invariance patterns: a layout type's code, or "*" for S or U.
LETTERS = (Stacked.code, Invariant.code, "R")


def invariant(tensor) -> Invariant:
    return Invariant(tensor=tensor)


def stacked(tensor) -> Stacked:
    return Stacked(tensor=tensor)


def per_iteration(pattern: str) -> bool:
    """Whether a pattern has a value that differs between iterations (S or R)."""
    return "S" in pattern or "R" in pattern


def pattern_of(values) -> str:
    """The invariance pattern of a sequence of layout values, e.g. ``"SU"``."""
    return "".join(v.code for v in values)


def broadcast_invariant(tensor: tf.Tensor, n, n_static: int | None = None) -> tf.Tensor:
    """Tile an invariant value to ``[n, ...]`` (only where a converter must). The one
    tiling function: ``ctx.stack``, ``ctx.stacked`` and ``Converted.stacked`` use it."""
    tensor = tf.convert_to_tensor(tensor)
    expanded = tf.expand_dims(tensor, 0)
    if tensor.shape.is_fully_defined() and n_static is not None:
        target = [n_static] + tensor.shape.as_list()
    else:
        target = tf.concat([tf.reshape(tf.cast(n, tf.int32), [1]), tf.shape(tensor)], 0)
    return tf.broadcast_to(expanded, target)
