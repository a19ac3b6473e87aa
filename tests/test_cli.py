"""The ``pfor`` command line: ``pfor packs`` and ``pfor ops``."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

import pfor_core as pf
from pfor_core import cli
from pfor_core.registry import IN_PROCESS

PACKS = ("pfor-controlflow", "pfor-converters-math", "pfor-converters-nn",
         "pfor-converters-state")


def run(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def run_json(capsys, *argv):
    return json.loads(run(capsys, *argv, "--json"))


def test_packs_table_lists_the_four_packs_as_loaded(capsys):
    lines = run(capsys, "packs").splitlines()
    assert lines[0].split()[:4] == ["pack", "version", "api", "status"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    for name in PACKS:
        info = {p.name: p for p in pf.default_registry().packs}[name]
        assert rows[name][1:5] == [info.version, str(pf.CONVERTER_API_VERSION), "loaded",
                                   str(info.converters)]


def test_packs_json(capsys):
    packs = {p["name"]: p for p in run_json(capsys, "packs")}
    for name in PACKS:
        assert packs[name]["status"] == "loaded"
        assert packs[name]["api_version"] == pf.CONVERTER_API_VERSION
        assert packs[name]["reason"] == ""


def test_console_script_lists_packs():
    script = pathlib.Path(sys.executable).with_name("pfor")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "pfor_core.cli"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("PFOR_DISABLE_PLUGIN_AUTOLOAD", None)
    done = subprocess.run(command + ["packs"], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    status = {line.split()[0]: line.split()[3] for line in done.stdout.splitlines()[2:]}
    assert all(status[name] == "loaded" for name in PACKS), done.stdout


def test_ops_json_lists_gather_from_math(capsys):
    rows = {r["op_type"]: r for r in run_json(capsys, "ops")}
    assert list(rows) == sorted(rows)
    gather = rows["GatherV2"]
    assert gather["pack"] == "pfor-converters-math"
    assert gather["version"] == pf.default_registry().winner("GatherV2").version
    statuses = {e["status"]: e["pack"] for e in gather["entries"]}
    assert gather["converter"] and statuses["winner"] == "pfor-converters-math"
    # The control-flow pack's row-view reader goes first but owns only its own views.
    assert statuses["narrow"] == "pfor-controlflow"
    assert set(rows) == set(pf.default_registry().op_types())


def test_ops_table_and_pack_filter(capsys):
    table = run(capsys, "ops")
    assert any(line.split()[:2] == ["GatherV2", "pfor-converters-math"]
               for line in table.splitlines())
    # Distribution names match with '-' and '_' alike.
    rows = run_json(capsys, "ops", "--pack", "pfor_converters_math")
    assert "GatherV2" in {r["op_type"] for r in rows}
    assert {e["pack"] for r in rows for e in r["entries"]} == {"pfor-converters-math"}
    assert cli.main(["ops", "--pack", "no-such-pack"]) == 1
    assert "no-such-pack" in capsys.readouterr().err


@pytest.fixture
def override_gather():
    """An in-process GatherV2 converter that beats every pack's (then removed)."""
    def mine(ctx):
        return ctx.decline("listing test only")

    top = max(e.priority for e in pf.default_registry().entries("GatherV2"))
    pf.register_converter("GatherV2", priority=top + 1)(mine)
    yield mine
    pf.default_registry().remove("GatherV2", mine)


def test_ops_shows_winner_and_shadowed(capsys, override_gather):
    gather = {r["op_type"]: r for r in run_json(capsys, "ops")}["GatherV2"]
    assert (gather["pack"], gather["converter"]) == (
        IN_PROCESS, f"{override_gather.__module__}.{override_gather.__qualname__}")
    statuses = {e["pack"]: e["status"] for e in gather["entries"]}
    assert statuses[IN_PROCESS] == "winner"
    # inputs=None accepts every pattern, so the math pack's entries are shadowed.
    assert statuses["pfor-converters-math"] == "shadowed"
    table = run(capsys, "ops", "--pack", "pfor-converters-math")
    assert any(line.startswith("GatherV2") and line.split()[-1] == "shadowed"
               for line in table.splitlines())


def test_alternative_is_not_shadowed():
    from pfor_core.registry import ConverterEntry

    def entry(inputs):
        return ConverterEntry(op_type="Op", fn=len, inputs=inputs, priority=0, pack="p",
                              version="", seq=0)

    assert cli._describe(entry("SU"), [entry("S*")])["status"] == "shadowed"
    assert cli._describe(entry("S*"), [entry("SU")])["status"] == "alternative"
    assert cli._describe(entry("SSSSSSSS"), [entry("SU")])["status"] == "alternative"
    assert cli._describe(entry("SS..."), [entry("S...")])["status"] == "shadowed"


def test_missing_lists_tf_ops_a_pack_does_not_convert(capsys):
    pack = "pfor-converters-nn"
    missing = run_json(capsys, "ops", "--missing", "--pack", pack)
    ours = {e.op_type for e in pf.default_registry().entries() if e.pack == pack}
    assert missing and missing == sorted(missing)
    assert not set(missing) & ours
    assert set(missing) <= set(cli.tensorflow_op_types())
    assert "Identity" not in missing  # the walk passes identity-like ops through itself
    text = run(capsys, "ops", "--missing", "--pack", pack)
    assert text.split() == missing


def test_every_op_tensorflow_vectorizes_has_a_converter(capsys):
    assert run_json(capsys, "ops", "--missing") == []
    assert run(capsys, "ops", "--missing") == ""
    # Names TensorFlow's vectorizer registers but no op has are not listed at all.
    assert "LogicalXor" not in cli.tensorflow_op_types()
    assert "LogicalAnd" in cli.tensorflow_op_types()


def test_no_command_prints_help(capsys):
    assert cli.main([]) == 2
    assert "packs" in capsys.readouterr().out


def _bare(name: str) -> str:
    """A converter's name without its module (``pkg.module.convert_x`` -> ``convert_x``)."""
    return name.rsplit(".", 1)[-1]


def test_ops_patterns_lists_who_converts_which_inputs(capsys):
    assert cli.main(["ops", "--patterns", "--json"]) == 0
    rows = {(r["op_type"], r["inputs"]): r for r in json.loads(capsys.readouterr().out)}
    # Names say where the converter lives: module-qualified.
    assert rows[("MatMul", "SU")]["converter"].startswith("pfor_converters_math.")
    matmul = {p: _bare(rows[("MatMul", p)]["converter"]) for p in ("SU", "US", "SS")}
    assert matmul == {"SU": "convert_matmul_stacked_invariant",
                      "US": "convert_matmul_invariant_stacked",
                      "SS": "convert_matmul_stacked_stacked"}
    assert ("MatMul", "UU") not in rows  # re-emitted unchanged, never dispatched
    assert rows[("Sum", "SS")]["converter"] == "fallback"  # a per-iteration axis
    # Narrow converters (views only) go first but do not own the pattern.
    sliced = rows[("StridedSlice", "SUUU")]
    assert (_bare(sliced["converter"]), sliced["pack"]) == ("convert_strided_slice",
                                                     "pfor-converters-math")
    assert any("convert_item_slice" in c for c in sliced["narrow"])
    # Stateful ops are dispatched with all-invariant inputs too.
    assert _bare(rows[("RandomUniform", "U")]["converter"]) == "convert_shaped"
    assert rows[("RandomUniform", "S")]["converter"] == "fallback"


def test_ops_patterns_table_and_pack_filter(capsys):
    assert cli.main(["ops", "--patterns", "--pack", "pfor-converters-nn"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["op", "type", "inputs", "converter"]
    conv = [line.split() for line in lines if line.startswith("Conv2D ")]
    assert ["Conv2D", "SU", "convert_conv_folded", "pfor-converters-nn"] in [
        [c[0], c[1], _bare(c[2]), c[3]] for c in conv]
    assert not any(line.startswith("MatMul ") for line in lines)
