"""pfor converter pack for math and array ops: elementwise math and special functions,
reductions, matmul and einsum, batch-polymorphic linear algebra, shape, slicing, joining,
sorting, segment and scatter ops, FFTs, run-time checks (EnsureShape, CheckNumerics) and
parsing of tf.Example / CSV records."""

__version__ = "0.7.5"
