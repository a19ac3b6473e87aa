"""Shared test set-up: quiet TensorFlow, deterministic hypothesis profile."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# The memory tests (and parallel_iterations="auto" where shapes are not static) read the
# CPU allocator's statistics, which only a BFC allocator keeps: oneDNN's is one, plain
# TensorFlow's default CPU allocator (a CPU oneDNN does not serve) is not.
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

from hypothesis import HealthCheck, settings  # noqa: E402

# Derandomized so CI is repeatable; few examples per test so the suite stays within
# ~10 minutes on 2 cores (each example builds and runs TensorFlow graphs).
settings.register_profile(
    "pfor", max_examples=25, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture])
# A longer, randomized run for hunting bugs: PFOR_HYPOTHESIS_PROFILE=thorough.
settings.register_profile(
    "thorough", max_examples=200, deadline=None, derandomize=False, print_blob=True,
    suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("PFOR_HYPOTHESIS_PROFILE", "pfor"))

# pytest's importlib mode imports a test file's parent folders as packages; for
# pfor_converters_math/tests (and the other packs' tests) that would shadow the installed
# pack with its project folder, which has no __init__.py, so the pack would fail to load.
# Importing the pack packages first keeps the real ones in sys.modules.
import importlib  # noqa: E402

for _pack in ("pfor_converters_math", "pfor_converters_nn", "pfor_converters_state",
              "pfor_controlflow"):
    try:
        importlib.import_module(_pack)
    except ImportError:
        pass


import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402


# Grappler off by default: it rewrites every function a test instantiates (about a tenth
# of the suite's time) and the checks compare pfor's graph as emitted with the loop. Tests
# marked ``grappler`` (the differential fuzzer, the real models, the XLA loop tests) run
# optimized, as users do; the benchmarks run in subprocesses with TensorFlow's defaults.
# The option travels with each function call (its config_proto), so it can change per test.
@pytest.fixture(autouse=True)
def _grappler(request):
    on = request.node.get_closest_marker("grappler") is not None
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": not on})
    yield


@pytest.fixture
def case_modes(request):
    """The mode(s) a parametrized case runs pfor in (``testing.case_modes``): its
    function's cases take ``testing.RUN_MODES`` in turn."""
    from pfor_core import testing  # pylint: disable=import-outside-toplevel

    return testing.case_modes(request.node)


# -- The registry-wide meta-test ----------------------------------------------------------
# Every converter a first-party pack registers must be exercised, for every input pattern
# it declares, by at least one strict-mode (fallback="error") conversion somewhere in the
# suite. Each process records the (pack, converter, pattern) registrations that took an
# op under fallback="error", or refused it with a ConversionError (declining is not
# converting: a narrow or view converter counts only where it converts); xdist workers hand their records to the controller, which
# checks them when the whole suite ran (tests/test_strict_coverage.py holds the check and
# the short list of known gaps).
import json  # noqa: E402
import pathlib  # noqa: E402


_STRICT_KEY = "pfor_strict_patterns"


class StrictPatterns:
    """Records which registrations converted ops under fallback="error"."""

    def __init__(self):
        self.seen: set[tuple] = set()
        self.installed = False

    def install(self) -> None:
        from pfor_core import walk  # pylint: disable=import-outside-toplevel
        from pfor_core.errors import ConversionError  # pylint: disable=import-outside-toplevel

        original = walk.Conversion._try  # pylint: disable=protected-access
        seen = self.seen

        def _try(conversion, entry, *args, **kwargs):
            strict = conversion.options.fallback == "error" and not conversion.trial
            key = (entry.pack, entry.name, entry.inputs or "*...")
            try:
                result = original(conversion, entry, *args, **kwargs)
            except ConversionError:
                if strict:  # a deliberate refusal (the body cannot be vectorized)
                    seen.add(key)
                raise
            if strict and result is not None:  # converted (a decline is not coverage)
                seen.add(key)
            return result

        walk.Conversion._try = _try  # pylint: disable=protected-access

    def pytest_runtest_setup(self, item):  # pylint: disable=unused-argument
        # Installed with the first test, whose output is captured: importing TensorFlow
        # earlier prints its start-up logs to the terminal.
        if not self.installed:
            self.install()
            self.installed = True

    # Worker side: hand the records to the controller.
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session):
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[_STRICT_KEY] = json.dumps(sorted(self.seen))
            return
        self._check(session)

    # Controller side (xdist; optional, so `-p no:xdist` runs too).
    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):  # pylint: disable=unused-argument
        data = getattr(node, "workeroutput", {}).get(_STRICT_KEY)
        if data:
            self.seen.update(tuple(x) for x in json.loads(data))

    def _check(self, session):
        out = os.environ.get("PFOR_STRICT_PATTERNS_OUT")  # to inspect a partial run's records
        if out:
            pathlib.Path(out).write_text(json.dumps(sorted(self.seen)), encoding="utf-8")
        config = session.config
        whole = (config.args_source == pytest.Config.ArgsSource.TESTPATHS
                 and not config.option.keyword and not config.option.markexpr
                 and not getattr(config.option, "deselect", None)
                 and not getattr(config.option, "lf", False))
        if not whole or session.shouldfail or session.shouldstop:
            return
        check = _load_strict_check()
        self.gaps = check.gaps(self.seen)
        if self.gaps:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        gaps = getattr(self, "gaps", None)
        if gaps:
            terminalreporter.section("converters never exercised under fallback='error'",
                                     red=True)
            for gap in gaps:
                terminalreporter.line(f"{gap[0]}: {gap[1]} for inputs {gap[2]}")
            terminalreporter.line(
                "Add a strict-mode test for each (pfor_core.testing), or list it in "
                "KNOWN_GAPS in tests/test_strict_coverage.py with the reason.")


def _load_strict_check():
    import importlib.util  # pylint: disable=import-outside-toplevel

    path = pathlib.Path(__file__).parent / "tests" / "test_strict_coverage.py"
    spec = importlib.util.spec_from_file_location("_pfor_strict_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pytest_configure(config):
    config.pluginmanager.register(StrictPatterns(), "pfor-strict-patterns")
