"""bench/fastpath.py (issue 21's tiny-call table) runs and prints every row and target.
No timing is asserted."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_fastpath_table_runs():
    proc = subprocess.run([sys.executable, "-m", "bench.fastpath", "--runs", "1", "--rounds", "1", "--number", "20"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from bench import fastpath
    for _, title, *_ in fastpath.ROWS:
        assert title in proc.stdout
    assert proc.stdout.count("target: ") == len(fastpath.TARGETS)
    assert "thread CPU time" in proc.stdout
