"""The fast paths behind Sum/Mean, element-wise arithmetic and MatMul.

Sum and Mean of float32 accumulate in double with SIMD loops; Add, Sub, Mul
and Div of same-size float operands use SIMD loops with streaming stores for
large outputs; MatMul uses OpenBLAS with opforge's own GEMM as the fallback.
Each path is checked against numpy, and the fallbacks (OPFORGE_SIMD,
OPFORGE_BLAS=none) are rerun in subprocesses.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import opforge as of

rng = np.random.default_rng(11)
TESTS = Path(__file__).resolve().parent


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_sum_matches_float64_for_all_lengths(dtype):
    # Partial vectors, the 8-accumulator unroll and chunk boundaries (32768).
    base = rng.uniform(0.5, 1.5, 70_000).astype(dtype)
    for n in list(range(0, 200)) + [32767, 32768, 32769, 65537, 70_000]:
        x = base[:n]
        want = x.astype(np.float64).sum()
        got = of.sum(x).numpy()
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=1e-7 if dtype == np.float32 else 1e-14)
        if n:
            np.testing.assert_allclose(of.mean(x).numpy(), want / n, rtol=1e-6 if dtype == np.float32 else 1e-14)


def test_sum_float32_large_is_accurate():
    # 10M float32: within 1e-6 of the float64 sum (numpy's own float32 sum is
    # pairwise in float32; opforge accumulates in double).
    x = rng.standard_normal(10_000_000).astype(np.float32) + 0.25
    want = x.astype(np.float64).sum()
    np.testing.assert_allclose(of.sum(x).numpy(), want, rtol=1e-6)
    rows = x.reshape(1000, 10_000)
    want_rows = rows.astype(np.float64).sum(axis=-1)
    np.testing.assert_allclose(of.sum(rows, axis=-1).numpy(), want_rows, rtol=1e-6)
    # Cancellation: the error is bounded by the magnitude summed, not the result.
    y = np.concatenate([x, -x[::-1]])
    assert abs(float(of.sum(y).numpy())) <= 1e-6 * np.abs(y).astype(np.float64).sum()


def test_sum_propagates_inf_and_nan():
    x = np.ones(100_000, np.float32)
    x[77_777] = np.inf
    assert of.sum(x).numpy() == np.inf
    x[5] = -np.inf
    assert np.isnan(of.sum(x).numpy())
    x = np.ones(100_000, np.float32)
    x[-1] = np.nan
    assert np.isnan(of.sum(x).numpy())
    assert np.isnan(of.sum(x.reshape(100, 1000), axis=-1).numpy()[-1])


@pytest.mark.parametrize("op,fn", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                                   ("div", np.true_divide)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_binary_same_size_is_exact(op, fn, dtype):
    # Small sizes (tails), unaligned views, and outputs large enough to stream.
    a = rng.uniform(-10, 10, 5_000_000).astype(dtype)
    b = rng.uniform(0.5, 10, 5_000_000).astype(dtype)
    for n, off in [(0, 0), (1, 0), (7, 1), (33, 3), (1000, 1), (4_200_013, 1)]:
        x, y = a[off:off + n], b[:n]
        np.testing.assert_array_equal(getattr(of, op)(x, y).numpy(), fn(x, y))
    # Same element count, different shapes that broadcast by 1-dims.
    x, y = a[:600].reshape(2, 300), b[:600].reshape(2, 1, 300)
    np.testing.assert_array_equal(getattr(of, op)(x, y).numpy(), fn(x, y))


def test_binary_special_values():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, 3.0], np.float32)
    y = np.array([np.inf, np.inf, 1.0, 0.0, 0.0, -0.0, 0.0], np.float32)
    with np.errstate(all="ignore"):
        for op, fn in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.true_divide)]:
            got = getattr(of, op)(x, y).numpy()
            want = fn(x, y)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_matmul_blas_layouts(dtype):
    # Transposed and batched operands reach BLAS as transposes, not copies.
    a = rng.standard_normal((3, 70, 50)).astype(dtype)
    b = rng.standard_normal((50, 90)).astype(dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(of.matmul(a, b).numpy(), a @ b, rtol=tol, atol=tol)
    np.testing.assert_allclose(of.matmul(a, b.T.copy(), transpose_b=True).numpy(), a @ b, rtol=tol, atol=tol)
    at = np.ascontiguousarray(np.swapaxes(a, -1, -2))
    np.testing.assert_allclose(of.matmul(at, b, transpose_a=True).numpy(), a @ b, rtol=tol, atol=tol)
    big = rng.standard_normal((300, 257)).astype(dtype)
    np.testing.assert_allclose(of.matmul(big, big.T.copy()).numpy(), big @ big.T, rtol=tol, atol=tol * 10)


def _rerun(test_file, **env):
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
                          env=dict(os.environ, **env), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.skipif(os.environ.get("OPFORGE_BLAS") is not None, reason="already set")
def test_matmul_without_blas():
    # The own GEMM (integer types always use it) must stay correct for floats.
    _rerun(TESTS / "test_linalg_ops.py", OPFORGE_BLAS="none")


@pytest.mark.skipif(os.environ.get("OPFORGE_SIMD") is not None, reason="already capped")
def test_paths_on_the_baseline_instruction_set():
    _rerun(Path(__file__), OPFORGE_SIMD="baseline")
