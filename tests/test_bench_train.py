"""The training-step benches run end to end: `bench.gemm_table --train-only`
(which compares the first step's loss with PyTorch's before timing) and
`bench.train_profile` (every op row and the whole step)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args):
    proc = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def test_gemm_table_train_only():
    out = run("bench.gemm_table", "--train-only", "--quick")
    assert "digits MLP 64-256-10 b64" in out and "float32 matmul" not in out


def test_train_profile_rows():
    out = run("bench.train_profile", "--repeats", "1")
    for row in ("forward 1:", "backward 2:", "Adam, 6 parameters", "the whole step", "sum of the ops"):
        assert row in out, out
