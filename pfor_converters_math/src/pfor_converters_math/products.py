"""Sums of thin matrix products, contracted once: weight gradients of unrolled steps.

A weight used at T steps of a body (a recurrence unrolled in Python, Keras's
``unroll=True``, weight sharing) gets as its gradient ``AddN`` of T MatMuls
``a_t^T @ b_t`` with a thin contraction (``extend.thin_products``). Here a thin
stacked product stays a ``Products`` view holding its operands; an add of such views
joins their operand lists; and whatever reads the sum gets ONE batched matmul over
the concatenated steps (``thin_products.summed``). Loops get the same from the
control-flow pack's ``loops.deferred_sums``.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Stacked, View, thin_products

from pfor_converters_math import matmul

_ADDS = ("AddN", "AddV2", "Add")


class Products(View):
    """Per iteration ``sum_j a_j^T @ b_j``: ``terms`` holds stacked pairs ``(a_j, b_j)``
    of shapes ``[n, K_j, p]`` and ``[n, K_j, q]``. ``tensor`` is the sum as one batched
    matmul over the concatenated ``K_j`` (built once per graph, on first read), or
    ``alone`` where given: the one product computed without the view (for a term with
    a broadcast invariant operand, read by no add of products)."""

    __slots__ = ("_terms", "_built", "alone")

    def __init__(self, terms, alone=None):  # pylint: disable=super-init-not-called
        """``terms`` a list, or (with ``alone``) a callable that builds it when an add
        joins this view, so that a product read alone emits nothing else."""
        object.__setattr__(self, "_terms", terms if callable(terms) else tuple(terms))
        object.__setattr__(self, "_built", {})
        object.__setattr__(self, "alone", alone)

    @property
    def terms(self):
        if callable(self._terms):
            object.__setattr__(self, "_terms", tuple(self._terms()))
        return self._terms

    @property
    def tensor(self) -> tf.Tensor:  # pylint: disable=invalid-overridden-method
        if self.alone is not None:
            return self.alone
        graph = tf.compat.v1.get_default_graph()
        if graph not in self._built:
            self._built[graph] = thin_products.summed(
                [(a, b, True, False) for a, b in self.terms])
        return self._built[graph]

    def materialize(self) -> Stacked:
        """The summed products, ``[n, p, q]``."""
        return Stacked(tensor=self.tensor)

    @property
    def dtype(self):
        return self.alone.dtype if self.alone is not None else self.terms[0][0].dtype

    @property
    def shape(self) -> tf.TensorShape:
        if self.alone is not None:
            return self.alone.shape[1:]
        a, b = self.terms[0]
        return tf.TensorShape([a.shape[-1], b.shape[-1]])

    def __repr__(self):
        count = 1 if callable(self._terms) else len(self._terms)  # unbuilt: one term
        return f"Products({count} terms, shape={self.shape})"


def _rows_first(tensor, transposed):
    """An operand as ``[n, K, m]`` (K, the contracted axis, first): per iteration it is
    ``[K, m]`` when ``transposed`` is what the op's flag makes it, else ``[m, K]``."""
    if transposed:
        return tensor
    if tensor.shape[-1] == 1:  # [n, m, 1] -> [n, 1, m]: the same numbers in order
        return tf.reshape(tensor, [-1, 1, tensor.shape[1]])
    return tf.transpose(tensor, [0, 2, 1])


def convert_thin_matmul(ctx):
    """A MatMul whose contraction is thin, of a stacked operand and another operand: a
    one-term ``Products`` (an invariant operand, thin too, is broadcast: the product
    of the zero initial state of an unrolled recurrence is one of the terms)."""
    a, b = ctx.inputs
    if a.shape.rank != 2 or b.shape.rank != 2 or a.dtype.is_complex:
        raise Decline("a thin product needs real matrices of known rank")
    ta, tb = ctx.attr("transpose_a"), ctx.attr("transpose_b")
    if not thin_products.thin(*thin_products.matmul_sizes(a.shape, b.shape, ta, tb)):
        raise Decline("the contraction is not thin or its sizes are not static")
    # a^T as [K, p] is a as stored when transpose_a; b as [K, q] is b unless transpose_b.
    terms = lambda: [(_rows_first(ctx.stack(a), ta), _rows_first(ctx.stack(b), not tb))]  # noqa: E731
    if a.is_stacked and b.is_stacked:
        return Products(terms())
    # Read alone (an input gradient, not a weight gradient's sum), the product is one
    # 2-D matmul rather than a batched one against n broadcast copies of the invariant
    # operand; an add of products joins the terms instead (the unused product is pruned).
    plain = (matmul.convert_matmul_stacked_invariant if a.is_stacked
             else matmul.convert_matmul_invariant_stacked)(ctx)
    return Products(terms, alone=plain.tensor)


def convert_add_of_products(ctx):
    """An add of ``Products`` views of one shape: their terms, joined, still a view."""
    values = ctx.inputs
    if not all(isinstance(v, Products) for v in values):
        raise Decline("not every operand is a sum of thin products")
    if any(v.shape != values[0].shape or v.dtype != values[0].dtype for v in values):
        raise Decline("the products' shapes differ (the add broadcasts)")
    return Products([term for v in values for term in v.terms])


def register(registry):
    """Add this family's converters to the pack's registrar."""
    # A guard: it declines all but thin products, so listings name matmul.py's converters.
    for pattern in ("SS", "SU", "US"):
        registry.add("MatMul", convert_thin_matmul, inputs=pattern, priority=1, narrow=True)
    # Asked only when an input is a Products view (ahead of the plain adds).
    registry.add("AddN", convert_add_of_products, inputs="S...", view=Products)
    registry.add(["AddV2", "Add"], convert_add_of_products, inputs="SS", view=Products)
