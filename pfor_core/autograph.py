"""AutoGraph: applied to the user's loop body, kept out of the library.

Like TensorFlow's own higher-order functions, ``loop_fn`` is converted by AutoGraph
(Python ``if``/``for`` on tensors become ``tf.cond``/``tf.while_loop``) unless the
caller turned AutoGraph off (``tf.function(autograph=False)``). The library itself is
never converted: from an AutoGraph-converted ``tf.function``, our converters and plugin
loader would otherwise be rewritten recursively, changing their Python semantics. The
core adds itself at import; each pack's modules are added when it loads, from its
``pfor_library_modules`` hook.
"""

from tensorflow.python.autograph.core import ag_ctx, config
from tensorflow.python.autograph.impl import api as autograph_api

CORE = "pfor_core"


def keep_library_unconverted() -> None:
    """Add the core to AutoGraph's do-not-convert rules (idempotent)."""
    keep_unconverted([CORE])


def keep_unconverted(modules) -> None:
    """Add these top-level modules to AutoGraph's do-not-convert rules (idempotent)."""
    present = {getattr(rule, "_prefix", None) for rule in config.CONVERSION_RULES}
    rules = tuple(config.DoNotConvert(name) for name in dict.fromkeys(modules)
                  if name not in present)
    if rules:
        config.CONVERSION_RULES = rules + tuple(config.CONVERSION_RULES)


def caller_status():
    """The caller's AutoGraph status, to be captured at an entry point."""
    return ag_ctx.control_status_ctx()


def convert_user_fn(fn, status):
    """``fn`` converted by AutoGraph unless ``status`` says AutoGraph is off."""
    python_fn = getattr(fn, "python_function", None)
    fn = python_fn if callable(python_fn) else fn  # a tf.function body is inlined
    return autograph_api.tf_convert(fn, status)
