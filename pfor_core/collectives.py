"""Cross-iteration collectives: inside a loop body, every iteration gets one shared value.

``pf.all_sum(x)`` emits an ``Identity`` op tagged with a private attr; the walk hands
tagged ops to ``convert_collective``, which reduces a stacked value over the iteration
axis once (an invariant result) instead of per iteration. Outside a pfor body there is
no "all iterations" to reduce over, so the functions raise.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.framework import ops

from pfor_core.errors import ConversionError
from pfor_core.layout import Invariant

ATTR = "_pfor_collective"
BODY_MARK = "_pfor_body"  # set on body graphs by the trace

_KINDS = ("sum", "mean", "max", "min", "gather")


def _collective(x, kind: str, name: str):
    graph = ops.get_default_graph()
    if not getattr(graph, BODY_MARK, False):
        raise RuntimeError(
            f"pf.{name} is a cross-iteration collective: call it inside the loop body of "
            "pf.pfor / pf.vectorized_map / pf.vmap (directly, not in a nested tf.function).")
    x = tf.convert_to_tensor(x)
    tag = {ATTR: attr_value_pb2.AttrValue(s=kind.encode())}
    if kind == "gather":
        # An op whose static shape is [None] + x.shape: the body must not assume a size.
        rows = tf.expand_dims(x, 0)
        op = graph._create_op_internal(  # pylint: disable=protected-access
            "PlaceholderWithDefault", [rows], dtypes=[x.dtype], name=name, attrs={
                "dtype": attr_value_pb2.AttrValue(type=x.dtype.as_datatype_enum),
                "shape": attr_value_pb2.AttrValue(
                    shape=tf.TensorShape([None]).concatenate(x.shape).as_proto()), **tag})
    else:
        op = graph._create_op_internal(  # pylint: disable=protected-access
            "Identity", [x], dtypes=[x.dtype], name=name, attrs={
                "T": attr_value_pb2.AttrValue(type=x.dtype.as_datatype_enum), **tag})
    return op.outputs[0]


def all_sum(x):
    """The sum of ``x`` over all iterations, the same in every iteration.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.pfor(lambda i: pf.all_sum(tf.gather(x, i)), 3, fallback="error").numpy()
    array([[ 9., 12.],
           [ 9., 12.],
           [ 9., 12.]], dtype=float32)
    """
    return _collective(x, "sum", "all_sum")


def all_mean(x):
    """The mean of ``x`` over all iterations.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.pfor(lambda i: pf.all_mean(tf.gather(x, i)), 3, fallback="error").numpy()
    array([[3., 4.],
           [3., 4.],
           [3., 4.]], dtype=float32)
    """
    return _collective(x, "mean", "all_mean")


def all_max(x):
    """The elementwise maximum of ``x`` over all iterations.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.pfor(lambda i: pf.all_max(tf.gather(x, i)), 3, fallback="error").numpy()
    array([[5., 6.],
           [5., 6.],
           [5., 6.]], dtype=float32)
    """
    return _collective(x, "max", "all_max")


def all_min(x):
    """The elementwise minimum of ``x`` over all iterations.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> x = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
    >>> pf.pfor(lambda i: pf.all_min(tf.gather(x, i)), 3, fallback="error").numpy()
    array([[1., 2.],
           [1., 2.],
           [1., 2.]], dtype=float32)
    """
    return _collective(x, "min", "all_min")


def all_gather(x):
    """Every iteration's ``x``, stacked: shape ``[iters] + x.shape``.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> pf.pfor(lambda i: pf.all_gather(i * 10), 3, fallback="error").numpy()
    array([[ 0, 10, 20],
           [ 0, 10, 20],
           [ 0, 10, 20]], dtype=int32)
    """
    return _collective(x, "gather", "all_gather")


def kind_of(op) -> str | None:
    """The collective an op stands for, or None."""
    if op.type not in ("Identity", "PlaceholderWithDefault"):
        return None
    try:
        return op.get_attr(ATTR).decode()
    except ValueError:
        return None


def convert_collective(kind: str, value, conversion) -> Invariant:
    if conversion.chunked:
        raise ConversionError(
            f"pf.all_{kind} needs every iteration at once, but parallel_iterations splits "
            "them into chunks; drop parallel_iterations (or chunk_size) for this body.")
    t = value.tensor
    if kind == "gather":  # the value is [1] + x.shape per iteration
        return Invariant(tensor=tf.squeeze(conversion.stack(value), axis=1))
    if not value.is_stacked:
        if kind == "sum":
            t = t * tf.cast(conversion.n, t.dtype)
        return Invariant(tensor=tf.identity(t))
    reduce = {"sum": tf.reduce_sum, "mean": tf.reduce_mean, "max": tf.reduce_max,
              "min": tf.reduce_min}[kind]
    return Invariant(tensor=reduce(t, axis=0))
