"""Entry point of the example pack: the hooks pfor calls when it loads the pack.

The first two hooks are required; the last two are optional declarations.
"""

from pfor_core.extend import hookimpl, op_types_of

from pfor_converters_example import gather, special


@hookimpl
def pfor_converter_api_version():
    """The converter-API version this pack was written against."""
    return 1


@hookimpl
def pfor_register_converters(registry):
    """One module per op family, each with a ``register(registry)``."""
    special.register(registry)
    gather.register(registry)


@hookimpl
def pfor_library_modules():
    """This pack's code: AutoGraph leaves it alone, pfor's messages skip its frames."""
    return ["pfor_converters_example"]


@hookimpl
def pfor_install_hints():
    """Shown for these op types when no loaded pack converts them."""
    return dict.fromkeys(op_types_of(pfor_register_converters),
                         "pip install ./examples/pfor_converters_example")
