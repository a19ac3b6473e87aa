"""Discovering converter packs through the ``pfor.converters`` entry points.

Each entry point is loaded inside a guard, its API version checked, then its
``pfor_register_converters`` hook is called with a registrar bound to the pack. Any
failure is recorded on the pack's ``PackInfo``, warned about by name, and the pack's
converters are left out; nothing breaks for the other packs.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import re
import warnings

import pluggy

from pfor_core import autograph, hookspecs
from pfor_core.registry import PackRegistrar, Registry, check_registration

ENTRY_POINT_GROUP = "pfor.converters"
CONVERTER_API_VERSION = 1


@dataclasses.dataclass(kw_only=True)
class PackInfo:
    name: str  # distribution name
    version: str
    entry_point: str
    status: str  # "loaded", "refused", "failed", "disabled" ("loading" meanwhile)
    api_version: int | None = None
    reason: str = ""
    converters: int = 0


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def autoload_disabled() -> bool:
    """Whether ``PFOR_DISABLE_PLUGIN_AUTOLOAD`` turns autoload off: 1/true/yes/on (any
    case) do, 0/false/no/off or empty do not; anything else is warned about and, since
    the variable is set, taken as on."""
    raw = os.environ.get("PFOR_DISABLE_PLUGIN_AUTOLOAD", "")
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    warnings.warn(
        f"PFOR_DISABLE_PLUGIN_AUTOLOAD={raw!r} is neither true (1, true, yes, on) nor "
        "false (0, false, no, off, empty); it is taken as true: only the packs named in "
        "PFOR_PLUGINS are loaded.", RuntimeWarning, stacklevel=2)
    return True


def _allowed() -> set[str] | None:
    """Distribution names allowed to load, or None for all."""
    if autoload_disabled():
        names = os.environ.get("PFOR_PLUGINS", "")
        return {normalize(n.strip()) for n in names.split(",") if n.strip()}
    return None


def _entry_points():
    eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    return sorted(eps, key=lambda ep: (ep.dist.name if ep.dist else "", ep.name))


def load_packs(registry: Registry) -> list[PackInfo]:
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    allowed = _allowed()
    infos = registry.packs = []  # filled as packs load (a pack may look while it loads)
    for ep in _entry_points():
        dist = ep.dist.name if ep.dist else ep.name
        version = ep.dist.version if ep.dist else ""
        info = PackInfo(name=dist, version=version, entry_point=f"{ep.name} = {ep.value}",
                        status="loading")
        infos.append(info)
        if allowed is not None and normalize(dist) not in allowed:
            info.status, info.reason = "disabled", "PFOR_DISABLE_PLUGIN_AUTOLOAD is set"
            continue
        load_one(manager, registry, ep.load, info)
    return infos


def load_one(manager, registry: Registry, load, info: PackInfo) -> None:
    """Load one pack (``load()`` returns its hook module), recording what happened.

    Whatever the pack raises, ``SystemExit`` included, is contained (only
    ``KeyboardInterrupt`` goes through): a pack never ends the user's program.
    """
    try:
        module = load()
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # pylint: disable=broad-except
        _fail(info, "failed", f"import failed: {_describe(err)}")
        return
    version_hook = getattr(module, "pfor_converter_api_version", None)
    try:
        api = version_hook() if callable(version_hook) else None
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # pylint: disable=broad-except
        _fail(info, "failed", f"pfor_converter_api_version raised {_describe(err)}")
        return
    info.api_version = api
    _declare_hints(registry, module, info)
    if api != CONVERTER_API_VERSION:
        declared = "declares no converter-API version" if api is None else (
            f"was written for converter API {api}")
        _fail(info, "refused",
              f"{declared}; this pfor-core speaks version {CONVERTER_API_VERSION}. "
              f"Upgrade {info.name} or pfor-core so they match.")
        return
    try:
        manager.register(module, name=info.name)
        registrar = PackRegistrar(registry, info.name, info.version)
        for impl in manager.hook.pfor_register_converters.get_hookimpls():
            if impl.plugin_name == info.name:
                impl.function(registry=registrar)
        info.converters = registrar.count
        _declare_library_modules(registry, module)
        info.status = "loaded"
    except KeyboardInterrupt:
        registry.remove_pack(info.name)
        raise
    except BaseException as err:  # pylint: disable=broad-except
        registry.remove_pack(info.name)
        _fail(info, "failed", f"pfor_register_converters raised {_describe(err)}")


def _describe(err: BaseException) -> str:
    if isinstance(err, SystemExit):
        return f"SystemExit (it called sys.exit({err.code!r}))"
    return f"{type(err).__name__}: {err}"


def _declare_hints(registry: Registry, module, info: PackInfo) -> None:
    """Record the pack's ``pfor_install_hints`` (optional; a broken one is ignored: hints
    only add to messages)."""
    hook = getattr(module, "pfor_install_hints", None)
    try:
        hints = dict(hook()) if callable(hook) else {}
    except KeyboardInterrupt:
        raise
    except BaseException:  # pylint: disable=broad-except
        return
    for op_type, hint in hints.items():
        if isinstance(op_type, str) and isinstance(hint, str):
            registry.hints.setdefault(op_type, []).append((info.name, hint))


def _declare_library_modules(registry: Registry, module) -> None:
    """Record the pack's ``pfor_library_modules`` and keep AutoGraph out of them."""
    hook = getattr(module, "pfor_library_modules", None)
    names = [str(n) for n in hook()] if callable(hook) else []
    registry.library_modules.update(names)
    autograph.keep_unconverted(names)


def _fail(info: PackInfo, status: str, reason: str) -> None:
    info.status, info.reason = status, reason
    warnings.warn(f"pfor: converter pack {info.name} {info.version} was not loaded: {reason}",
                  RuntimeWarning, stacklevel=4)


_DEFAULT: list[Registry] = []  # the process-wide registry, created on first use


def default_registry() -> Registry:
    """The registry every ``pfor`` call uses; packs are loaded on first use.

    A pack that asks for the registry (or registers a converter in-process) while the
    packs are loading gets this same registry, still being filled.

    >>> import pfor_core as pf
    >>> "MatMul" in pf.default_registry().op_types()
    True
    >>> sorted({pack.status for pack in pf.default_registry().packs})
    ['loaded']
    """
    if not _DEFAULT:
        registry = Registry()
        _DEFAULT.append(registry)  # before loading: loading may ask for it again
        try:
            registry.packs = load_packs(registry)
        except BaseException:
            _DEFAULT.clear()  # interrupted: load again next time
            raise
    return _DEFAULT[0]


def register_converter(op_type, *, inputs: str | None = None, priority: int = 0):
    """Decorator: register ``fn(ctx)`` in-process as a converter for ``op_type``.

    ``op_type`` is a TensorFlow op-type string (or a list of them); ``inputs`` an
    invariance pattern such as ``"SU"``. Among converters of equal priority and
    specificity the latest registration is tried first.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> @pf.register_converter("Sinh", inputs="S", priority=10)
    ... def convert_sinh(ctx):
    ...     return pf.Stacked(tensor=tf.sinh(ctx.inputs[0].tensor))
    >>> body = lambda i: tf.sinh(tf.cast(i, tf.float32))
    >>> pf.pfor(body, 2, fallback="error").numpy().round(3)
    array([0.   , 1.175], dtype=float32)
    >>> [row.converter for row in pf.explain(body, 2).rows if row.op_type == "Sinh"]
    ['__main__.convert_sinh']
    >>> pf.default_registry().remove("Sinh", convert_sinh)
    """
    check_registration(op_type, inputs, priority)  # at the call, not at decoration

    def decorate(fn):
        default_registry().add(op_type, fn, inputs=inputs, priority=priority)
        return fn

    return decorate


def register_batch_polymorphic(op_type, *, batched_inputs=None, priority: int = 0):
    """Declare in-process that ``op_type``'s kernel accepts leading batch dimensions.

    Returns the converter it registered, so that it can be removed again with
    ``pf.default_registry().remove(op_type, converter)``.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> converter = pf.register_batch_polymorphic("Softplus", priority=10)
    >>> body = lambda i: tf.nn.softplus(tf.cast(i, tf.float32))
    >>> pf.pfor(body, 2, fallback="error").numpy().round(3)
    array([0.693, 1.313], dtype=float32)
    >>> [row.pack for row in pf.explain(body, 2).rows if row.op_type == "Softplus"]
    ['<in-process>']
    >>> pf.default_registry().remove("Softplus", converter)
    """
    from pfor_core.patterns import batch_polymorphic

    check_registration(op_type, None, priority)
    converter = batch_polymorphic(batched_inputs)
    default_registry().add(op_type, converter, inputs=converter.inputs, priority=priority)
    return converter
