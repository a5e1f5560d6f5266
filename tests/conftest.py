"""Session-wide test ordering, and the op libraries that several test files load."""
import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import op_library_build  # noqa: E402


def pytest_collection_modifyitems(config, items):
    # Loading an op library adds ops to the process's registry for good (a
    # library cannot be unloaded); run those tests last so every other test
    # sees only the built-in registry.
    items.sort(key=lambda item: item.get_closest_marker("loads_op_libraries") is not None)
    # Under the sanitizer pass (.ci/sanitize) the bench harness tests run
    # quick-mode benches whose timings mean nothing there; the ops they time
    # are covered by the op tests, so they only cost CI minutes.
    # Hypothesis tests draw an eighth of their examples there (at least 3):
    # every path still runs, at ASan's 3-5x cost per example.
    if os.environ.get("OPFORGE_SANITIZED"):
        skip = pytest.mark.skip(reason="bench harness: timings mean nothing under ASan")
        for item in items:
            if "bench" in item.name:
                item.add_marker(skip)
            # The reruns under OPFORGE_SIMD=baseline: the AVX2 rerun covers the same templates.
            elif "[baseline" in item.name or item.name.endswith("baseline_instruction_set"):
                item.add_marker(pytest.mark.skip(reason="under ASan the AVX2 rerun stands for the capped instruction sets"))
            _fewer_examples(getattr(item, "obj", None))


# OPFORGE_TEST_TIMES=path: the session writes each test file's seconds there
# as JSON ({file: s}); .ci/run sets it for the README pass and .ci/sanitize
# splits its shards by those times. Only the outermost pytest writes (tests
# that start pytest in a subprocess inherit the marker).
_TIMES: dict[str, float] = {}
_TIMES_PATH = None


def pytest_configure(config):
    global _TIMES_PATH
    if os.environ.get("OPFORGE_TEST_TIMES") and not os.environ.get("_OPFORGE_TEST_TIMES_TAKEN"):
        _TIMES_PATH = os.environ["OPFORGE_TEST_TIMES"]
        os.environ["_OPFORGE_TEST_TIMES_TAKEN"] = "1"


def pytest_runtest_logreport(report):
    if _TIMES_PATH:
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
