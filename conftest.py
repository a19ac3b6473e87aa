"""Shared test set-up: quiet TensorFlow, deterministic hypothesis profile."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from hypothesis import HealthCheck, settings  # noqa: E402

# Derandomized so CI is repeatable; few examples per test so the suite stays within
# ~10 minutes on 2 cores (each example builds and runs TensorFlow graphs).
settings.register_profile(
    "pfor", max_examples=15, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("PFOR_HYPOTHESIS_PROFILE", "pfor"))
