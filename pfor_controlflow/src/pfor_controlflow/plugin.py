"""Entry point of the control-flow pack: declares the converter API and registers converters."""

from pfor_core.extend import hookimpl


@hookimpl
def pfor_converter_api_version():
    return 1


@hookimpl
def pfor_register_converters(registry):
    from pfor_controlflow import (calls, conditionals, list_views, loops, optionals,
                                  row_views, tensor_lists)

    for module in (calls, conditionals, loops, tensor_lists, list_views, optionals,
                   row_views):
        module.register(registry)
