"""The plugin machinery: entry-point discovery, guarded loading, priorities, the allowlist.

Fake packs are real distributions written into ``tmp_path`` (a ``.dist-info`` folder
with METADATA and entry_points.txt, plus the hook module) and found through
``importlib.metadata`` exactly as installed packs are. Tests that run ``pf.pfor`` on a
registry of their own swap it in for the process-wide one and put the original back.
"""

import inspect
import sys
import textwrap
import warnings

import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import hookspecs, plugins, testing
from pfor_core.registry import IN_PROCESS, Registry

REAL_PACKS = ("pfor-controlflow", "pfor-converters-math", "pfor-converters-nn",
              "pfor-converters-state")

HOOKS_OK = """
import pfor_core as pf

@pf.hookimpl
def pfor_converter_api_version():
    return {api}

@pf.hookimpl
def pfor_register_converters(registry):
    {register}
"""


@pytest.fixture
def fake_dist(tmp_path, monkeypatch):
    """``make(name, source)`` writes a distribution ``name`` 1.2.3 whose entry point is a
    module holding ``source``; the folder is put on sys.path, the modules dropped after."""
    modules = []

    def make(name, source, version="1.2.3"):
        module = name.replace("-", "_") + "_hooks"
        info = tmp_path / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[pfor.converters]\nfake = {module}\n")
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
        modules.append(module)
        return module

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("PFOR_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("PFOR_PLUGINS", raising=False)
    yield make
    for module in modules:
        sys.modules.pop(module, None)


@pytest.fixture
def use_registry(monkeypatch):
    """Make ``registry`` the one ``pf.pfor`` uses, for this test only."""
    def use(registry):
        monkeypatch.setattr(plugins, "_DEFAULT", [registry])
        return registry

    return use


def load(**env):
    """Load packs into a new registry, without warnings escaping the test."""
    registry = Registry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry.packs = plugins.load_packs(registry)
    return registry, caught


def by_name(registry):
    return {p.name: p for p in registry.packs}


def square(i):
    return tf.math.square(i)


def test_entry_point_discovery_end_to_end(fake_dist):
    fake_dist("fakepack", HOOKS_OK.format(
        api=pf.CONVERTER_API_VERSION,
        register='registry.add("FakePackOp", lambda ctx: ctx.decline("fake"), inputs="S")'))
    registry, _ = load()
    info = by_name(registry)["fakepack"]
    assert (info.status, info.version, info.api_version, info.converters) == (
        "loaded", "1.2.3", pf.CONVERTER_API_VERSION, 1)
    assert info.entry_point == "fake = fakepack_hooks"
    (entry,) = registry.entries("FakePackOp")
    assert (entry.pack, entry.version, entry.inputs) == ("fakepack", "1.2.3", "S")
    assert all(by_name(registry)[name].status == "loaded" for name in REAL_PACKS)


def test_pack_that_fails_to_import_is_isolated(fake_dist, use_registry):
    fake_dist("brokenpack", """
        import pfor_core as pf
        raise ImportError("no such native library")
    """)
    with pytest.warns(RuntimeWarning, match="brokenpack.*import failed.*no such native"):
        registry = Registry()
        registry.packs = plugins.load_packs(registry)
    info = by_name(registry)["brokenpack"]
    assert info.status == "failed" and "ImportError" in info.reason
    assert all(by_name(registry)[name].status == "loaded" for name in REAL_PACKS)
    assert not [e for e in registry.entries() if e.pack == "brokenpack"]
    use_registry(registry)
    out = pf.pfor(square, 4, fallback="loop")
    testing.assert_allclose(out, testing.sequential(square, 4))


@pytest.mark.parametrize("api, expect", [(99, "written for converter API 99"),
                                         (None, "declares no converter-API version")])
def test_incompatible_or_undeclared_api_version_is_refused(fake_dist, api, expect):
    register = 'registry.add("FakePackOp", lambda ctx: None)'
    source = HOOKS_OK.format(api=api, register=register)
    if api is None:  # no version hook at all
        source = source.replace("@pf.hookimpl\ndef pfor_converter_api_version():\n"
                                "    return None\n", "")
        assert "pfor_converter_api_version" not in source
    fake_dist("oldpack", source)
    with pytest.warns(RuntimeWarning, match="oldpack"):
        registry = Registry()
        registry.packs = plugins.load_packs(registry)
    info = by_name(registry)["oldpack"]
    assert info.status == "refused"
    assert expect in info.reason and "oldpack" in info.reason
    assert registry.entries("FakePackOp") == []


def test_register_hook_that_raises_leaves_nothing_behind(fake_dist):
    fake_dist("halfpack", HOOKS_OK.format(
        api=pf.CONVERTER_API_VERSION,
        register='registry.add(["HalfA", "HalfB"], lambda ctx: None); '
                 'raise KeyError("oops")'))
    with pytest.warns(RuntimeWarning, match="halfpack.*pfor_register_converters raised"):
        registry = Registry()
        registry.packs = plugins.load_packs(registry)
    assert by_name(registry)["halfpack"].status == "failed"
    assert registry.entries("HalfA") == registry.entries("HalfB") == []
    assert not [e for e in registry.entries() if e.pack == "halfpack"]


def test_converter_raising_at_conversion_falls_back(fake_dist, use_registry, monkeypatch):
    fake_dist("raisepack", HOOKS_OK.format(
        api=pf.CONVERTER_API_VERSION, register='registry.add("Square", convert_square)')
        + "\ndef convert_square(ctx):\n    raise ZeroDivisionError('bug in pack')\n")
    # Only this pack, so nothing else can take Square: the op must fall back.
    monkeypatch.setenv("PFOR_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PFOR_PLUGINS", "raisepack")
    registry, _ = load()
    assert by_name(registry)["raisepack"].status == "loaded"
    use_registry(registry)
    with pytest.warns(RuntimeWarning,
                      match="convert_square from raisepack 1.2.3 raised ZeroDivisionError"):
        out = pf.pfor(square, 4, fallback="loop")
    testing.assert_allclose(out, testing.sequential(square, 4))
    with pytest.warns(RuntimeWarning, match="raisepack"):
        report = pf.explain(square, 4)
    assert [r.how for r in report.rows if r.op_type == "Square"] == ["fallback"]
    with pytest.raises(pf.ConversionError, match="convert_square from raisepack"):
        pf.pfor(square, 4, fallback="error")


def _gather_axis0(calls):
    """A correct GatherV2 converter for invariant params, stacked indices, axis 0."""
    def convert(ctx):
        calls.append(ctx.pattern)
        axis = tf.get_static_value(ctx.inputs[2].tensor)
        if ctx.pattern != "USU" or axis != 0 or ctx.attr("batch_dims") != 0:
            return ctx.decline("only invariant params, stacked indices, axis 0")
        return pf.Stacked(tensor=ctx.emit(*(v.tensor for v in ctx.inputs))[0])

    return convert


PARAMS = tf.reshape(tf.range(12.0), [4, 3])


def gather_rows(i):
    return tf.gather(PARAMS, i)


def _gather_winner():
    rows = [r for r in pf.explain(gather_rows, 4).rows if r.op_type == "GatherV2"]
    assert len(rows) == 1
    return rows[0]


@pytest.fixture
def gather_converters():
    """Register in-process GatherV2 converters; removed afterwards."""
    added = []

    def add(fn, **kwargs):
        pf.register_converter("GatherV2", **kwargs)(fn)
        added.append(fn)
        return fn

    yield add
    for fn in added:
        pf.default_registry().remove("GatherV2", fn)


def _top_priority():
    return max([e.priority for e in pf.default_registry().entries("GatherV2")] + [0])


def test_higher_priority_wins(gather_converters):
    assert any(e.pack == "pfor-converters-math"
               for e in pf.default_registry().entries("GatherV2"))
    calls = []
    mine = gather_converters(_gather_axis0(calls), priority=_top_priority() + 10)
    out = pf.pfor(gather_rows, 4, fallback="error")
    testing.assert_allclose(out, testing.sequential(gather_rows, 4))
    assert calls == ["USU"]
    winner = _gather_winner()
    assert (winner.how, winner.converter, winner.pack) == ("converter", f"{__name__}.{mine.__qualname__}",
                                                           IN_PROCESS)


def test_equal_priority_later_registration_wins(gather_converters):
    top = _top_priority()
    first_calls, later_calls = [], []
    gather_converters(_gather_axis0(first_calls), inputs="USU", priority=top)
    later = gather_converters(_gather_axis0(later_calls), inputs="USU", priority=top)
    testing.assert_matches_loop(gather_rows, 4)
    assert later_calls and not first_calls
    assert _gather_winner().converter == f"{__name__}.{later.__qualname__}"


def test_exact_pattern_beats_wildcard_at_equal_priority(gather_converters):
    top = _top_priority()
    exact_calls, star_calls = [], []
    exact = gather_converters(_gather_axis0(exact_calls), inputs="USU", priority=top)
    gather_converters(_gather_axis0(star_calls), inputs="***", priority=top)  # later
    testing.assert_matches_loop(gather_rows, 4)
    assert exact_calls and not star_calls
    assert _gather_winner().converter == f"{__name__}.{exact.__qualname__}"


@pytest.mark.parametrize("allow", ["pfor-converters-math", "pfor_converters_math",
                                   " Pfor-Converters-Math ,"])
def test_autoload_disabled_loads_only_allowlisted(monkeypatch, allow):
    monkeypatch.setenv("PFOR_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PFOR_PLUGINS", allow)
    registry, caught = load()
    packs = by_name(registry)
    assert packs["pfor-converters-math"].status == "loaded"
    others = [name for name in REAL_PACKS if name != "pfor-converters-math"]
    assert all(packs[name].status == "disabled" for name in others)
    assert all("PFOR_DISABLE_PLUGIN_AUTOLOAD" in packs[name].reason for name in others)
    assert {e.pack for e in registry.entries()} <= {"pfor-converters-math"}
    assert not caught  # disabling is deliberate: no warning


def test_autoload_disabled_without_allowlist_loads_nothing(monkeypatch):
    monkeypatch.setenv("PFOR_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("PFOR_PLUGINS", raising=False)
    registry, _ = load()
    assert registry.packs and all(p.status == "disabled" for p in registry.packs)
    assert registry.op_types() == []


def test_every_hook_is_documented():
    hooks = [fn for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
             if hasattr(fn, f"{hookspecs.PROJECT}_spec")]
    assert {fn.__name__ for fn in hooks} >= {"pfor_converter_api_version",
                                             "pfor_register_converters"}
    assert inspect.getdoc(hookspecs)
    for fn in hooks:
        assert fn.__name__.startswith("pfor_"), fn.__name__
        doc = inspect.getdoc(fn)
        assert doc and len(doc.splitlines()[0]) > 10, f"{fn.__name__} has no docstring"
        for param in inspect.signature(fn).parameters:
            assert f":param {param}:" in doc, f"{fn.__name__} does not document {param}"
        if inspect.signature(fn).return_annotation not in (None, "None"):
            assert ":return:" in doc, f"{fn.__name__} does not document its result"
