"""The host lists this pack: `pfor packs` shows it loaded, with its version and API."""

import importlib.metadata
import json

import pfor_core as pf
from pfor_core import cli

import pfor_converters_state

DIST = "pfor-converters-state"


def test_pack_is_listed_as_loaded(capsys):
    assert cli.main(["packs", "--json"]) == 0
    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)}
    info = listed[DIST]
    assert info["status"] == "loaded", info["reason"]
    assert info["version"] == "0.1.0" == importlib.metadata.version(DIST)
    assert info["version"] == pfor_converters_state.__version__
    assert info["api_version"] == pf.CONVERTER_API_VERSION == 1
    assert info["entry_point"].endswith("= pfor_converters_state.plugin")


def test_listed_converters_are_recorded_under_the_pack():
    info = {p.name: p for p in pf.default_registry().packs}[DIST]
    entries = [e for e in pf.default_registry().entries() if e.pack == DIST]
    assert info.converters == len(entries)
    assert all(e.version == info.version for e in entries)
