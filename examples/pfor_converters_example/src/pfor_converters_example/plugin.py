"""Entry point of the example pack: pfor calls these two hooks when it loads the pack."""

import pfor_core as pf

from pfor_converters_example import special


@pf.hookimpl
def pfor_converter_api_version():
    return 1


@pf.hookimpl
def pfor_register_converters(registry):
    special.register(registry)
