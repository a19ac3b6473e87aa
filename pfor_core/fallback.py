"""The fallback: run one op in a sequential ``tf.while_loop`` over the iterations.

Stacked inputs are sliced to one row per iteration, invariant inputs are used as they
are, and each output is stacked through a ``TensorArray``. The result is always right,
only slow; ``explain`` and the ``fallback`` option report it.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core import emit
from pfor_core.layout import Stacked


def run_sequentially(op, layouts, conversion) -> list[Stacked]:
    n = conversion.n
    outputs = list(op.outputs)
    arrays = [tf.TensorArray(t.dtype, size=n, element_shape=t.shape,
                             infer_shape=t.shape.is_fully_defined())
              for t in outputs]

    def body(i, *arrays):
        row = [tf.gather(v.tensor, i) if v.is_stacked else v.tensor for v in layouts]
        new = emit.recreate(op, row)
        if not outputs:
            with tf.control_dependencies([new]):
                return (i + 1,)
        return (i + 1,) + tuple(a.write(i, t) for a, t in zip(arrays, new.outputs))

    # Stateful ops keep the sequential order of a real loop.
    parallel = 1 if op._is_stateful else 10  # pylint: disable=protected-access
    result = tf.while_loop(lambda i, *_: i < n, body, (tf.constant(0),) + tuple(arrays),
                           parallel_iterations=parallel)
    stacked = []
    for array, t in zip(result[1:], outputs):
        value = array.stack()
        value.set_shape(tf.TensorShape([conversion.n_static]).concatenate(t.shape))
        stacked.append(Stacked(tensor=value))
    return stacked
