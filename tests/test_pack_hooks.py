"""What packs declare through their optional hooks, and what the core does with it:
``pfor_library_modules`` (AutoGraph leaves those modules alone, messages skip their
frames) and ``pfor_install_hints`` (shown when no loaded converter takes an op). The
first-party packs declare both; a broken hint hook costs only the hints."""

import importlib
import pathlib
import sys
import textwrap
import tomllib
import warnings

import pytest
import tensorflow as tf
from tensorflow.python.autograph.core import config

import pfor_core as pf
from pfor_core import messages, plugins
from pfor_core.registry import Registry

FIRST_PARTY = {"pfor-controlflow": "pfor_controlflow", "pfor-converters-math":
               "pfor_converters_math", "pfor-converters-nn": "pfor_converters_nn",
               "pfor-converters-state": "pfor_converters_state"}

HOOKS = """
from pfor_core.extend import hookimpl

@hookimpl
def pfor_converter_api_version():
    return {api}

@hookimpl
def pfor_register_converters(registry):
    pass

@hookimpl
def pfor_library_modules():
    return ["{module}"]

@hookimpl
def pfor_install_hints():
    {hints}
"""


@pytest.fixture
def pack(tmp_path, monkeypatch):
    """``pack(name, api, hints_body)`` writes an installed distribution whose hook module
    is ``<name>_hooks``; returns a registry loaded with it (and the real packs)."""
    modules = []

    def make(name, *, api=pf.CONVERTER_API_VERSION, hints="return {}"):
        module = name.replace("-", "_") + "_hooks"
        info = tmp_path / f"{name.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[pfor.converters]\nfake = {module}\n")
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(HOOKS.format(
            api=api, module=module, hints=hints)))
        modules.append(module)
        registry = Registry()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            registry.packs = plugins.load_packs(registry)
        return registry, module

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("PFOR_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("PFOR_PLUGINS", raising=False)
    yield make
    for module in modules:
        sys.modules.pop(module, None)


def _fake_quant(i):  # no first-party converter
    return tf.quantization.fake_quant_with_min_max_args(tf.cast(i, tf.float32))


def test_a_refused_packs_hint_names_it_and_why(pack, monkeypatch):
    registry, _ = pack("dawsonpack", api=99,
                       hints='return {"FakeQuantWithMinMaxArgs": "pip install -U dawsonpack"}')
    assert {p.name: p.status for p in registry.packs}["dawsonpack"] == "refused"
    monkeypatch.setattr(plugins, "_DEFAULT", [registry])
    with pytest.raises(pf.ConversionError,
                       match=r"dawsonpack covers it, not loaded: refused: .*converter API 99"
                             r".*\(pip install -U dawsonpack\)"):
        pf.pfor(_fake_quant, 3, fallback="error")
    with pytest.warns(pf.FallbackWarning, match="pip install -U dawsonpack"):
        pf.pfor(_fake_quant, 3, fallback="warn")


def test_library_modules_are_kept_from_autograph_and_from_messages(pack, tmp_path):
    registry, module = pack("libpack")
    assert module in registry.library_modules
    rules = [r for r in config.CONVERSION_RULES if getattr(r, "_prefix", None) == module]
    assert rules and rules[0].get_action(sys.modules[module]).name == "DO_NOT_CONVERT"
    dirs = messages.library_dirs(registry.library_modules)
    assert not any(str(tmp_path) in d for d in dirs)  # a module file, not a package
    assert messages.is_library_file(plugins.__file__, dirs)


def test_a_broken_hint_hook_costs_only_the_hints(pack):
    registry, _ = pack("brokenhints", hints='raise RuntimeError("no hints today")')
    assert {p.name: p.status for p in registry.packs}["brokenhints"] == "loaded"
    assert not any(p == "brokenhints" for hints in registry.hints.values() for p, _ in hints)


def test_first_party_packs_declare_their_modules_and_hints():
    registry = pf.default_registry()
    assert set(FIRST_PARTY.values()) <= registry.library_modules
    for dist in FIRST_PARTY:
        ours = {e.op_type for e in registry.entries() if e.pack == dist}
        hinted = {op for op, hints in registry.hints.items() if any(p == dist for p, _ in hints)}
        assert ours and ours == hinted, dist


def test_no_converter_for_these_inputs_names_the_patterns_there_are():
    x = tf.ones([3, 4])

    def body(i):  # a per-iteration reduction axis: Sum is converted for "SU" only
        return tf.reduce_sum(tf.gather(x, i), axis=tf.math.floormod(i, 1))

    with pytest.raises(pf.ConversionError, match=r"converters for Sum take inputs .*SU "
                                                 r"\(pfor-converters-math\), none these \(SS"):
        pf.pfor(body, 3, fallback="error")


def test_each_distribution_states_one_version():
    # Read from the sources, not the installed metadata: an editable install keeps the
    # version it was installed with until it is reinstalled.
    root = pathlib.Path(__file__).resolve().parents[1]
    dists = {"pfor-core": ("pfor_core", root)} | {
        dist: (module, root / module) for dist, module in FIRST_PARTY.items()}
    for dist, (module, folder) in dists.items():
        stated = tomllib.loads((folder / "pyproject.toml").read_text())["project"]["version"]
        assert importlib.import_module(module).__version__ == stated, (
            f"{dist}: {module}.__version__ differs from its pyproject.toml ({stated})")
    conf = (root / "docs" / "conf.py").read_text()
    assert f'release = "{pf.__version__}"' in conf, "docs/conf.py release differs from pfor-core"
