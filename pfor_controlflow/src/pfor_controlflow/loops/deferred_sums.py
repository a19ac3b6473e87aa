"""Sums of matrix products over the steps of a loop, done once after it.

The gradient of a weight a loop body uses is a loop variable that every step adds a
thin product to: ``acc += a_t^T @ b_t`` (``extend.thin_products``). Vectorized per
example, each step would add an outer product into a ``[n, p, q]`` accumulator, reading
and writing all of it for a few multiply-adds per element. Instead the converted loop
keeps each step's ``a_t`` and ``b_t`` and, after the loop, one batched matmul over the
concatenated steps gives every example's sum (``thin_products.summed``).

``find`` picks the loop variables this applies to: stacked, read by nothing but the
sum that makes the body's next value, every other term of which is a MatMul whose
contracted dimension K is static and small (``K (p + q) <= p q``).
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import thin_products

_SUMS = ("AddN", "AddV2", "Add")


def _source(tensor):
    while tensor.op.type == "Identity":
        tensor = tensor.op.inputs[0]
    return tensor


def _contracted(op):
    """K of the MatMul ``op`` if it is static and the products are thin, else None."""
    a, b = op.inputs[0].shape, op.inputs[1].shape
    if a.rank != 2 or b.rank != 2:
        return None
    sizes = thin_products.matmul_sizes(a, b, op.get_attr("transpose_a"),
                                       op.get_attr("transpose_b"))
    return sizes[0] if thin_products.thin(*sizes) else None


def _only_reader(tensor):
    """The op that reads ``tensor``, through Identity ops, if it is the only one."""
    readers = []
    pending = list(tensor.consumers())
    while pending:
        op = pending.pop()
        if op.type == "Identity":
            pending.extend(op.outputs[0].consumers())
        else:
            readers.append(op)
    return readers[0] if len(readers) == 1 else None


def find(loop) -> dict:
    """{loop variable: its MatMul terms} for the variables whose sums can wait."""
    found = {}
    for k in loop.carried:
        into = loop.body.inputs[k]
        if not loop.stacked[k] or not into.dtype.is_floating or k in loop.ragged_values:
            continue
        if loop.cond.inputs[k].consumers():
            continue
        total = _source(loop.body.outputs[k]).op
        if total.type not in _SUMS or _only_reader(into) is not total:
            continue
        terms = [_source(t).op for t in total.inputs]
        own = [t for t in total.inputs if _source(t) is into]
        products = [op for op in terms if op.type == "MatMul" and _contracted(op)]
        if len(own) == 1 and len(products) == len(terms) - 1:
            found[k] = products
    return found


def cheaper_for(products, steps: int) -> bool:
    """Whether keeping ``steps`` steps of every product's operands holds no more than
    the ``[p, q]`` sum itself (under XLA the arrays have the loop's bound as size, and
    a generous bound would make them, and the matmul over them, large)."""
    op = products[0]
    shape = op.outputs[0].shape
    kept = sum(_contracted(p) * _size(p) for p in products)
    return steps * kept <= shape[0] * shape[1]


def _size(op):
    """p + q of the MatMul ``op``: the numbers one contracted row of its operands holds."""
    shape = op.outputs[0].shape
    return shape[0] + shape[1]


def operands(products) -> list:
    """The tensors to convert each step: both operands of every product."""
    return [t for op in products for t in op.inputs]


def _steps_together(steps, k_axis):
    """``[T, n, d0, d1]`` per-step matrices, contracted over ``k_axis`` (0 or 1), as
    ``[n, ...]`` matrices with the steps laid along that axis."""
    shape = tf.shape(steps)
    if k_axis == 0:
        moved = tf.transpose(steps, [1, 0, 2, 3])  # [n, T, K, d1]
        return tf.reshape(moved, tf.stack([shape[1], shape[0] * shape[2], shape[3]]))
    moved = tf.transpose(steps, [1, 2, 0, 3])  # [n, d0, T, K]
    return tf.reshape(moved, tf.stack([shape[1], shape[2], shape[0] * shape[3]]))


def total(products, stacked_steps):
    """The sum over steps of every product, per row: ``stacked_steps`` holds each
    product's two operands, ``[T, n, ...]`` each."""
    steps = iter(stacked_steps)
    terms = []
    for op in products:
        ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
        a = _steps_together(next(steps), 0 if ta else 1)
        b = _steps_together(next(steps), 1 if tb else 0)
        terms.append((a, b, ta, tb))
    return thin_products.summed(terms)


def plus(start, summed):
    """``start`` (a layout value) plus the stacked ``summed``: an invariant start
    broadcasts, and one known to be zero (a gradient accumulator's) is not added."""
    if start.is_stacked:
        return start.tensor + summed
    value = tf.get_static_value(start.tensor)
    if value is not None and not value.any():
        return summed
    return summed + start.tensor


class RowSteps:
    """The operands of a loop whose iterations run their own number of steps: each
    step writes the active rows' operands with their row and step numbers; the sums
    put every row's steps in place, with zeros where a row did not run (a row runs
    from step 0 until it finishes)."""

    def __init__(self, extra):
        self.specs = ([(tf.int32, tf.TensorShape([]))] * 2
                      + [(t.dtype, t.shape) for t in extra])

    def start(self):
        return [tf.TensorArray(dtype, size=0, dynamic_size=True, infer_shape=False,
                               element_shape=tf.TensorShape([None]).concatenate(shape))
                for dtype, shape in self.specs]

    @staticmethod
    def record(arrays, step, rows, values):
        pieces = [rows, tf.fill(tf.shape(rows), step)] + list(values)
        return [a.write(step, v) for a, v in zip(arrays, pieces)]

    @staticmethod
    def totals(deferred, arrays, steps, n, init, stack):
        """{loop variable: ``init[k]`` (a layout value) plus its sum over every row's
        steps}; ``stack`` tiles a start when no row ran."""
        operands = iter(arrays[2:])
        out = {}
        for k, products in deferred.items():
            mine = [next(operands) for _ in range(2 * len(products))]

            def run(products=products, mine=mine, start=init[k]):
                where = tf.stack([arrays[1].concat(), arrays[0].concat()], 1)
                padded = []
                for array in mine:
                    values = array.concat()
                    shape = tf.concat([tf.stack([steps, n]), tf.shape(values)[1:]], 0)
                    padded.append(tf.scatter_nd(where, values, shape))
                return plus(start, total(products, padded))

            out[k] = tf.cond(steps > 0, run, lambda start=init[k]: stack(start))
        return out
