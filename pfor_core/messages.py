"""Texts of the errors and warnings about ops that were not vectorized."""

from __future__ import annotations

import importlib.util
import os
import sys

from pfor_core.errors import FALLBACK_PREFIX

# Packages whose frames are not the user's code, besides the modules the loaded packs
# declare (``pfor_library_modules``: callers pass the registry's ``library_modules``). Their folders are located (not imported, not
# matched by name), so a file that only sits in a folder of the same name, such as a
# pack's own tests/, still counts as the user's.
_LIBRARY_PACKAGES = ("tensorflow", "keras", "pfor_core")
_INSTALL_DIRS = tuple(os.sep + d + os.sep for d in ("site-packages", "dist-packages"))


def library_dirs(library_modules=()) -> tuple[str, ...]:
    """The folders of TensorFlow, Keras, pfor, installed packages and ``library_modules``
    (the loaded packs' own modules)."""
    dirs = list(_INSTALL_DIRS)
    for name in _LIBRARY_PACKAGES + tuple(sorted(library_modules)):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for location in (spec.submodule_search_locations or ()) if spec else ():
            dirs.append(os.path.join(os.path.abspath(location), ""))
    return tuple(dirs)


def is_library_file(filename: str, dirs: tuple[str, ...] | None = None) -> bool:
    """Whether ``filename`` belongs to TensorFlow, Keras, pfor or an installed package."""
    dirs = library_dirs() if dirs is None else dirs
    return any(d in filename for d in dirs)


def source_line(op, library_modules=()) -> str:
    """The user's source line that created ``op`` (TensorFlow records a traceback)."""
    try:
        frames = op.traceback or ()  # None for ops imported from a FunctionDef
    except Exception:  # pylint: disable=broad-except
        return ""
    dirs = library_dirs(library_modules)
    user = [f for f in frames if not is_library_file(f.filename, dirs)]
    if not user:
        return ""
    frame = user[-1]
    return f"{frame.filename}:{frame.lineno}"


def describe_inputs(layouts) -> str:
    parts = []
    for k, v in enumerate(layouts):
        kind = "ragged" if v.code == "R" else "stacked" if v.is_stacked else "invariant"
        parts.append(f"#{k} {kind} {v.dtype.name}{v.shape}")
    return ", ".join(parts) if parts else "no inputs"


def _where(op, library_modules=()) -> str:
    line = source_line(op, library_modules)
    return f" (created at {line})" if line else ""


def converter_label(entry) -> str:
    """``name from pack version``, as messages name a converter."""
    pack = f"{entry.pack} {entry.version}".strip()
    return f"{entry.name} from {pack}"


def broken_converter(entry, op, what, library_modules=()) -> str:
    return (
        f"pfor: converter {converter_label(entry)} {what} while converting {op.type} "
        f"'{op.name}'{_where(op, library_modules)}. It is skipped: the next converter for {op.type} takes "
        f"the op, or the op runs in the fallback loop (fallback='error' raises instead). "
        f"Report this to the maintainers of {entry.pack}.")


def no_converter(op, layouts, registry) -> str:
    """Why no converter was tried: which input patterns the op type's converters take
    (none of them these), or that there is none, with the packs' install hints."""
    entries = [e for e in registry.entries(op.type) if not e.narrow]
    pattern = "".join(v.code for v in layouts)
    if entries:
        specs = ", ".join(sorted({f"{e.inputs or '*...'} ({e.pack})" for e in entries}))
        return (f"The converters for {op.type} take inputs {specs}, none these "
                f"({pattern}; S stacked, U invariant, R ragged).")
    packs = {p.name: p for p in registry.packs}
    hints = []
    for pack, hint in registry.hints.get(op.type, ()):
        info = packs.get(pack)
        state = "" if info is None or info.status == "loaded" else (
            f", not loaded: {info.status}{': ' + info.reason if info.reason else ''}")
        hints.append(f"{pack} covers it{state} ({hint})")
    text = "No loaded pack has a converter for this op type."
    if hints:
        text += " " + "; ".join(hints) + "."
    disabled = sorted(p.name for p in registry.packs if p.status == "disabled")
    if disabled:
        text += (f" Installed but not loaded (PFOR_DISABLE_PLUGIN_AUTOLOAD is set): "
                 f"{', '.join(disabled)}; name them in PFOR_PLUGINS to load them.")
    return text


def usually_uniform(op, library_modules=()) -> str:
    """The run-time message when values of usually one shape (slices at per-iteration
    offsets) reach an op without a ragged converter in different shapes."""
    return (f"pfor: {op.type} '{op.name}'{_where(op, library_modules)} got a value whose shape differs "
            "between iterations (a slice at a per-iteration offset clipped at the end of "
            "its axis?) and has no converter for such values; keep every slice inside "
            "its axis (pad the sliced tensor) so that all iterations have one shape.")


def unranked_uniform(op, library_modules=()) -> str:
    """The run-time message when values of unknown rank whose shapes differ between
    iterations reach an op that keeps them in a tensor list (which needs their rank)."""
    return (f"pfor: {op.type} '{op.name}'{_where(op, library_modules)} got values of unknown rank (a "
            "tf.numpy_function's or tf.py_function's output without set_shape?) whose "
            "shapes differ between iterations, for a tensor list, which holds them only "
            "with a rank: give them one with set_shape or tf.ensure_shape (e.g. "
            "y.set_shape([None, 2])), and pfor keeps them ragged.")


def rank_differs(tensor, library_modules=()) -> str:
    """The run-time message when values of no static rank reach a body tensor whose
    static rank (set by hand) they do not have."""
    op = tensor.op
    return (f"pfor: {op.type} '{op.name}'{_where(op, library_modules)} has values of a rank other than "
            f"its static rank {tensor.shape.rank} in some iterations: make every "
            "iteration's value the same rank.")


def conversion_error(op, layouts, reasons, faults=(), *, registry) -> str:
    broken = "".join(f" Converter {converter_label(entry)} {what}." for entry, what, _ in faults)
    why = f" Converters declined: {'; '.join(reasons)}." if reasons else (
        " " + no_converter(op, layouts, registry))
    if faults:
        why = f"{broken} No other converter took the op." + (
            f" ({'; '.join(reasons)})" if len(reasons) > len(faults) else "")
    return (
        f"pfor cannot vectorize op {op.type} '{op.name}'{_where(op, registry.library_modules)} with inputs "
        f"[{describe_inputs(layouts)}].{why} To go on: install a converter pack that "
        f"handles {op.type} (`pfor ops --missing` lists gaps), register one with "
        f"@pf.register_converter({op.type!r}), or pass fallback='loop' or 'warn' to run "
        "this op in a sequential loop.")


def fallback_warning(op, layouts, reasons, *, registry) -> str:
    why = f" ({'; '.join(reasons)})" if reasons else f" ({no_converter(op, layouts, registry)})"
    return (
        f"{FALLBACK_PREFIX} {op.type} '{op.name}'{_where(op, registry.library_modules)} runs in a sequential loop "
        f"over the iterations{why}; inputs [{describe_inputs(layouts)}]. Register a "
        f"converter with @pf.register_converter({op.type!r}) to vectorize it, or pass "
        "fallback='loop' to silence this warning.")


def user_stacklevel(library_modules=()) -> int:
    """``stacklevel`` for ``warnings.warn`` that points at the user's code.

    Call it directly from the function that calls ``warnings.warn``.
    """
    frame = sys._getframe(1)  # pylint: disable=protected-access
    level = 1
    dirs = library_dirs(library_modules)
    while frame is not None and is_library_file(frame.f_code.co_filename, dirs):
        frame = frame.f_back
        level += 1
    return level
