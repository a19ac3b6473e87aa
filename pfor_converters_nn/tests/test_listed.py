"""The host lists this pack: `pfor packs` shows it loaded, with its version and API."""

import json

from pfor_core import cli, testing

import pfor_converters_nn

DIST = "pfor-converters-nn"


def test_pack_is_listed_as_loaded(capsys):
    assert cli.main(["packs", "--json"]) == 0
    info = {p["name"]: p for p in json.loads(capsys.readouterr().out)}[DIST]
    assert info["status"] == "loaded", info["reason"]
    assert info["entry_point"].endswith("= pfor_converters_nn.plugin")


def test_pack_and_its_converters_are_recorded():
    testing.assert_pack_listed(DIST, pfor_converters_nn)
