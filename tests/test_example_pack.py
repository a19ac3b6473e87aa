"""The example third-party pack (examples/pfor_converters_example) works as a published
pack: installed into a temporary directory (never into the shared venv), pfor finds it
through its entry point, lists it and its ops, vectorizes with them (its higher priority
overrides the math pack's converters of the same ops), and its own tests pass."""

import os
import shutil
import pathlib
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

import pfor_core as pf

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACK = ROOT / "examples" / "pfor_converters_example"

CHECK = textwrap.dedent("""
    import contextlib, io, json
    import tensorflow as tf
    import pfor_core as pf
    from pfor_core.cli import main

    def pfor_cli(*argv):  # the command, in this process (one TensorFlow start-up)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(list(argv)) == 0, argv
        return out.getvalue()

    packs = pfor_cli("packs")
    assert "example" in packs, packs
    ops = pfor_cli("ops", "--json")
    dawsn = [row for row in json.loads(ops) if row["op_type"] == "Dawsn"][0]
    assert (dawsn["pack"], dawsn["converter"], dawsn["priority"]) == (
        "pfor-converters-example", "pfor_converters_example.special.convert_dawsn", 10), dawsn
    assert ("pfor-converters-math", "shadowed") in {
        (e["pack"], e["status"]) for e in dawsn["entries"]}, dawsn
    patterns = pfor_cli("ops", "--patterns", "--pack", "pfor-converters-example")
    rows = {(*line.split()[:2], line.split()[2].rsplit(".", 1)[-1])
            for line in patterns.splitlines() if len(line.split()) > 2}
    assert {("Gather", "US", "convert_gather_invariant_params"),
            ("Gather", "SU", "convert_gather_stacked_params"),
            ("Gather", "SS", "convert_gather_stacked_both"), ("Dawsn", "S", "convert_dawsn")} <= rows, patterns
    x = tf.random.normal([4, 3])
    y = pf.pfor(lambda i: tf.math.special.dawsn(tf.gather(x, i)), 4, fallback="error")
    tf.debugging.assert_near(y, tf.math.special.dawsn(x))
    rows = pf.pfor(lambda i: tf.raw_ops.Gather(params=x, indices=[i, 0]), 4, fallback="error")
    tf.debugging.assert_near(rows[:, 0], x)
    print("OK")
""")


def _dawsn_rows(i):
    return tf.math.special.dawsn(tf.gather(tf.reshape(tf.range(12.0), [4, 3]), i))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    target = tmp_path_factory.mktemp("example_pack")
    source = tmp_path_factory.mktemp("example_src") / "pack"  # the build leaves files beside the source
    shutil.copytree(PACK, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--target", str(target), str(source)],
                   check=True, capture_output=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")]),
               TF_CPP_MIN_LOG_LEVEL="3")
    return env


def test_pack_is_found_listed_and_used(installed):
    run = subprocess.run([sys.executable, "-c", CHECK], env=installed, capture_output=True, text=True)
    assert run.returncode == 0 and "OK" in run.stdout, run.stdout + run.stderr


def test_pack_own_tests_pass(installed):
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(PACK / "tests")], env=installed, capture_output=True, text=True,
                         cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


def test_without_the_pack_the_math_pack_converts_its_ops():
    rows = [r for r in pf.explain(_dawsn_rows, 4).rows if r.op_type == "Dawsn"]
    assert [(r.how, r.pack) for r in rows] == [("converter", "pfor-converters-math")], rows
