"""The small-M path's packed A (cpp/kernels/gemm/small_m.cc): row tiles
higher than 8 rows read A from panels packed once per call instead of in
place. Packing changes where A is read from, not the arithmetic: results must
be bitwise those of the in-place form (the test hook SetSmallMPackA switches
between them) and within float32 tolerance of numpy in float64. A counter
proves the packed form ran (AVX-512 only; elsewhere A stays in place)."""
import ctypes
import time

import numpy as np
import pytest

import opforge as of
from opforge import _pywrap_internal

gen = of.ops.gen_linalg_ops
_lib = ctypes.CDLL(_pywrap_internal.__file__)
_set = _lib._ZN7opforge4gemm14SetSmallMPackAEi
_set.restype, _set.argtypes = ctypes.c_int, [ctypes.c_int]
_count = _lib._ZN7opforge4gemm18SmallMPackedACountEv
_count.restype, _count.argtypes = ctypes.c_int64, []
_isa = _lib._ZN7opforge4gemm8SgemmIsaEv
_isa.restype, _isa.argtypes = ctypes.c_char_p, []
AVX512 = _isa() == b"avx512"


@pytest.fixture(scope="module", autouse=True)
def blas_asleep():
    # numpy's OpenBLAS workers spin ~0.1 s after a call, and a product of ours
    # started then goes to that BLAS whole (blas_handoff.h): let an earlier
    # module's settle, and take the oracles from einsum (no BLAS) below.
    time.sleep(0.2)


def oracle(a, b):
    return np.einsum("ik,kj->ij", a.astype(np.float64), b.astype(np.float64))


def close(got, want, k):
    eps = np.finfo(np.float32).eps
    np.testing.assert_allclose(np.asarray(got), want, rtol=20 * eps * k ** 0.5 + 1e-6, atol=20 * eps * k)


def run_both(f):
    """f() with A packed, then in place; returns both results and whether the packed form ran."""
    before = _set(1)
    try:
        c0 = _count()
        packed = np.asarray(f())
        ran = _count() > c0
        _set(0)
        c1 = _count()
        in_place = np.asarray(f())
        assert _count() == c1, "the in-place form packed A"
    finally:
        _set(before)
    return packed, in_place, ran


# (m, k, n, packs): around each edge of the packed form. A tile is higher
# than 8 rows only while B's share (K x the thread's columns) exceeds 2^17
# floats; one or two threads cut N in two or not, so the shapes are chosen
# to pack, or not, on either: 9 rows in one tile; 13 rows as 7 + 6 (in
# place); 17 as 9 + 8; 64 as 11 x 5 + 9 (SqueezeNet's 1x1 at 27x27); 61 x 513
# (depth blocks 256 + 256 + 1, a 1-deep tail) x 700 (edge panel of 28
# columns); 128 x 256 (the M <= 128 at K <= 256 rule, 12-row tiles; above 64
# rows the threaded grid has up to four tiles per thread where the L2 is under
# 2 MiB (tile_grid.cc), so N = 4400 keeps each tile's B over 2^17 floats in
# eight column tiles: at N = 1100 it packed on Sapphire Rapids only); depths
# with a 12-float tail after the 16 x 16 transposes (300 = 256 + 44).
SHAPES = [(9, 384, 729, True), (13, 384, 729, False), (17, 300, 1000, True), (64, 384, 729, True),
          (61, 513, 700, True), (128, 256, 4400, True), (40, 1000, 300, True), (8, 3072, 768, False)]


@pytest.mark.parametrize("m,k,n,packs", SHAPES)
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_packed_a_is_bitwise_the_in_place_form(m, k, n, packs, ta, tb):
    # ta: A column-major (the portable packing loop); tb: B packed per panel
    # (not read in place) under the packed A.
    rng = np.random.default_rng(m * 7 + k * 3 + n)
    a = rng.uniform(-1, 1, (k, m) if ta else (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
    packed, in_place, ran = run_both(lambda: gen.mat_mul(a, b, transpose_a=ta, transpose_b=tb).numpy())
    want = oracle(a.T if ta else a, b.T if tb else b)
    assert ran == (packs and AVX512)
    close(packed, want, k)
    np.testing.assert_array_equal(packed, in_place)


@pytest.mark.parametrize("m,k,n,packs", SHAPES[:6])
@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
def test_packed_a_epilogue_in_registers(m, k, n, packs, act):
    # The epilogue applied to the packed-A tiles' accumulators on the last
    # depth block (packed_a_epi): bias per column, then the activation.
    rng = np.random.default_rng(m + k + n)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    packed, in_place, ran = run_both(lambda: gen.fused_mat_mul(a, b, bias, activation=act).numpy())
    assert ran == (packs and AVX512)
    z = oracle(a, b) + bias
    from math import erf
    want = {"none": z, "relu": np.maximum(z, 0),
            "gelu": 0.5 * z * (1 + np.vectorize(erf)(z / np.sqrt(2)))}[act]
    close(packed, want, k)
    np.testing.assert_array_equal(packed, in_place)


def test_packed_a_strided_view():
    # Rows of A further apart than K (a column slice of a wider array) and B
    # rows not 64-byte aligned (N = 729 floats apart).
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (64, 384 + 40)).astype(np.float32)[:, 17:17 + 384]
    b = rng.uniform(-1, 1, (384, 729)).astype(np.float32)
    packed, in_place, ran = run_both(lambda: of.matmul(a, b).numpy())
    assert ran == AVX512
    close(packed, oracle(a, b), 384)
    np.testing.assert_array_equal(packed, in_place)
