"""pfor converter pack for math and array ops: elementwise math, reductions, matmul and
einsum, batch-polymorphic linear algebra, shape, slicing, joining, sorting, segment and
scatter ops."""

__version__ = "0.2.0"
