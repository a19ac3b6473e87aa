"""An example third-party pfor converter pack (see docs/extending.rst): Dawson's integral
(``Dawsn``) and the first version of gather (``Gather``)."""

__version__ = "0.2.0"
