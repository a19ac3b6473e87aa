"""An example third-party pfor converter pack (see docs/extending.rst): Dawson's integral
(``Dawsn``) and the first version of gather (``Gather``), both taking over from the
first-party math pack's converters by priority."""

__version__ = "0.3.1"
