"""The test profile, OPFORGE_TEST_PROFILE: "quick" (the default: the README's
test command and .ci/run) or "long" (.ci/long).

Quick keeps .ci/run inside its 20 minutes on two cores: the bad-input fuzzer
draws a fixed 20 examples per op (40 under the sanitizers), hypothesis suites
draw an eighth of their examples under the sanitizers, the sanitizer build
leaves out UBSan's per-pointer checks (.ci/sanitize), and the sanitizer pass
leaves out the tests conftest.py lists, whose C++ the rest of that pass runs
(the README pass runs them). Long runs every suite at full size, the fuzzer
with fresh examples each run, and the whole suite under every check.
"""
import os

PROFILE = os.environ.get("OPFORGE_TEST_PROFILE", "quick")
if PROFILE not in ("quick", "long"):
    raise ValueError(f"OPFORGE_TEST_PROFILE must be 'quick' or 'long', got {PROFILE!r}")
LONG = PROFILE == "long"
SANITIZED = bool(os.environ.get("OPFORGE_SANITIZED"))
