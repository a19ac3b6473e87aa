"""The hooks a converter pack implements: the contract between the core and packs.

A pack is a distribution with an entry point in the group ``pfor.converters`` that
names a module implementing these hooks, marked with ``pfor_core.hookimpl``::

    import pfor_core as pf

    @pf.hookimpl
    def pfor_converter_api_version():
        return 1

    @pf.hookimpl
    def pfor_register_converters(registry):
        registry.add("MyOp", convert_my_op, inputs="S")

The core loads each pack inside a guard: a pack that fails to import, declares an
incompatible API version or raises while registering is reported (``pfor packs``) and
left out; the other packs keep working.
"""

from __future__ import annotations

import pluggy

PROJECT = "pfor"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec(firstresult=True)
def pfor_converter_api_version() -> int:
    """The version of the converter API the pack was written against.

    :return: an int; the core loads the pack only if it equals
        ``pfor_core.CONVERTER_API_VERSION``.
    """


@hookspec
def pfor_register_converters(registry) -> None:
    """Add the pack's converters.

    :param registry: a ``pfor_core.registry.PackRegistrar`` bound to this pack; use
        ``registry.add(op_types, fn, inputs=..., priority=...)`` and
        ``registry.batch_polymorphic(op_types, batched_inputs=...)``. Every converter is
        recorded with the pack's name and version. Importing the pack's modules must
        register nothing by itself: only this hook does.
    """
