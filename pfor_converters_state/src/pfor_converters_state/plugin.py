"""Entry point of the state pack: declares the converter API and registers converters."""

from pfor_core.extend import hookimpl


@hookimpl
def pfor_converter_api_version():
    return 1


@hookimpl
def pfor_register_converters(registry):
    from pfor_converters_state import printing, random_ops, variables

    variables.register(registry)
    random_ops.register(registry)
    printing.register(registry)
