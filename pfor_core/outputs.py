"""The converted body's outputs, as the caller gets them.

Each body output's layout value becomes one tensor with the iterations along axis 0:
an invariant one is broadcast (only here, at the end), a stacked one is taken as it is.
A ragged one (its shape differs between iterations) becomes a ``tf.RaggedTensor`` where
that is wanted (``ragged_outputs=True``, or a component of a ``tf.RaggedTensor`` the
body returned); otherwise it is checked at run time to have one shape after all, and
a clear error names the output when it has not.

With ``parallel_iterations``, chunks are converted one at a time in a
``tf.while_loop``: an output whose per-iteration shape the body does not know travels
from the chunks as its elements (flat) and its rows' shapes, because chunks may pad
differently; the rows are rebuilt once all chunks are done. One of unknown rank travels
as its elements, its rows' shapes one after the other, their ranks and their sizes.

A value of unknown rank whose shape may differ between iterations (``Unranked``: from
a fallback's ``tf.numpy_function`` without ``set_shape``) is stacked when it has one
shape in every iteration, also with ``ragged_outputs=True`` (as ``Dataset.ragged_batch``
batches such values): a ragged rank must be known when the graph is built, so values
of different shapes are an error asking to give them a rank. Only as a component of a
returned ``tf.RaggedTensor`` is it made ragged along its first dimension.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.ops import control_flow_util

from pfor_core import chunk_buffers, empty, ragged
from pfor_core.layout import broadcast_invariant
from pfor_core.layout import Stacked
from pfor_core.ragged import Ragged, Unranked


def differ_message(name: str) -> str:
    """The error for an output whose shape differs between iterations."""
    return (f"pfor: loop_fn returned values of different shapes in different iterations "
            f"at {name}: pass ragged_outputs=True to get them as a tf.RaggedTensor, or make "
            "every iteration return the same shape (pad to a fixed size).")


def unranked_message(name: str) -> str:
    """The error for an output of unknown rank whose shape differs between iterations."""
    return (f"pfor: loop_fn returned values of different shapes in different iterations "
            f"at {name}, of unknown rank (a tf.numpy_function's or tf.py_function's output "
            "without set_shape?): a tf.RaggedTensor of them needs their rank: give it "
            "with set_shape or tf.ensure_shape (e.g. y.set_shape([None, 2])) and pass "
            "ragged_outputs=True, or make every iteration return the same shape (pad to "
            "a fixed size).")


def component_message(name: str) -> str:
    """The error for a component of unknown rank of a returned ``tf.RaggedTensor``
    that cannot be ragged along its first dimension only."""
    return (f"pfor: loop_fn returned values of unknown rank at {name} whose ranks or "
            "sizes after the first dimension differ between iterations: give them a "
            "rank with set_shape or tf.ensure_shape (e.g. y.set_shape([None, None])).")


def _ragged_or_uniform(value, name: str, ragged_outputs: bool, component: bool):
    """A ragged or unranked value as a ``tf.RaggedTensor`` where wanted, else as a
    stacked tensor checked to have one shape in every iteration. An unranked one is a
    ``tf.RaggedTensor`` only as a ``component`` of a returned one: ``ragged_outputs``
    keeps it dense where its shape is one (as ``Dataset.ragged_batch`` does), since
    a ragged rank must be known when the graph is built."""
    if isinstance(value, Unranked):
        if component:
            return value.to_ragged_tensor(component_message(name))
        return value.uniform(unranked_message(name)).tensor
    if ragged_outputs or component:
        return value.to_ragged_tensor()
    return value.uniform(differ_message(name)).tensor


def finish(conversion, layouts, body, ragged_outputs: bool) -> list:
    """The outputs for one conversion of all iterations: tensors, or ``tf.RaggedTensor``
    for ragged values where wanted."""
    outs = []
    for k, (value, original) in enumerate(zip(layouts, body.outputs)):
        if isinstance(value, (Ragged, Unranked)):
            t = _ragged_or_uniform(value, body.names[k], ragged_outputs, body.ragged[k])
            if isinstance(t, tf.RaggedTensor):
                outs.append(t)
                continue
        else:
            t = value.tensor if value.is_stacked else broadcast_invariant(
                value.tensor, conversion.n, conversion.n_static)
        t.set_shape(tf.TensorShape([conversion.n_static]).concatenate(original.shape))
        outs.append(t)
    if conversion.side_effects:
        # Side effects nobody reads must still happen (also in legacy v1 graphs).
        with tf.control_dependencies(conversion.side_effects):
            outs = [_identity(t) for t in outs]
    return outs


def _identity(value):
    if isinstance(value, tf.RaggedTensor):
        return value.with_flat_values(tf.identity(value.flat_values))
    return tf.identity(value)


# -- chunks ------------------------------------------------------------------------
def varies(original) -> bool:
    """Whether an output travels from the chunks as elements and shapes (and ranks and
    sizes, for one of unknown rank)."""
    return not original.shape.is_fully_defined()


def _whole_rows(chunk_static) -> bool:
    """Under XLA every chunk's outputs have static shapes, the same in every chunk:
    they travel whole, not as elements and shapes (whose rows XLA could not rebuild:
    a reshape to a run-time shape)."""
    return chunk_static is not None and control_flow_util.GraphOrParentsInXlaContext(
        tf.compat.v1.get_default_graph())


def chunk_arrays(body, chunks, chunk_static=None) -> tuple:
    """Loop variables that collect every chunk's outputs (chunks of ``chunk_static``
    rows each, when static): a buffer filled in place where chunk_buffers.py can, else
    TensorArrays."""
    arrays = []
    in_place = chunk_buffers.usable(chunk_static)
    for t in body.outputs:
        if in_place and chunk_buffers.fits(t):
            arrays.append((chunk_buffers.buffer(t, chunks, chunk_static),))
        elif varies(t) and _whole_rows(chunk_static):
            arrays.append((tf.TensorArray(t.dtype, size=chunks, infer_shape=False),))
        elif t.shape.rank is None:
            arrays.append(tuple(tf.TensorArray(dtype, size=chunks, infer_shape=False,
                                               element_shape=[None])
                                for dtype in (t.dtype, tf.int32, tf.int32, tf.int32)))
        elif varies(t):
            arrays.append((tf.TensorArray(t.dtype, size=chunks, infer_shape=False,
                                          element_shape=[None]),
                           tf.TensorArray(tf.int32, size=chunks, infer_shape=False,
                                          element_shape=[None, t.shape.rank])))
        else:
            arrays.append((tf.TensorArray(t.dtype, size=chunks, infer_shape=False,
                                          element_shape=tf.TensorShape([chunk_static])
                                          .concatenate(t.shape)),))
    return tuple(arrays)


def chunk_parts(conversion, layouts, body, found: dict) -> list[tuple]:
    """What each output of one chunk writes to its arrays; ``found[k]`` learns the
    ragged dimensions of output k."""
    parts = []
    for k, (value, original) in enumerate(zip(layouts, body.outputs)):
        if original.shape.rank is None and not _whole_rows(conversion.n_static):
            parts.append(Unranked.from_value(value if value.is_stacked else Stacked(
                tensor=broadcast_invariant(value.tensor, conversion.n))).parts())
            continue
        if isinstance(value, Ragged):
            found[k] = value.ragged_axes
            parts.append(value.to_flat())
            continue
        t = value.tensor if value.is_stacked else broadcast_invariant(
            value.tensor, conversion.n, conversion.n_static)
        if varies(original) and not _whole_rows(conversion.n_static):
            shape = tf.shape(t, out_type=tf.int32)
            parts.append((tf.reshape(t, [-1]), tf.tile(shape[None, 1:], [shape[0], 1])))
        else:
            parts.append((t,))
    if conversion.side_effects:
        with tf.control_dependencies(conversion.side_effects):
            parts = [tuple(tf.identity(t) for t in part) for part in parts]
    return parts


def write_chunk(arrays, c, parts) -> tuple:
    return tuple(tuple(a.write(c, t) if isinstance(a, tf.TensorArray)
                       else chunk_buffers.write(a, c, t) for a, t in zip(group, part))
                 for group, part in zip(arrays, parts))


def gather_chunks(arrays, chunks, n_static, body, found: dict, ragged_outputs: bool, *,
                  chunk_static=None, last=None):
    """The outputs from all chunks' arrays, and from ``last`` (the parts of the
    iterations converted after the loop, if any)."""
    outs = []
    for k, (group, original) in enumerate(zip(arrays, body.outputs)):
        extra = last[k] if last is not None else None
        if len(group) == 1:
            t = _concat_chunks(group[0], chunks, original, chunk_static)
            if extra is not None:
                t = tf.concat([t, extra[0]], 0)
            t.set_shape(tf.TensorShape([n_static]).concatenate(original.shape))
            outs.append(t)
            continue
        if len(group) == 4:
            outs.append(_unranked_chunks(group, chunks, extra, body.names[k],
                                         ragged_outputs, body.ragged[k]))
            continue
        flat = tf.cond(chunks > 0, group[0].concat, lambda: tf.zeros([0], original.dtype))
        shapes = tf.cond(chunks > 0, group[1].concat,
                         lambda: tf.zeros([0, original.shape.rank], tf.int32))
        if extra is not None:
            flat, shapes = tf.concat([flat, extra[0]], 0), tf.concat([shapes, extra[1]], 0)
        axes = found.get(k)
        if axes and (ragged_outputs or body.ragged[k]):
            outs.append(ragged.from_flat(flat, shapes, axes, original.shape))
        else:
            outs.append(_uniform(flat, shapes, original, n_static, body.names[k]))
    return outs


def _unranked_chunks(group, chunks, extra, name, ragged_outputs, component):
    """An output of unknown rank from all chunks' elements, shapes, ranks and sizes."""
    parts = [tf.cond(chunks > 0, array.concat, lambda a=array: tf.zeros([0], a.dtype))
             for array in group]
    if extra is not None:
        parts = [tf.concat([p, e], 0) for p, e in zip(parts, extra)]
    return _ragged_or_uniform(Unranked.of(*parts), name, ragged_outputs, component)


def _concat_chunks(array, chunks, original, chunk_static):
    """Concatenate the chunks' outputs; with no chunk (n == 0 at run time) an empty
    tensor."""
    if not isinstance(array, tf.TensorArray):
        return chunk_buffers.rows(array, original)
    if chunk_static is not None:
        # Chunks of one static size: stacked and merged (XLA has no concat of a list).
        stacked = array.stack()
        rows = tf.reshape(chunks * chunk_static, [1])
        return tf.reshape(stacked, tf.concat([rows, tf.shape(stacked)[2:]], 0))
    if original.shape.is_fully_defined():
        return array.concat()
    return tf.cond(chunks > 0, array.concat, lambda: empty.rows(original))


def _uniform(flat, shapes, original, n_static, name):
    """Rows of one shape from their elements, checked to have one shape."""
    n = tf.shape(shapes, out_type=tf.int32)[0]
    static = empty.rows(original).shape[1:].as_list()
    first = tf.concat([shapes, tf.constant([static], tf.int32)], 0)[0]  # static if n == 0
    same = tf.reduce_all(tf.equal(shapes, first[None]))
    check = tf.debugging.Assert(same, [differ_message(name)], summarize=1)
    with tf.control_dependencies([check]):
        t = tf.reshape(flat, tf.concat([[n], first], 0))
    t.set_shape(tf.TensorShape([n_static]).concatenate(original.shape))
    return t
