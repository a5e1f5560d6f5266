"""The float32 GEMM's thread policy (cpp/kernels/gemm/blas_handoff.h, sgemm.cc):
products started while numpy's OpenBLAS workers still spin after numpy's last
call go to that BLAS, whole; products of a few microseconds run on the
calling thread (split over two threads only when a worker is awake, with
OPFORGE_GEMM_SMALL_SPLIT=1). Either way the result must be numpy's
(float64 oracle), for every layout and with the fused epilogue."""
import ctypes
import os

import numpy as np
import pytest

import opforge as of
from opforge import _pywrap_internal

gen = of.ops.gen_linalg_ops


def handoffs():
    f = ctypes.CDLL(_pywrap_internal.__file__)._ZN7opforge4gemm12HandoffCountEv
    f.restype, f.argtypes = ctypes.c_int64, []
    return f()


def close(got, want, k):
    eps = np.finfo(np.float32).eps
    np.testing.assert_allclose(np.asarray(got), want, rtol=20 * eps * k ** 0.5 + 1e-6, atol=20 * eps * k)


def numpy_blas_threads():
    info = of.config.blas()
    return info["shared_threads"] if info["shared"] else 0


awake_blas = pytest.mark.skipif(
    numpy_blas_threads() < 2 or of.config.num_threads() < numpy_blas_threads()
    or os.environ.get("OPFORGE_GEMM_HANDOFF") == "0",
    reason="needs numpy's OpenBLAS with 2+ threads that opforge may use")


@awake_blas
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_products_right_after_numpys_are_handed_to_its_awake_blas(ta, tb):
    rng = np.random.default_rng(int(ta) * 2 + int(tb))
    m, k, n = 300, 260, 280
    a = rng.uniform(-1, 1, (k, m) if ta else (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = (a64.T if ta else a64) @ (b64.T if tb else b64)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    spin = rng.uniform(-1, 1, (384, 384)).astype(np.float32)
    before = handoffs()
    # Right after numpy's call its workers spin (about 0.1 s); on a loaded
    # machine one may be waiting for a core rather than on one: try a few times.
    for _ in range(40):
        spin @ spin
        close(gen.mat_mul(a, b, transpose_a=ta, transpose_b=tb).numpy(), want, k)
        spin @ spin
        got = gen.fused_mat_mul(a, b, bias, transpose_a=ta, transpose_b=tb, activation="relu").numpy()
        close(got, np.maximum(want + bias, 0), k)
        if handoffs() - before >= 2:
            break
    assert handoffs() > before


@awake_blas
def test_strided_views_right_after_numpys_are_right():
    # Views that are neither row- nor column-major cannot go to cblas as they
    # are: whichever GEMM takes them, right after numpy's call, the answer is
    # numpy's.
    rng = np.random.default_rng(5)
    big = rng.uniform(-1, 1, (600, 520)).astype(np.float32)
    a, b = big[::2, ::2], big[1::2, 1::2].T  # [300, 260] and [260, 300], both strided
    want = a.astype(np.float64) @ b.astype(np.float64)
    spin = rng.uniform(-1, 1, (384, 384)).astype(np.float32)
    for _ in range(5):
        spin @ spin
        close(of.matmul(a, b).numpy(), want, 260)


def test_small_products_in_a_loop_are_bitwise_stable():
    # A product of a few microseconds runs on the caller alone, or (with
    # OPFORGE_GEMM_SMALL_SPLIT=1) split in two when a worker is awake: each
    # element is the same dot product either way, so every call is identical.
    rng = np.random.default_rng(7)
    for m, k, n in [(64, 64, 64), (96, 80, 72), (50, 64, 100), (128, 40, 128)]:
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        runs = [of.matmul(a, b).numpy() for _ in range(40)]
        for r in runs[1:]:
            np.testing.assert_array_equal(r, runs[0])
        close(runs[0], a.astype(np.float64) @ b.astype(np.float64), k)
        bias = rng.uniform(-1, 1, n).astype(np.float32)
        fused = [gen.fused_mat_mul(a, b, bias, activation="silu").numpy() for _ in range(20)]
        for r in fused[1:]:
            np.testing.assert_array_equal(r, fused[0])
