"""The registry: invariance patterns, argument checks, dispatch order, provenance."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core.registry import IN_PROCESS, PackRegistrar, Registry, pattern_matches


def convert(ctx):
    return ctx.decline("test converter")


def other(ctx):
    return ctx.decline("another test converter")


def reference(spec, pattern):
    """The documented meaning of a spec, as a regular expression: one letter per input,
    '*' for either, a trailing '...' repeating the last letter (zero or more times)."""
    if spec is None:
        return True
    body, repeat = (spec[:-3], True) if spec.endswith("...") else (spec, False)
    if repeat and not body:
        return True
    parts = ["[SU]" if c == "*" else c for c in body]
    if repeat:
        parts[-1] += "*"
    return re.fullmatch("".join(parts), pattern) is not None


@pytest.mark.parametrize("spec, pattern", [
    (None, ""), (None, "SUS"), ("", ""), ("", "S"), ("S", ""), ("SU", "SU"), ("SU", "US"),
    ("S*", "SU"), ("S*", "SS"), ("S*", "US"), ("S*", "S"), ("S...", "S"), ("S...", "SSS"),
    ("S...", "SSU"), ("S...", ""), ("SU...", "S"), ("SU...", "SUUU"), ("SU...", "SUS"),
    ("*...", "USU"), ("*...", ""), ("...", ""), ("...", "SUS"), ("U*S", "UUS"),
    ("U*S", "USU"), ("**U", "USU"), ("**U", "USS"),
])
def test_pattern_matches_examples(spec, pattern):
    assert pattern_matches(spec, pattern) == reference(spec, pattern)


@given(st.text("SU*", max_size=4), st.booleans(), st.text("SU", max_size=6))
def test_pattern_matches_property(head, repeat, pattern):
    spec = head + ("..." if repeat else "")
    assert pattern_matches(spec, pattern) == reference(spec, pattern)
    # A fixed-length spec only ever matches patterns of its own length.
    if not repeat and pattern_matches(spec, pattern):
        assert len(pattern) == len(spec)


def test_documented_examples():
    assert pattern_matches("SU", "SU") and not pattern_matches("SU", "SS")
    assert all(pattern_matches("S...", "S" * k) for k in range(1, 5))
    assert pattern_matches("*", "S") and pattern_matches("*", "U")


@pytest.mark.parametrize("bad", ["SX", "s", "S..S", "S....", "..S", "S.", "SU ", 3, b"SU"])
def test_invalid_pattern_raises_value_error_naming_inputs(bad):
    with pytest.raises(ValueError, match=r"inputs="):
        Registry().add("Exp", convert, inputs=bad)
    registry = Registry()
    with pytest.raises(ValueError, match=r"inputs="):
        PackRegistrar(registry, "somepack", "1.0").add("Exp", convert, inputs=bad)
    assert registry.op_types() == []


def test_register_converter_decorator_rejects_bad_pattern():
    before = len(pf.default_registry().entries("Exp"))
    with pytest.raises(ValueError, match=r"inputs='SQ'"):
        pf.register_converter("Exp", inputs="SQ")(convert)
    assert len(pf.default_registry().entries("Exp")) == before


@pytest.mark.parametrize("fn", [3, None, "convert", [convert]])
def test_non_callable_converter_raises_type_error(fn):
    registry = Registry()
    with pytest.raises(TypeError, match="callable"):
        registry.add("Exp", fn)
    with pytest.raises(TypeError, match="callable"):
        PackRegistrar(registry, "somepack", "1.0").add("Exp", fn)
    with pytest.raises(TypeError, match="callable"):
        pf.register_converter("Exp")(fn)
    assert registry.op_types() == []


@pytest.mark.parametrize("op_type", ["", None, 3])
def test_bad_op_type_raises_type_error(op_type):
    with pytest.raises(TypeError, match="op_type"):
        Registry().add([op_type], convert)


@pytest.mark.parametrize("priority", [1.5, "high", None])
def test_bad_priority_raises_type_error(priority):
    with pytest.raises(TypeError, match="priority"):
        Registry().add("Exp", convert, priority=priority)


def test_dispatch_order_priority_then_specificity_then_latest():
    registry = Registry()
    registry.add("Op", convert, inputs="S*")            # seq 0, specificity 1
    registry.add("Op", other, inputs="**")              # seq 1, specificity 0
    registry.add("Op", convert, inputs="SU")            # seq 2, specificity 2
    registry.add("Op", other, inputs=None, priority=1)  # seq 3, highest priority
    order = [(e.inputs, e.priority) for e in registry.candidates("Op", "SU")]
    assert order == [(None, 1), ("SU", 0), ("S*", 0), ("**", 0)]
    assert [e.inputs for e in registry.candidates("Op", "US")] == [None, "**"]
    assert registry.winner("Op").inputs is None
    assert registry.candidates("Other", "S") == ()


def test_cache_is_invalidated_by_add_and_remove():
    registry = Registry()
    registry.add("Op", convert, inputs="S")
    assert [e.fn for e in registry.candidates("Op", "S")] == [convert]
    registry.add("Op", other, inputs="S")
    assert [e.fn for e in registry.candidates("Op", "S")] == [other, convert]
    registry.remove("Op", other)
    assert [e.fn for e in registry.candidates("Op", "S")] == [convert]
    registry.remove("Op", convert)
    assert registry.candidates("Op", "S") == () and registry.op_types() == []


def test_provenance_and_remove_pack():
    registry = Registry()
    registrar = PackRegistrar(registry, "pack-a", "2.0.1")
    registrar.add(["Exp", "Log"], convert, inputs="S")
    registrar.batch_polymorphic("MatrixInverse")
    registry.add("Exp", other, inputs="S")  # as specific and later: tried first
    assert registrar.count == 3
    assert {(e.op_type, e.pack, e.version) for e in registry.entries() if e.fn is convert} == {
        ("Exp", "pack-a", "2.0.1"), ("Log", "pack-a", "2.0.1")}
    assert registry.winner("Exp").pack == IN_PROCESS
    assert registry.entries("Exp")[0].name == f"{__name__}.{other.__qualname__}"
    registry.remove_pack("pack-a")
    assert registry.op_types() == ["Exp"]
    assert [e.pack for e in registry.entries("Exp")] == [IN_PROCESS]
