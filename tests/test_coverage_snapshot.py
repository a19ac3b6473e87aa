"""Coverage only grows: every (op type, input pattern) that ``pfor ops --patterns``
listed at version 0.6 is still listed. Moving converters between modules, merging
them or renaming them must not drop a case; adding cases is fine."""

import json
import pathlib

import pfor_core as pf
from pfor_core import coverage

BASELINE = pathlib.Path(__file__).parent / "data" / "coverage_0.6.json"


def test_every_pattern_listed_at_0_6_is_still_listed():
    rows = coverage.pattern_rows(pf.default_registry())
    now = {f"{r['op_type']}|{r['inputs'] if r['inputs'] is not None else 'any'}" for r in rows}
    before = set(json.loads(BASELINE.read_text(encoding="utf-8")))
    lost = sorted(before - now)
    assert not lost, f"{len(lost)} (op type, pattern) cases are no longer listed: {lost[:20]}"
