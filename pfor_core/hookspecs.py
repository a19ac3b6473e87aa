"""The hooks a converter pack implements: the contract between the core and packs.

A pack is a distribution with an entry point in the group ``pfor.converters`` that
names a module implementing these hooks, marked with ``pfor_core.hookimpl``::

    from pfor_core.extend import hookimpl

    @hookimpl
    def pfor_converter_api_version():
        return 1

    @hookimpl
    def pfor_register_converters(registry):
        registry.add("MyOp", convert_my_op, inputs="S")

    @hookimpl
    def pfor_library_modules():
        return ["pfor_converters_mine"]

    @hookimpl
    def pfor_install_hints():
        return {"MyOp": "pip install -U pfor-converters-mine"}

The first two are required, the last two optional. The core loads each pack inside a
guard: a pack that fails to import, declares an incompatible API version or raises
while registering is reported (``pfor packs``) and left out; the other packs keep
working. The core knows packs only through these hooks: it names none of them.
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


@hookspec
def pfor_library_modules() -> list[str]:
    """The top-level modules (import names) of the pack's code.

    AutoGraph leaves them unconverted, as it leaves pfor itself: a converter reached
    from an AutoGraph-converted ``tf.function`` must run as the plain Python it is.
    pfor's warnings and errors also count their frames as library code, so that they
    point at the user's line. Declared by loaded packs only.

    :return: module names, e.g. ``["pfor_converters_mine"]``.
    """


@hookspec
def pfor_install_hints() -> dict[str, str]:
    """What to install or enable to have op types vectorized, for pfor's messages.

    Asked of every pack the core imports, also of one it then refuses (another
    converter-API version) or whose registration fails: when no loaded converter takes
    an op, its ``ConversionError`` and ``FallbackWarning`` show the hints given for its
    type, with the pack's name and, if it is not loaded, why.

    :return: op type -> hint, e.g. ``{"MyOp": "pip install -U pfor-converters-mine"}``.
    """
