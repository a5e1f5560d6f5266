"""``python -m opforge check LIB.so``: the CI check of an op library.

The parent reads the library's stamp (no code of the library runs here),
then runs runner.py in a child process that loads the library and streams
one event per case. A child that dies (a segfault, an abort, a sanitizer
report) or hangs becomes a finding naming the op and the case it was
running; a new child carries on with the remaining ops.
"""
from __future__ import annotations

import glob
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field

from opforge.testing.check import plan as P

CASE_TIMEOUT_S = 60.0  # default: a case that takes longer is a hang
LOAD_TIMEOUT_S = 120.0


@dataclass
class Result:
    op: str
    check: str
    status: str  # ok | fail | skip
    cases: int = 0
    findings: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class Report:
    library: str
    results: list[Result] = field(default_factory=list)
    sanitizer: str = "off"

    @property
    def ok(self) -> bool:
        return not any(r.status == "fail" for r in self.results)

    def add(self, op, check, findings=(), cases=0, note="", status=None):
        findings = list(findings)
        self.results.append(Result(op, check, status or ("fail" if findings else "ok"), cases, findings, note))

    def to_json(self) -> dict:
        return {"library": self.library, "ok": self.ok, "sanitizer": self.sanitizer,
                "results": [r.__dict__ for r in self.results]}


def _sanitized_python() -> tuple[str | None, dict, str]:
    """(python, extra env, description) of the ASan+UBSan build that
    .ci/sanitize makes (.venv-asan), or (None, {}, why not)."""
    py = os.environ.get("OPFORGE_SANITIZE_PYTHON") or os.path.join(os.getcwd(), ".venv-asan", "bin", "python")
    if not os.path.exists(py):
        return None, {}, (f"unavailable: no sanitizer build at {py} (run .ci/sanitize once, or set "
                          "OPFORGE_SANITIZE_PYTHON to the python of an opforge built with "
                          "-Ccmake.define.OPFORGE_SANITIZE=ON)")
    probe = subprocess.run([py, "-c", "import glob, os, opforge; print(glob.glob(os.path.join("
                            "os.path.dirname(opforge.__file__), '_pywrap_internal*.so'))[0])"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return None, {}, f"unavailable: {py} cannot import opforge"
    ldd = subprocess.run(["ldd", probe.stdout.strip()], capture_output=True, text=True).stdout
    libs = {name: line.split("=>")[1].split()[0] for line in ldd.splitlines() for name in ("libasan", "libubsan")
            if line.strip().startswith(name) and "=>" in line}
    if len(libs) != 2:
        return None, {}, f"unavailable: the opforge of {py} is not built with ASan+UBSan"
    env = {"LD_PRELOAD": f"{libs['libasan']} {libs['libubsan']}",
           "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1:halt_on_error=1:abort_on_error=1",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:abort_on_error=1"}
    return py, env, f"ASan+UBSan ({py})"


class _Child:
    """One runner process; events arrive on a queue (None: the pipe closed)."""

    def __init__(self, python: str, env: dict[str, str], lib: str, ops: list[str], allow_nan: set[str],
                 timeout: float) -> None:
        self.timeout = timeout
        read, write = os.pipe()
        args = [python, "-m", "opforge.testing.check.runner", lib, str(write)]
        if allow_nan:
            args += ["--allow-nan", ",".join(sorted(allow_nan))]
        self.proc = subprocess.Popen(args + list(ops), pass_fds=(write,), env={**os.environ, **env},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        os.close(write)
        self.events: queue.Queue = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, args=(os.fdopen(read),), daemon=True).start()
        stderr = self.proc.stderr
        assert stderr is not None  # stderr=PIPE
        threading.Thread(target=lambda: self.stderr.extend(stderr), daemon=True).start()

    def _read(self, pipe):
        for line in pipe:
            self.events.put(json.loads(line))
        self.events.put(None)

    def next(self, loading: bool):
        # Importing opforge and loading the library may be slow on a busy
        # machine: the hang limit is for the cases.
        try:
            return self.events.get(timeout=max(self.timeout, LOAD_TIMEOUT_S) if loading else self.timeout)
        except queue.Empty:
            self.proc.kill()
            return "timeout"

    def how_it_ended(self) -> str:
        code = self.proc.wait()
        tail = "".join(self.stderr[-6:]).strip()
        if code < 0:
            how = f"killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with status {code}"
        return how + (f"; its last stderr lines:\n{tail}" if tail else "")


def check_library(path: str, ops: list[str] | None = None, sanitize: bool = False,
                  allow_nan: tuple[str, ...] = (), timeout: float = CASE_TIMEOUT_S) -> Report:
    from opforge import _op_library, errors
    try:
        import hypothesis  # noqa: F401  (the input generators; the child imports it)
    except ImportError:
        raise ImportError("opforge check draws its inputs with hypothesis: pip install hypothesis (or the checkout's extra: pip install \".[check]\")") from None
    report = Report(os.fspath(path))
    python: str = sys.executable
    env: dict[str, str] = {}
    if sanitize:
        py, env, report.sanitizer = _sanitized_python()
        if py is None:
            env = {}
        else:
            python = py
    try:
        _op_library.check_stamp(os.path.realpath(path))
    except errors.OpError as e:
        report.add("(library)", "load", [f"{type(e).__name__}: {e}"])
        return report
    report.add("(library)", "stamp", note="version and ABI match")

    remaining: list[str] | None = list(ops) if ops else None
    entries: dict[str, dict] = {}
    while remaining is None or remaining:
        child = _Child(python, env, path, remaining or [], set(allow_nan), timeout)
        current, loaded = None, False
        while True:
            ev = child.next(loading=not loaded)
            if ev is None or ev == "timeout":
                break
            if ev["ev"] == "load_error":
                report.add("(library)", "load", [f"{ev['error']}: {ev['message']}"])
                child.proc.wait()
                return report
            if ev["ev"] == "loaded":
                loaded = True
                if remaining is None or not entries:
                    entries = {op["name"]: op for op in ev["ops"]}
                    unknown = sorted(set(remaining or ()) - set(entries))
                    if unknown:
                        report.add("(library)", "load", [f"--ops names {unknown}, which the library does "
                                                         f"not declare (it has {sorted(entries)})"])
                    remaining = [n for n in (remaining or entries) if n in entries]
                    if remaining:
                        report.add("(library)", "load", note=f"{len(entries)} ops: {', '.join(entries)}")
                        for name in remaining:
                            _declaration(report, P.OpPlan(entries[name]))
            elif ev["ev"] == "begin":
                current = ev
            elif ev["ev"] == "result":
                report.add(ev["op"], ev["check"], ev["findings"] + ([f"... and {ev['more']} more"] if ev["more"]
                                                                     else []),
                           ev["cases"], ev["note"], ev["status"])
            elif ev["ev"] == "done":
                assert remaining is not None  # set when the library loaded
                remaining.remove(ev["op"])
                current = None
        how = f"hung (no progress in {timeout:g} s): killed" if ev == "timeout" else child.how_it_ended()
        if ev == "timeout":
            child.proc.wait()
        if current is None:
            if remaining is None or not entries:
                report.add("(library)", "load", [f"loading the library crashed the process: {how}"])
                return report
            if remaining:  # died between ops
                report.add(remaining[0], "crash", [f"the process {how}"])
                remaining.pop(0)
            continue
        report.add(current["op"], "crash", [f"{current['check']} case {current['case']}: the process {how}"])
        assert remaining is not None  # an op began, so the library loaded
        remaining.remove(current["op"])
    return report


def _declaration(report: Report, plan: P.OpPlan) -> None:
    findings = []
    missing = plan.undocumented()
    if missing:
        findings.append("no doc for " + ", ".join(missing))
    gap = plan.kernel_gap()
    if gap:
        have = ", ".join(plan.op["kernels"].get("cpu", ())) or "none"
        findings.append(f"type attr '{plan.kernel_attr()}' allows {', '.join(gap)} but no cpu kernel serves it "
                        f"(kernels: {have})")
    report.add(plan.name, "declaration", findings)


def format_table(report: Report) -> str:
    rows = [("op", "check", "result", "cases", "detail")]
    order = {c: i for i, c in enumerate(("stamp", "load", "declaration", "run", "bad-input", "gradient", "crash"))}
    for r in sorted(report.results, key=lambda r: (r.op != "(library)", r.op, order.get(r.check, 99))):
        detail = "\n".join(r.findings) if r.findings else r.note
        rows.append((r.op, r.check, r.status.upper() if r.status == "fail" else r.status, str(r.cases or ""),
                     detail))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [f"opforge check {report.library}" + (f"  [sanitizer: {report.sanitizer}]" if report.sanitizer != "off"
                                                  else "")]
    for row in rows:
        head = "  ".join(c.ljust(w) for c, w in zip(row[:4], widths))
        detail = row[4].replace("\n", "\n" + " " * (len(head) + 2))
        lines.append(f"{head}  {detail}".rstrip())
    failed = sum(r.status == "fail" for r in report.results)
    total = len(report.results)
    lines.append(f"FAILED: {failed} of {total} checks failed" if failed else f"passed: all {total} checks")
    return "\n".join(lines)


def main(args) -> int:
    ops = [o for o in (args.ops or "").split(",") if o] or None
    allow_nan = tuple(o for o in (args.allow_nan or "").split(",") if o)
    try:
        report = check_library(args.library, ops, args.sanitize, allow_nan, args.timeout)
    except ImportError as e:
        print(e, file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_json(), indent=1))
    else:
        print(format_table(report))
    return 0 if report.ok else 1
