"""The host lists this pack: `pfor packs` shows it loaded, with its version and API, and
every converter it registered is recorded under its name."""

from pfor_core import testing

import pfor_converters_nn


def test_pack_is_listed_and_its_converters_are_recorded():
    testing.assert_pack_listed("pfor-converters-nn", pfor_converters_nn)
