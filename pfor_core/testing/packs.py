"""A pack's own test that the host lists it: loaded, with its version and converter-API
version, every converter recorded under its name, and its op types shown by ``pfor ops``."""

from __future__ import annotations

import importlib.metadata
import io
import json
from contextlib import redirect_stdout


def _cli_json(args) -> object:
    from pfor_core import cli  # pylint: disable=import-outside-toplevel

    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(args + ["--json"])
    assert code == 0, f"pfor {' '.join(args)} exited with {code}"
    return json.loads(out.getvalue())


def assert_pack_listed(dist: str, module, *, op_types=()) -> None:
    """Assert the host lists the pack ``dist`` (its top-level ``module``) as loaded:
    ``pfor packs`` shows it with its version and this core's converter-API version and
    an entry point into ``module``; every converter it registered is recorded under its
    name and version; ``pfor ops`` names it as the owner of each of ``op_types``."""
    from pfor_core import plugins  # pylint: disable=import-outside-toplevel

    registry = plugins.default_registry()
    info = {p.name: p for p in registry.packs}.get(dist)
    assert info is not None, f"{dist} is not installed as a pfor.converters entry point"
    assert info.status == "loaded", f"{dist}: {info.status}: {info.reason}"
    assert info.version == importlib.metadata.version(dist) == module.__version__
    assert info.api_version == plugins.CONVERTER_API_VERSION
    entries = [e for e in registry.entries() if e.pack == dist]
    assert info.converters == len(entries)
    assert all(e.version == info.version for e in entries)
    listed = {p["name"]: p for p in _cli_json(["packs"])}[dist]
    assert listed["status"] == "loaded", listed["reason"]
    assert listed["entry_point"].split("=")[-1].strip().startswith(module.__name__ + "."), listed
    if op_types:
        rows = {row["op_type"]: row for row in _cli_json(["ops", "--pack", dist])}
        missing = sorted(set(op_types) - set(rows))
        assert not missing, f"pfor ops --pack {dist} does not list {missing}"
        others = sorted(t for t in op_types if rows[t]["pack"] != dist)
        assert not others, f"pfor ops names another owner than {dist} for {others}"
