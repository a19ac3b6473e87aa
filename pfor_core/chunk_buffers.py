"""Chunk outputs assembled in place, so that a chunked run holds its outputs once.

Collecting chunks in a TensorArray and concatenating them at the end holds every
output twice at the peak (the chunks and their concatenation) and copies it once
more. When every chunk has one static size ``k`` and the output one static shape per
iteration, the output is instead one buffer of ``[chunks, k * elements]`` made
before the loop (``Empty``: no fill), and each chunk copies its rows into its row of
the buffer with ``InplaceUpdate``, which writes into its input's memory. That is safe
here because the buffer is ours alone: made for this loop, carried by it, and read
only when the loop is done. A chunk's rows are one row of the buffer, so the copy is
one contiguous block, not a copy per iteration.

Not used where TensorFlow would not run these ops as written: under XLA (whose
TensorArray writes are in place already) and in the body of an outer ``pfor`` (which
vectorizes TensorArray ops, not these).
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.ops import control_flow_util

from pfor_core import empty

# InplaceUpdate has CPU kernels for these (and no gradient of its own: see _write).
_DTYPES = frozenset({tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.complex64,
                     tf.complex128, tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8,
                     tf.uint16, tf.uint32, tf.uint64, tf.bool})


def usable(chunk_static) -> bool:
    """Whether outputs of this chunked loop may be assembled in place."""
    graph = tf.compat.v1.get_default_graph()
    return (chunk_static is not None and not empty.in_body(graph)
            and not control_flow_util.GraphOrParentsInXlaContext(graph))


def fits(original) -> bool:
    """Whether this output (a body output, one iteration's value) has a buffer."""
    return (original.dtype in _DTYPES and original.shape.is_fully_defined()
            and original.shape.num_elements() > 0)


def buffer(original, chunks: int, chunk_static: int):
    """The buffer of all chunks' rows of ``original``: one row per chunk."""
    size = chunk_static * original.shape.num_elements()
    return tf.raw_ops.Empty(shape=tf.stack([chunks, size]), dtype=original.dtype, init=False)


def write(buffer_, c, rows):
    """``buffer_`` with row ``c`` replaced by one chunk's ``rows``, in place."""
    return _write(buffer_, tf.reshape(c, [1]), tf.reshape(rows, [1, -1]))


@tf.custom_gradient
def _write(buffer_, index, row):
    out = tf.raw_ops.InplaceUpdate(x=buffer_, i=index, v=row)

    def grad(upstream):
        # The buffer's gradient passes through whole: the rows this write replaced come
        # from Empty (nothing to differentiate), never from another chunk's rows.
        return upstream, None, tf.gather(upstream, index)

    return out, grad


def rows(buffer_, original):
    """All iterations' rows, ``[n, *shape]``, from the finished buffer (no copy)."""
    return tf.reshape(buffer_, [-1] + original.shape.as_list())
