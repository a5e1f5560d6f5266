"""`python -m opforge check LIB.so`: the example library passes; every
broken-on-purpose fixture fails with the finding that names its fault.

The checker loads libraries in child processes only, so this test process's
registry stays built-in (no loads_op_libraries marker needed)."""
from __future__ import annotations

import concurrent.futures
import json
import os
import re
import subprocess
import sys

import pytest

import opforge as of
from opforge import _opinfo  # the registry, through its one reader
from opforge.testing.check import check_library


def _results(report, op=None, check=None):
    return [r for r in report.results if (op is None or r.op == op) and (check is None or r.check == check)]


def _failed(report):
    return {(r.op, r.check) for r in report.results if r.status == "fail"}


def test_example_library_passes(example_lib):
    report = check_library(example_lib)
    assert report.ok, "\n".join(f"{r.op} {r.check}: {r.findings}" for r in report.results)
    for op in ("SoftShrink", "ZeroOut"):
        run, = _results(report, op, "run")
        # 0-d and empty tensors were accepted by the shape function and ran.
        assert run.status == "ok" and "()" in run.note and "(0,)" in run.note, run
        assert _results(report, op, "bad-input")[0].cases >= 3
        assert _results(report, op, "declaration")[0].status == "ok"
    run, = _results(report, "SoftShrink", "run")
    assert run.cases >= 2 * 6  # float32 and float64, up to two draws per shape, six shapes
    grad, = _results(report, "SoftShrink", "gradient")
    assert grad.status == "ok" and grad.cases == 1
    assert _results(report, "ZeroOut", "gradient")[0].status == "skip"


REFUSED = [
    ("dup_ops", r"AlreadyExistsError: .*op 'Add'.*already registered"),
    ("missing_symbol_ops", r"NotFoundError: .*MissingKernel"),
    ("no_kernel_ops", r"NotFoundError: .*'KernelLess' .* has no kernel"),
    ("kernel_only_ops", r"NotFoundError: .*'NobodyDeclaredMe', which is not registered"),
    ("invalid_ops", r"InvalidArgumentError: .*invalid registrations: .*BadAttr"),
    ("math_ops", r"AlreadyExistsError: .*group 'math'"),
    ("undocumented_ops", r"InvalidArgumentError: .*op Undocumented: no summary"),
    ("plain", r"InvalidArgumentError: .*has no opforge stamp"),
]


@pytest.fixture(scope="module")
def refused_reports(fixture_libs):
    # Two at a time: each is a child process that mostly waits on its imports.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip([r[0] for r in REFUSED], pool.map(check_library, [fixture_libs[r[0]] for r in REFUSED])))


@pytest.mark.parametrize("name,pattern", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_fixture_fails_at_load(refused_reports, name, pattern):
    report = refused_reports[name]
    assert not report.ok and _failed(report) == {("(library)", "load")}
    assert re.search(pattern, _results(report, "(library)", "load")[-1].findings[0], re.S)


def test_mismatched_stamp_and_non_library(example_lib, tmp_path):
    version = of.__version__
    patched = tmp_path / "libold.so"
    patched.write_bytes(example_lib.read_bytes().replace(f"version={version} ".encode(), b"version=9.9.9 "))
    report = check_library(patched)
    assert _failed(report) == {("(library)", "load")}
    assert "built against opforge 9.9.9" in report.results[0].findings[0]
    text = tmp_path / "libtext.so"
    text.write_text("not a library")
    assert "is not a shared library" in check_library(text).results[0].findings[0]


@pytest.mark.skipif(os.environ.get("OPFORGE_SANITIZED") == "1",
                    reason="the deliberate crash would be a sanitizer report, which fails .ci/sanitize")
def test_crash_is_a_finding_and_the_check_carries_on(fixture_libs):
    report = check_library(fixture_libs["crash_on_empty_ops"])
    assert _failed(report) == {("CenterInt", "crash")}
    finding = _results(report, "CenterInt", "crash")[0].findings[0]
    assert "shape (0,)" in finding and "SIGFPE" in finding, finding
    # The healthy op beside it was checked by a fresh child.
    assert _results(report, "PlusOneInt", "run")[0].status == "ok"


def test_hang_is_a_finding(fixture_libs):
    report = check_library(fixture_libs["hang_ops"], timeout=5)
    assert _failed(report) == {("PairSum", "crash")}
    finding = _results(report, "PairSum", "crash")[0].findings[0]
    assert "shape ()" in finding and "hung (no progress in 5 s): killed" in finding, finding


def test_nan_from_finite_inputs(fixture_libs):
    report = check_library(fixture_libs["nan_ops"])
    assert _failed(report) == {("Root", "run")}
    assert "NaN from finite inputs" in _results(report, "Root", "run")[0].findings[0]
    assert check_library(fixture_libs["nan_ops"], allow_nan=("Root",)).ok


def test_wrong_gradient(fixture_libs):
    report = check_library(fixture_libs["wrong_grad_ops"])
    assert _failed(report) == {("BadSquare", "gradient")}
    assert "gradient of BadSquare w.r.t. input 0 is wrong" in _results(report, "BadSquare", "gradient")[0].findings[0]


def test_declaration_gaps(fixture_libs):
    report = check_library(fixture_libs["gap_ops"])
    assert _failed(report) == {("HalfKernels", "declaration")}
    findings = _results(report, "HalfKernels", "declaration")[0].findings
    assert any("no doc for output 'y'" in f for f in findings)
    assert any("allows float64 but no cpu kernel" in f for f in findings)


def test_internal_errors_are_findings(fixture_libs):
    report = check_library(fixture_libs["typo_attr_ops"])
    assert _failed(report) == {("TypoInShapeFn", "run"), ("TypoInKernel", "run")}
    assert "looked up attr 'axes'" in _results(report, "TypoInShapeFn", "run")[0].findings[0]


def test_cli_table_json_and_exit_status(example_lib, fixture_libs, tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "opforge", "check", *map(str, args)],
                              capture_output=True, text=True, cwd=tmp_path,
                              env={**os.environ, "OPFORGE_SANITIZE_PYTHON": str(tmp_path / "none")})
    out = cli(fixture_libs["nan_ops"])
    assert out.returncode == 1 and re.search(r"Root\s+run\s+FAIL", out.stdout) and "FAILED: 1 of" in out.stdout
    out = cli(example_lib, "--json", "--ops", "ZeroOut", "--sanitize")
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout)
    assert data["ok"] and data["sanitizer"].startswith("unavailable")
    assert {r["op"] for r in data["results"]} == {"(library)", "ZeroOut"}


def test_runner_on_built_in_ops_of_every_kind():
    """The checks derive from any registry entry: list inputs and an int attr
    (Concat), a bool input (Select), a non-inferred type attr (Cast); NaN by
    design (Log) is found unless allowed. (All built-in ops: ~20 s, all pass
    but the NaN-by-design ones: Log, Sqrt, Pow, Div, Mean of empty, ApplyAdam.)"""
    import threading

    from opforge.testing.check import runner
    read, write = os.pipe()
    events, lines = runner.Events(write), []
    reader = threading.Thread(target=lambda: lines.extend(os.fdopen(read)))
    reader.start()
    ops = {op["name"]: op for op in _opinfo.registry_dict()["ops"]}
    for name in ("Concat", "Select", "Cast", "Log"):
        runner.OpRun(events, of, ops[name], allow_nan=False).run_all()
    runner.OpRun(events, of, ops["Log"], allow_nan=True).run_all()
    events.out.close()
    reader.join()
    results = [json.loads(line) for line in lines if '"ev": "result"' in line]
    status = {}
    for r in results:
        status.setdefault((r["op"], r["check"]), []).append(r["status"])
    assert status.pop(("Log", "run")) == ["fail", "ok"]
    assert all(s in ("ok", "skip") for ss in status.values() for s in ss), status
    for name in ("Concat", "Select"):
        assert status[(name, "gradient")] == ["ok"] and status[(name, "run")] == ["ok"], name
