"""``pf.data.map_batched``: ``map(fn).batch(b)`` computed as ``batch(b)`` then one
vectorized ``fn`` over each batch, for ``Dataset.apply``."""

from __future__ import annotations

import tensorflow as tf

from pfor_core import api, autograph, checks


def map_batched(fn, batch_size, *, drop_remainder=False, fallback="warn"):
    """A ``tf.data`` transformation: the same elements as
    ``dataset.map(fn).batch(batch_size, drop_remainder)``, with ``fn`` vectorized.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> ds = tf.data.Dataset.range(5).apply(
    ...     pf.data.map_batched(lambda t: t * t, 2, fallback="error"))
    >>> [batch.numpy().tolist() for batch in ds]
    [[0, 1], [4, 9], [16]]
    """
    checks.callable_arg(fn, "fn")
    if not checks.is_int(batch_size) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} must be a positive Python int.")
    if not isinstance(drop_remainder, bool):
        raise TypeError(f"drop_remainder must be a bool, got {type(drop_remainder).__name__}.")
    options = checks.options(fallback=fallback, randomness="different",
                             parallel_iterations=None)
    fn = autograph.convert_user_fn(fn, autograph.caller_status())

    def apply(dataset):
        if not isinstance(dataset, tf.data.Dataset):
            raise TypeError("map_batched(...) is applied with dataset.apply(...), got "
                            f"{type(dataset).__name__}.")
        # Dataset.map calls fn(*element) for tuple elements and fn(element) otherwise.
        spread = isinstance(dataset.element_spec, tuple)

        def batched_fn(*batch):
            flat = tf.nest.flatten(batch)
            n = tf.shape(flat[0])[0]

            def loop_fn(i):
                row = tf.nest.pack_sequence_as(batch, [tf.gather(t, i) for t in flat])
                return fn(*row) if spread else fn(row[0])

            return api.build(loop_fn, n, options)

        return dataset.batch(batch_size, drop_remainder=drop_remainder).map(batched_fn)

    return apply
