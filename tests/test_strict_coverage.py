"""The registry-wide meta-test: every converter a first-party pack registers is exercised,
for every input pattern it declares, by at least one strict-mode (``fallback="error"``)
test of the suite.

conftest.py records, in every test process, which registrations took an op under
``fallback="error"`` and, when the whole suite ran (``pytest`` with no test paths,
``-k`` or ``-m``), fails the run listing each registration of ``FIRST_PARTY`` packs that
no such test reached, unless it is a known gap below. The tests here check the check.
"""

import pfor_core as pf

FIRST_PARTY = ("pfor-controlflow", "pfor-converters-math", "pfor-converters-nn",
               "pfor-converters-state")

# (pack, converter, input pattern): registrations no strict-mode test reaches, and why.
# Keep it short: a gap is a test to write.
KNOWN_GAPS = {
    ("pfor-converters-math", "pfor_converters_math.fill.convert_fill_invariant_value", "SU"):
        "Fill with per-iteration dims and an invariant value is converted only when the "
        "body's shape inference proves the dims static, which no body found so far makes "
        "it do (a stacked dims tensor is never a constant or a shape)",
}


def registrations(registry=None) -> set[tuple]:
    """Every (pack, converter, pattern) a first-party pack registered."""
    registry = pf.default_registry() if registry is None else registry
    return {(e.pack, e.name, e.inputs or "*...") for e in registry.entries()
            if e.pack in FIRST_PARTY}


def gaps(seen, registry=None) -> list[tuple]:
    """The registrations ``seen`` lacks, known gaps aside."""
    return sorted(registrations(registry) - set(seen) - set(KNOWN_GAPS))


def test_a_registration_no_strict_test_reached_is_a_gap():
    every = registrations()
    assert every, "no first-party converters registered"
    missing = sorted(every)[0]
    assert missing in gaps(every - {missing}) or missing in KNOWN_GAPS
    assert not gaps(every)


def test_known_gaps_are_real_registrations():
    stale = sorted(set(KNOWN_GAPS) - registrations())
    assert not stale, f"KNOWN_GAPS lists registrations that no longer exist: {stale}"
    assert all(reason.strip() for reason in KNOWN_GAPS.values())


def test_strict_conversions_are_recorded(pytestconfig):
    recorder = pytestconfig.pluginmanager.get_plugin("pfor-strict-patterns")
    assert recorder is not None
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    x = tf.ones([3, 2])
    pf.pfor(lambda i: tf.exp(tf.gather(x, i)), 3, fallback="error")
    bare = {(pack, name.rsplit(".", 1)[-1], inputs) for pack, name, inputs in recorder.seen}
    assert ("pfor-converters-math", "elementwise", "S") in bare
    assert ("pfor-converters-math", "convert_gather_invariant_params", "USU") in bare
