"""Shared test set-up: quiet TensorFlow, deterministic hypothesis profile."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from hypothesis import HealthCheck, settings  # noqa: E402

# Derandomized so CI is repeatable; few examples per test so the suite stays within
# ~10 minutes on 2 cores (each example builds and runs TensorFlow graphs).
settings.register_profile(
    "pfor", max_examples=40, deadline=None, derandomize=True, print_blob=True,
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
