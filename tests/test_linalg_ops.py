"""Tests of the linalg op group (MatMul) against numpy.matmul as the oracle."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge as of

gen = of.ops.gen_linalg_ops

FLOATS = [np.float32, np.float64]
INTS = [np.int32, np.int64]
NUMERIC = FLOATS + INTS

rng = np.random.default_rng(0)


def make(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "i":
        return np.asarray(rng.integers(-5, 5, size=shape), dtype=dtype)
    return np.asarray(rng.uniform(-1, 1, size=shape), dtype=dtype)


def expected(a, b, ta=False, tb=False):
    if ta and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if tb and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    if a.dtype.kind == "f":
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
    return np.matmul(a, b)


def check(got, want, k=1):
    got = got.numpy()
    assert got.dtype == want.dtype
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind == "f":
        eps = np.finfo(want.dtype).eps
        np.testing.assert_allclose(got, want, rtol=20 * eps * max(k, 1) ** 0.5 + 1e-6,
                                   atol=20 * eps * max(k, 1))
    else:
        np.testing.assert_array_equal(got, want)


SHAPES = [
    ((2, 3), (3, 4)),
    ((1, 1), (1, 1)),
    ((5, 7), (7, 1)),
    ((1, 7), (7, 5)),
    ((13, 17), (17, 19)),
    ((3,), (3,)),
    ((3,), (3, 4)),
    ((4, 3), (3,)),
    ((2, 5, 3), (3,)),
    ((3,), (2, 3, 4)),
    ((2, 4, 3), (2, 3, 5)),
    ((2, 4, 3), (3, 5)),
    ((4, 3), (6, 3, 5)),
    ((2, 1, 4, 3), (1, 5, 3, 2)),
    ((3, 1, 2, 2), (4, 2, 2)),
    ((0, 3), (3, 4)),
    ((2, 3), (3, 0)),
    ((2, 0), (0, 4)),       # K = 0: zeros
    ((0,), (0,)),           # empty dot product: 0
    ((0, 2, 3), (3, 4)),
    ((2, 0, 3), (2, 3, 4)),
    ((5, 0), (0,)),
]


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_matmul(dtype, sa, sb):
    a, b = make(sa, dtype), make(sb, dtype)
    k = sa[-1]
    check(gen.mat_mul(a, b), expected(a, b), k)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (1, 9, 1), (37, 29, 41), (70, 300, 33)])
def test_matmul_transposes(dtype, ta, tb, m, k, n):
    a = make((k, m) if ta else (m, k), dtype)
    b = make((n, k) if tb else (k, n), dtype)
    check(gen.mat_mul(a, b, transpose_a=ta, transpose_b=tb), expected(a, b, ta, tb), k)


@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_matmul_transposes_batched(ta, tb):
    a = make((3, 1, 6, 4), np.float64)
    k = 6 if ta else 4
    b = make((2, 5, k) if tb else (2, k, 5), np.float64)
    check(gen.mat_mul(a, b, ta, tb), expected(a, b, ta, tb), k)


def test_matmul_transpose_ignored_for_1d():
    a, b = make((4,), np.float32), make((3, 4), np.float32)
    check(gen.mat_mul(a, b, transpose_a=True, transpose_b=True), expected(a, b, False, True), 4)
    a2, v = make((4, 3), np.float32), make((4,), np.float32)
    check(gen.mat_mul(a2, v, transpose_a=True, transpose_b=True), expected(a2, v, True, False), 4)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("m,k,n", [(129, 257, 131), (256, 256, 256), (1, 1000, 700),
                                    (700, 1000, 1), (7, 5000, 3)])
def test_matmul_large(dtype, m, k, n):
    a, b = make((m, k), dtype), make((k, n), dtype)
    check(gen.mat_mul(a, b), expected(a, b), k)


def test_matmul_large_batched():
    a, b = make((16, 40, 50), np.float32), make((16, 50, 30), np.float32)
    check(of.matmul(a, b), expected(a, b), 50)
    a, b = make((2, 200, 150), np.float64), make((150, 170), np.float64)
    check(of.matmul(a, b), expected(a, b), 150)


@pytest.mark.parametrize("dtype", INTS)
def test_matmul_int_wraps(dtype):
    big = np.iinfo(dtype).max // 2 + 7
    a = np.full((2, 3), big, dtype)
    b = np.full((3, 2), 3, dtype)
    with np.errstate(over="ignore"):
        check(gen.mat_mul(a, b), np.matmul(a, b))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_matmul_random(data):
    m, k, n = (data.draw(st.integers(0, 40)) for _ in range(3))
    ta, tb = data.draw(st.booleans()), data.draw(st.booleans())
    dtype = data.draw(st.sampled_from(NUMERIC))
    batch_a = data.draw(st.lists(st.sampled_from([1, 2, 3]), max_size=2))
    batch_b = data.draw(st.lists(st.sampled_from([1, 2, 3]), max_size=2))
    # make the batch dims broadcast-compatible
    nb = min(len(batch_a), len(batch_b))
    for i in range(1, nb + 1):
        if batch_a[-i] != batch_b[-i] and 1 not in (batch_a[-i], batch_b[-i]):
            batch_b[-i] = 1
    a = make(tuple(batch_a) + ((k, m) if ta else (m, k)), dtype)
    b = make(tuple(batch_b) + ((n, k) if tb else (k, n)), dtype)
    check(gen.mat_mul(a, b, ta, tb), expected(a, b, ta, tb), k)


def test_matmul_float32_2048():
    a, b = make((2048, 2048), np.float32), make((2048, 2048), np.float32)
    got = of.matmul(a, b).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("sa,sb,match", [
    ((2, 3), (4, 5), "inner dims"),
    ((3,), (4,), "inner dims"),
    ((2, 3), (2,), "inner dims"),
    ((2, 2, 3), (3, 3, 4), "do not broadcast"),
    ((), (3,), "0-d"),
    ((3,), (), "0-d"),
])
def test_matmul_errors(sa, sb, match):
    a, b = np.zeros(sa, np.float32), np.zeros(sb, np.float32)
    with pytest.raises(of.errors.InvalidArgumentError) as info:
        gen.mat_mul(a, b)
    msg = str(info.value)
    assert "MatMul" in msg and match in msg, msg
    if match == "inner dims":
        assert "'a'" in msg and "'b'" in msg
        assert str(list(sa)) in msg and str(list(sb)) in msg


def test_matmul_transpose_error_mentions_transpose():
    with pytest.raises(of.errors.InvalidArgumentError, match="transposed"):
        gen.mat_mul(np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32), True, True)


def test_matmul_dtype_errors():
    with pytest.raises(of.errors.InvalidArgumentError, match="MatMul.*no common dtype"):
        gen.mat_mul(np.zeros((2, 2), np.int64), np.zeros((2, 2), np.uint64))
    with pytest.raises(of.errors.InvalidArgumentError, match="MatMul.*promote to int16"):
        gen.mat_mul(np.zeros((2, 2), np.int8), np.zeros((2, 2), np.uint8))
    assert gen.mat_mul(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float64)).dtype == of.float64
    with pytest.raises((of.errors.InvalidArgumentError, of.errors.NotFoundError), match="MatMul"):
        gen.mat_mul(np.zeros((2, 2), np.bool_), np.zeros((2, 2), np.bool_))
