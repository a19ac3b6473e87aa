"""Entry point of the nn pack: declares the converter API and registers converters."""

from pfor_core.extend import hookimpl


@hookimpl
def pfor_converter_api_version():
    return 1


@hookimpl
def pfor_register_converters(registry):
    """Register each op family's converters (more families: see the nn issue)."""
    from pfor_converters_nn import activations, bias, losses
    from pfor_converters_nn import normalization, pooling
    from pfor_converters_nn import conv, image, space_batch

    bias.register(registry)
    activations.register(registry)
    losses.register(registry)
    pooling.register(registry)
    normalization.register(registry)
    conv.register(registry)
    image.register(registry)
    space_batch.register(registry)
