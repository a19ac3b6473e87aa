"""Entry point of the math pack: each op-family module registers its converters."""

import importlib

from pfor_core.extend import hookimpl

# One module per op family; each has ``register(registry)``.
MODULES = ("elementwise", "special", "reductions", "matmul", "linalg", "shape_ops",
           "slicing", "joining", "sorting", "segments", "checks", "fft", "parsing")


@hookimpl
def pfor_converter_api_version():
    return 1


@hookimpl
def pfor_register_converters(registry):
    for name in MODULES:
        module = importlib.import_module(f"pfor_converters_math.{name}")
        module.register(registry)
