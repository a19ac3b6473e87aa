"""Sums of thin matrix products, contracted once: what a weight's gradient over many
steps (an unrolled recurrence, a loop's accumulator) becomes per example.

Each step adds ``a_t^T @ b_t``, one example's ``[K, p]`` input and ``[K, q]`` output
gradient, with K far below p and q. Vectorized one product at a time, every term is an
outer product ``[n, p, q]`` that the sum reads and writes whole; kept as operands and
contracted once over the concatenated steps, ``[a_1 ... a_T]^T @ [b_1; ...; b_T]``, the
same products are summed inside one batched matmul, with ``(p + q) K`` numbers kept per
step instead of ``p q``. Math's ``Products`` view and control flow's deferred loop sums
both build on these.
"""

from __future__ import annotations

import tensorflow as tf


def matmul_sizes(a_shape, b_shape, transpose_a: bool, transpose_b: bool) -> tuple:
    """``(K, p, q)`` of a MatMul of per-example matrices of these shapes (None where a
    size is unknown statically)."""
    k, p = (a_shape[0], a_shape[1]) if transpose_a else (a_shape[1], a_shape[0])
    q = b_shape[0] if transpose_b else b_shape[1]
    return k, p, q


def thin(k, p, q) -> bool:
    """Whether keeping a product's operands (``K (p + q)`` numbers) is no bigger than
    the product (``p q``); False when a size is not static."""
    return None not in (k, p, q) and k * (p + q) <= p * q


def summed(terms) -> tf.Tensor:
    """The sum of the terms' products per row, ``[n, p, q]``: ``terms`` are
    ``(a, b, transpose_a, transpose_b)``, each the product
    ``tf.linalg.matmul(a, b, transpose_a=..., transpose_b=...)`` of stacked matrices
    (``a`` is ``[n, K_j, p]`` when ``transpose_a``, else ``[n, p, K_j]``; ``b`` is
    ``[n, K_j, q]``, or ``[n, q, K_j]`` when ``transpose_b``). Terms of one
    transposition are joined along K and contracted by one batched matmul; the groups
    are added."""
    groups = {}
    for a, b, ta, tb in terms:
        groups.setdefault((bool(ta), bool(tb)), []).append((a, b))
    out = None
    for (ta, tb), pairs in groups.items():
        a = _joined([a for a, _ in pairs], 1 if ta else 2)
        b = _joined([b for _, b in pairs], 2 if tb else 1)
        term = tf.linalg.matmul(a, b, transpose_a=ta, transpose_b=tb)
        out = term if out is None else out + term
    return out


def _joined(tensors, axis: int) -> tf.Tensor:
    return tensors[0] if len(tensors) == 1 else tf.concat(tensors, axis=axis)
