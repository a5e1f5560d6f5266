"""The test profile, OPFORGE_TEST_PROFILE: "quick" (the default: the README's
test command and .ci/run) or "long" (.ci/long).

Quick keeps .ci/run inside its 20 minutes on two cores: the largest
hypothesis sweeps draw a quarter of their examples, and the sanitizer pass
skips the suites whose C++ the rest of that pass already runs (the README
pass still runs them). Long runs every suite at full size, the bad-input
fuzzer with fresh examples each run, and the whole suite under the sanitizers.
"""
import os

PROFILE = os.environ.get("OPFORGE_TEST_PROFILE", "quick")
if PROFILE not in ("quick", "long"):
    raise ValueError(f"OPFORGE_TEST_PROFILE must be 'quick' or 'long', got {PROFILE!r}")
LONG = PROFILE == "long"
SANITIZED = bool(os.environ.get("OPFORGE_SANITIZED"))


def examples(full: int, least: int = 8) -> int:
    """Hypothesis examples for a sweep of `full` examples in the long profile."""
    return full if LONG else max(least, full // 4)
