"""Entry point of the example pack: pfor calls these two hooks when it loads the pack."""

from pfor_core.extend import hookimpl

from pfor_converters_example import special


@hookimpl
def pfor_converter_api_version():
    return 1


@hookimpl
def pfor_register_converters(registry):
    special.register(registry)
