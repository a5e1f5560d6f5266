"""The 8-bit GEMM (cpp/kernels/quant/) behind MatMulInteger, against numpy's
int64 matmul wrapped to int32: random shapes (edges of every register tile,
depths past one packed block), all four u8/s8 combinations, scalar, per-row
and per-column zero points, batch broadcasting; every microkernel (the module
reruns itself with OPFORGE_SIMD capped: AVX2 and portable)."""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge as of

Q8 = [np.uint8, np.int8]


def rand(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape, dtype=np.int64).astype(dtype)


def oracle(a, b, za, zb):
    za = np.asarray(za, np.int64)
    zb = np.asarray(zb, np.int64)
    if za.ndim == 1:
        za = za[:, None]
    prod = np.matmul(a.astype(np.int64) - za, b.astype(np.int64) - zb)
    return prod.astype(np.int32)  # wraps modulo 2^32, as the op does


def zero_point(rng, dtype, n, per):
    return rand(rng, (n,) if per else (), dtype)


@settings(max_examples=80, deadline=None)
@given(m=st.integers(1, 80), k=st.integers(1, 300), n=st.integers(1, 100), ta=st.sampled_from(Q8),
       tb=st.sampled_from(Q8), per_row=st.booleans(), per_col=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_matmul_integer_random_shapes(m, k, n, ta, tb, per_row, per_col, seed):
    rng = np.random.default_rng(seed)
    a, b = rand(rng, (m, k), ta), rand(rng, (k, n), tb)
    za, zb = zero_point(rng, ta, m, per_row), zero_point(rng, tb, n, per_col)
    got = of.ops.mat_mul_integer(a, b, za, zb).numpy()
    assert got.dtype == np.int32 and got.shape == (m, n)
    np.testing.assert_array_equal(got, oracle(a, b, za, zb))


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (12, 4, 32), (13, 5, 33), (130, 1030, 70), (64, 784, 512),
                                   (1, 2100, 3), (200, 3, 300), (25, 4099, 17)])
@pytest.mark.parametrize("ta,tb", [(np.uint8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8), (np.int8, np.int8)])
def test_matmul_integer_block_edges(m, k, n, ta, tb):
    # Depths past one packed block (1024), tile edges (mr 12/6/4, nr 32/16),
    # extreme values: 255 * 127 products summed over thousands of depths.
    rng = np.random.default_rng(m * 7 + k)
    a, b = rand(rng, (m, k), ta), rand(rng, (k, n), tb)
    a[0, :] = np.iinfo(ta).max
    b[:, 0] = np.iinfo(tb).min
    za, zb = ta(np.iinfo(ta).min), tb(np.iinfo(tb).max)
    np.testing.assert_array_equal(of.ops.mat_mul_integer(a, b, za, zb).numpy(), oracle(a, b, za, zb))


def test_matmul_integer_overflow_wraps_like_numpy_int32():
    k = 70000  # 255 * 127 * 70000 > 2^31
    a = np.full((2, k), 255, np.uint8)
    b = np.full((k, 3), 127, np.int8)
    z = np.zeros((), np.uint8), np.zeros((), np.int8)
    np.testing.assert_array_equal(of.ops.mat_mul_integer(a, b, *z).numpy(), oracle(a, b, 0, 0))


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_matmul_integer_batches_and_vectors(data):
    m, k, n = (data.draw(st.integers(1, 20)) for _ in range(3))
    ba = data.draw(st.lists(st.integers(1, 3), max_size=2))
    bb = [data.draw(st.sampled_from([1, d])) for d in ba]
    if data.draw(st.booleans()):
        ba, bb = bb, ba
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    a_shape = (*ba, m, k) if data.draw(st.booleans()) or not ba else (k,)
    b_shape = (*bb, k, n) if data.draw(st.booleans()) or not bb else (k,)
    a, b = rand(rng, a_shape, np.uint8), rand(rng, b_shape, np.int8)
    za, zb = np.uint8(rng.integers(0, 256)), np.int8(rng.integers(-128, 128))
    want = np.matmul(a.astype(np.int64) - int(za), b.astype(np.int64) - int(zb)).astype(np.int32)
    got = of.ops.mat_mul_integer(a, b, za, zb).numpy()
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_matmul_integer_shape_errors():
    a, b = np.zeros((4, 5), np.uint8), np.zeros((6, 3), np.int8)
    z8, zs = np.zeros((), np.uint8), np.zeros((), np.int8)
    with pytest.raises(of.errors.InvalidArgumentError, match="MatMulInteger.*inner dimension"):
        of.ops.mat_mul_integer(a, b, z8, zs)
    with pytest.raises(of.errors.InvalidArgumentError, match="MatMulInteger.*'a_zero_point'.*one per row"):
        of.ops.mat_mul_integer(a, np.zeros((5, 3), np.int8), np.zeros(3, np.uint8), zs)
    with pytest.raises(of.errors.InvalidArgumentError, match="MatMulInteger.*'b_zero_point'"):
        of.ops.mat_mul_integer(a, np.zeros((5, 3), np.int8), z8, np.zeros((2, 2), np.int8))
    with pytest.raises((of.errors.InvalidArgumentError, TypeError), match="a_zero_point|T1|dtype"):
        of.ops.mat_mul_integer(a, np.zeros((5, 3), np.int8), zs, zs)  # zero point of another type than a


@pytest.mark.skipif(os.environ.get("OPFORGE_SIMD") is not None, reason="already capped")
@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_every_microkernel(isa):
    env = dict(os.environ, OPFORGE_SIMD=isa, OPFORGE_QGEMM_EXPECT="generic" if isa == "baseline" else "avx2")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", __file__],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_the_microkernel_in_use():
    isa = of.quantization.gemm_isa()
    want = os.environ.get("OPFORGE_QGEMM_EXPECT")
    if want is not None:
        cpu = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
        if want == "avx2" and " avx2" not in cpu:
            want = "generic"
        assert isa == want
    else:
        assert isa in ("avx512vnni", "avx2", "generic")
