"""Session-wide test ordering, and the op libraries that several test files load."""
import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import op_library_build  # noqa: E402
import suite_profile  # noqa: E402


def pytest_collection_modifyitems(config, items):
    # Loading an op library adds ops to the process's registry for good (a
    # library cannot be unloaded); run those tests last so every other test
    # sees only the built-in registry.
    items.sort(key=lambda item: item.get_closest_marker("loads_op_libraries") is not None)
    if _TIMES_PATH:
        _COUNTED.update(item.nodeid for item in items if _sanitizer_skips(item) is None)
    # Hypothesis tests draw an eighth of their examples under the quick
    # profile's sanitizer pass (at least 3): every path still runs, at ASan's
    # 3-5x cost per example.
    if suite_profile.SANITIZED:
        for item in items:
            reason = _sanitizer_skips(item)
            if reason and reason != "slow":  # .ci/sanitize deselects those itself (-m "not slow")
                item.add_marker(pytest.mark.skip(reason=reason))
            if not suite_profile.LONG:
                _fewer_examples(getattr(item, "obj", None))


def _sanitizer_skips(item):
    """Why the sanitizer pass (.ci/sanitize) does not run `item`, or None."""
    if item.get_closest_marker("slow"):
        return "slow"
    # The bench harness runs quick-mode benches whose timings mean nothing
    # there; the ops they time are covered by the op tests.
    if "bench" in item.name or item.path.name == "test_bench.py":
        return "bench harness: timings mean nothing under ASan"
    # The reruns under OPFORGE_SIMD=baseline: the AVX2 rerun covers the same templates.
    if "[baseline" in item.name or item.name.endswith("baseline_instruction_set"):
        return "under ASan the AVX2 rerun stands for the capped instruction sets"
    if suite_profile.LONG:
        return None
    # The checker's own runs of user libraries, each in a subprocess: our C++
    # there is load_op_library (tests/test_op_library.py) and the built-in ops
    # the checker calls, which its one built-in test keeps.
    if item.path.name == "test_op_library_check.py" and item.originalname != "test_runner_on_built_in_ops_of_every_kind":
        return "quick profile: the checker's runs of user libraries; load_op_library runs in test_op_library.py"
    return _QUICK_SANITIZER_SKIPS.get(item.path.name, {}).get(item.originalname)


# The quick profile's sanitizer pass also leaves out these tests, whose C++
# the rest of that pass runs anyway (the README pass and the long profile run
# them all): {file: {test: why}}.
_QUICK_SANITIZER_SKIPS = {
    # A correctness sweep of each op's float16 and bfloat16 kernels: they are
    # the float32 kernels behind one widening wrapper (half_via_float.h) or
    # the dtype-generic ones the bad-input fuzzer runs in every dtype. The
    # file's other tests (the half GEMM paths) stay.
    "test_half_kernels.py": {
        "test_op_in_half_precision_matches_float32_numpy_rounded":
            "quick profile: the half-precision sweep runs in the README pass"},
    # Multi-process runs whose collectives test_collectives already runs under
    # the sanitizers; the rest is the launcher's and the ranks' Python.
    "test_distributed.py": dict.fromkeys(
        ("test_two_process_training_equals_one_process", "test_graph_minimize_averages_like_one_process",
         "test_a_stuck_rank_times_out_with_a_clear_error", "test_a_dead_rank_ends_the_others",
         "test_launcher_runs_the_digits_example"),
        "quick profile: MPI runs of the collectives that test_collectives runs"),
}


# OPFORGE_TEST_TIMES=path: the session writes there, as JSON ({file: s}), each
# test file's seconds in the tests the sanitizer pass also runs; .ci/run sets
# it for the README pass and .ci/sanitize splits its shards by those times.
# Only the outermost pytest writes (tests that start pytest in a subprocess
# inherit the marker).
_TIMES: dict[str, float] = {}
_COUNTED: set[str] = set()
_TIMES_PATH = None


def pytest_configure(config):
    global _TIMES_PATH
    if os.environ.get("OPFORGE_TEST_TIMES") and not os.environ.get("_OPFORGE_TEST_TIMES_TAKEN"):
        _TIMES_PATH = os.environ["OPFORGE_TEST_TIMES"]
        os.environ["_OPFORGE_TEST_TIMES_TAKEN"] = "1"


def pytest_runtest_logreport(report):
    if _TIMES_PATH and report.nodeid in _COUNTED:
        f = report.nodeid.split("::")[0]
        _TIMES[f] = _TIMES.get(f, 0.0) + report.duration


def pytest_sessionfinish(session):
    if _TIMES_PATH:
        import json
        pathlib.Path(_TIMES_PATH).write_text(json.dumps({k: round(v, 3) for k, v in sorted(_TIMES.items())}))


def _fewer_examples(test):
    from hypothesis import settings
    current = getattr(test, "_hypothesis_internal_use_settings", None)  # set by @given/@settings
    if current is not None:
        test._hypothesis_internal_use_settings = settings(current, max_examples=max(3, current.max_examples // 8))


@pytest.fixture(scope="session")
def example_lib(tmp_path_factory) -> pathlib.Path:
    """examples/custom_op built with CMake against the installed opforge."""
    return op_library_build.build_example(tmp_path_factory.mktemp("custom_op_build"))


@pytest.fixture(scope="session")
def fixture_libs(tmp_path_factory) -> dict[str, pathlib.Path]:
    """tests/op_library_fixtures, built with the flags from opforge.sysconfig (no CMake)."""
    return op_library_build.build_fixtures(tmp_path_factory.mktemp("op_library_fixtures"))
