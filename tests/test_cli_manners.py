"""Command-line manners: a closed pipe ends a CLI quietly, exit statuses and
closing messages say what happened in plain words."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv", [["-m", "opforge", "ops"], ["-m", "opforge", "describe", "MatMul"],
                                  ["-m", "bench", "--help"], ["-m", "codegen", "--help"]])
def test_closed_pipe_exits_quietly(argv):
    # `python -m opforge ops | head`: the reader is gone before the writer writes.
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, *argv], stdout=write, stderr=subprocess.PIPE, text=True,
                              cwd=ROOT, timeout=120)
    finally:
        os.close(write)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 141), proc.returncode   # 141: 128 + SIGPIPE, as C tools end


def test_head_of_ops_through_a_shell():
    proc = subprocess.run(["bash", "-c", f"'{sys.executable}' -m opforge ops | head -2"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 2 and proc.stderr == "", proc.stderr


def test_bench_exit_status_says_what_it_judged(capsys):
    sys.path.insert(0, str(ROOT))
    from bench.run import _exit_status
    assert _exit_status("full", ["matmul.64 [opforge]: wrong"], [], False) == 1
    assert _exit_status("full", [], ["matmul >= 0.95x numpy"], False) == 2
    assert "1 target(s) missed: matmul >= 0.95x numpy" in capsys.readouterr().out
    assert _exit_status("full", [], ["matmul >= 0.95x numpy"], True) == 0
    assert _exit_status("quick", [], ["matmul >= 0.95x numpy"], False) == 0
    assert "quick mode only reports" in capsys.readouterr().out
    assert _exit_status("full", [], [], False) == 0


def test_check_summary_reads_as_english():
    from opforge.testing.check.checker import Report, format_table
    report = Report("libx.so")
    report.add("Op", "run", cases=3)
    report.add("Op", "gradient", cases=1)
    assert format_table(report).splitlines()[-1] == "passed: all 2 checks"
    report.add("Op", "bad-input", ["accepted a str"])
    assert format_table(report).splitlines()[-1] == "FAILED: 1 of 3 checks failed"
