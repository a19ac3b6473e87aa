"""Entry point of the nn pack: declares the converter API and registers converters."""

from pfor_core.extend import hookimpl, op_types_of


@hookimpl
def pfor_converter_api_version():
    return 1


@hookimpl
def pfor_register_converters(registry):
    """Register each op family's converters."""
    from pfor_converters_nn import activations, bias, losses
    from pfor_converters_nn import normalization, pooling
    from pfor_converters_nn import conv, conv_grad, image, space_batch
    from pfor_converters_nn import colour, crops, ctc, nms, patches

    bias.register(registry)
    activations.register(registry)
    losses.register(registry)
    pooling.register(registry)
    normalization.register(registry)
    conv.register(registry)
    conv_grad.register(registry)
    image.register(registry)
    colour.register(registry)
    crops.register(registry)
    patches.register(registry)
    nms.register(registry)
    space_batch.register(registry)
    ctc.register(registry)


@hookimpl
def pfor_library_modules():
    """This pack's code: AutoGraph leaves it alone, pfor's messages skip its frames."""
    return ["pfor_converters_nn"]


@hookimpl
def pfor_install_hints():
    """Shown for this pack's op types when no loaded pack converts them (e.g. this one
    is installed but was refused or disabled)."""
    return dict.fromkeys(op_types_of(pfor_register_converters), "pip install -U pfor-converters-nn")
