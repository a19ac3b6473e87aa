"""Ops with no converter for ragged values whose ragged inputs usually have one shape
(``ragged.usually_uniform``: a window ``x[i:i + k]`` clipped at the end of its axis).

Under ``fallback="error"`` the walk converts such an op with its inputs stacked,
checked at run time to have one shape (an error names the op otherwise). Where the
fallback loop may run, the loop's values are what counts: a ``tf.cond`` picks at run
time the converted op when every iteration's inputs have one shape, else the fallback
loop, which takes any shapes. Both branches give every output in one form, decided by
the body's static shape: stacked where the body knows the shape, else ragged along
the dimensions it does not know, with lengths marked usually uniform again, so that
the ops after it do the same.

The same holds for an op that reads a value of unknown rank (``Unranked``, which only
the fallback loop makes): converted on its stacked value when all iterations have one
shape, else the loop; an output of unknown rank is unranked in both branches (its
elements, every iteration's shape and rank), so that the ops after it do the same.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_util

from pfor_core.layout import Invariant, Stacked
from pfor_core.ragged import Ragged, Unranked, usually_uniform

UNREAD = None  # the form of an output nobody reads
UNRANKED = "unranked"  # the form of an output of unknown rank


def applies(conversion, op, layouts) -> bool:
    """Whether ``op`` may run as converted-or-looped (else: converted, checked)."""
    if conversion.trial or conversion.options.fallback == "error":
        return False
    if op._is_stateful:  # pylint: disable=protected-access
        return False  # its state must be touched once, by one of the two
    if control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph()):
        return False  # the loop of ragged values has no static shapes there
    if any(v.dtype == tf.variant for v in layouts):
        return False
    return all(t.dtype != tf.variant for t in op.outputs)


def forms(op) -> list:
    """Per output: ``UNREAD``, ``UNRANKED``, or the per-iteration dimensions that may
    vary (those of no static size; ``()``: stacked)."""
    return [UNREAD if not t.consumers() and t.dtype.is_numpy_compatible
            and t.dtype != tf.string else UNRANKED if t.shape.rank is None else
            tuple(d for d, size in enumerate(t.shape.as_list()) if size is None)
            for t in op.outputs]


def flatten(values, forms_, stack) -> list[tf.Tensor]:
    """Output layout values as tensors in their forms (``stack``: a layout value as a
    stacked tensor)."""
    flat = []
    for value, form in zip(values, forms_):
        if form is UNREAD:
            flat.append(tf.zeros([], value.dtype))
        elif form == UNRANKED:
            flat.extend(Unranked.from_value(value if isinstance(value, (Ragged, Unranked))
                                            else Stacked(tensor=stack(value))).parts())
        elif isinstance(value, Ragged):
            extents = value.extents()
            flat.extend([value.padded] + [extents[d] for d in form])
        else:
            tensor = stack(value)
            dims = tf.shape(tensor, out_type=tf.int32)
            flat.extend([tensor] + [tf.fill(dims[:1], dims[1 + d]) for d in form])
    return flat


def unflatten(flat, op, forms_, n_static) -> list:
    """The layout values of ``flatten``'s tensors."""
    flat = iter(flat)
    values = []
    for t, form in zip(op.outputs, forms_):
        tensor = next(flat)
        if form is UNREAD:
            values.append(Invariant(tensor=tensor))
            continue
        if form == UNRANKED:
            values.append(Unranked.of(tensor, next(flat), next(flat), next(flat)))
            continue
        tensor.set_shape(tf.TensorShape([n_static]).concatenate(t.shape))
        if not form:
            values.append(Stacked(tensor=tensor))
            continue
        lengths = {}
        for d in form:
            length = next(flat)
            length.set_shape([n_static])
            lengths[d] = usually_uniform(length)
        values.append(Ragged(padded=tensor, lengths=tuple(lengths.get(d)
                                                          for d in range(t.shape.rank))))
    return values
