"""Entry point of the control-flow pack: declares the converter API and registers converters."""

from pfor_core.extend import hookimpl, op_types_of


@hookimpl
def pfor_converter_api_version():
    return 1


@hookimpl
def pfor_register_converters(registry):
    from pfor_controlflow import calls
    from pfor_controlflow.conditionals import table as conditionals
    from pfor_controlflow.lists import table as lists
    from pfor_controlflow.loops import table as loops

    for module in (calls, conditionals, loops, lists):
        module.register(registry)


@hookimpl
def pfor_library_modules():
    """This pack's code: AutoGraph leaves it alone, pfor's messages skip its frames."""
    return ["pfor_controlflow"]


@hookimpl
def pfor_install_hints():
    """Shown for this pack's op types when no loaded pack converts them (e.g. this one
    is installed but was refused or disabled)."""
    return dict.fromkeys(op_types_of(pfor_register_converters), "pip install -U pfor-controlflow")
