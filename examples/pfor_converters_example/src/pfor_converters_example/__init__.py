"""An example third-party pfor converter pack (see docs/extending.rst)."""
