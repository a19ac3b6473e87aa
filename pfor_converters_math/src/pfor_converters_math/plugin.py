"""Entry point of the math pack: each op-family module registers its converters."""

import importlib

from pfor_core.extend import hookimpl, op_types_of

# One module per op family; each has ``register(registry)``.
MODULES = ("elementwise", "special", "reductions", "matmul", "linalg", "shape_ops", "reshape",
           "fill", "slicing.gather", "slicing.slice", "slicing.strided_slice",
           "slicing.slice_grads", "slicing.pad", "slicing.reverse_roll", "joining", "sorting",
           "segments", "checks", "fft", "parsing", "range", "masks", "unique", "counting",
           "partition", "ragged_tensor", "sequences", "xla_ops", "sparse_segments", "strings",
           "allocation", "sparse_to_dense", "products", "stitches")


@hookimpl
def pfor_converter_api_version():
    return 1


@hookimpl
def pfor_register_converters(registry):
    for name in MODULES:
        module = importlib.import_module(f"pfor_converters_math.{name}")
        module.register(registry)


@hookimpl
def pfor_library_modules():
    """This pack's code: AutoGraph leaves it alone, pfor's messages skip its frames."""
    return ["pfor_converters_math"]


@hookimpl
def pfor_install_hints():
    """Shown for this pack's op types when no loaded pack converts them (e.g. this one
    is installed but was refused or disabled)."""
    return dict.fromkeys(op_types_of(pfor_register_converters), "pip install -U pfor-converters-math")
