"""NN ops (Softmax, RmsNorm) against their numpy formulas."""
import warnings

import numpy as np
import pytest

import opforge as of
from opforge.ops import gen_nn_ops as N

FLOAT_DTYPES = [np.float32, np.float64]


def _np(t):
    return np.asarray(t.numpy() if isinstance(t, of.Tensor) else t)


def _rtol(dtype):
    return 1e-5 if dtype == np.float32 else 1e-12


def _softmax(x, axis):
    if x.size == 0:
        return x.copy()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        e = np.exp(x - x.max(axis, keepdims=True))
        return e / e.sum(axis, keepdims=True)


def _rms_norm(x, w, eps):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + x.dtype.type(eps)) * w


def _close(got, want, dtype):
    got = _np(got)
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=_rtol(dtype), atol=_rtol(dtype) * 1e-3, equal_nan=True)


SOFTMAX_CASES = [
    ((5,), -1), ((5,), 0), ((3, 4), -1), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), 1), ((2, 3, 4), -3),
    ((4, 1000), -1), ((1000, 4), 0), ((3, 300, 7), 1), ((1,), 0), ((0, 3), -1), ((0, 3), 0), ((3, 0), 1),
]


@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_matches_numpy(dtype, shape, axis):
    x = (np.random.default_rng(1).standard_normal(shape) * 4).astype(dtype)
    got = N.softmax(x, axis)
    _close(got, _softmax(x, axis), dtype)
    if x.size:
        np.testing.assert_allclose(_np(got).sum(axis), 1, rtol=_rtol(dtype) * 10)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_default_axis_is_last(dtype):
    x = np.arange(12, dtype=dtype).reshape(3, 4)
    _close(N.softmax(x), _softmax(x, -1), dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_is_stable_for_large_logits(dtype):
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1001.0, -1002.0]], dtype)
    got = _np(N.softmax(x))
    assert np.isfinite(got).all()
    _close(got, _softmax(x, -1), dtype)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_nan_and_inf(dtype, axis):
    x = np.random.default_rng(3).standard_normal((4, 5)).astype(dtype)
    x[0, 1] = np.nan
    x[1, 2] = np.inf
    x[2, :] = -np.inf
    x[3, 0] = -np.inf
    _close(N.softmax(x, axis), _softmax(x, axis), dtype)


def test_softmax_errors():
    with pytest.raises(of.errors.InvalidArgumentError, match="Softmax.*'logits'"):
        N.softmax(np.ones((), np.float32))
    with pytest.raises(of.errors.InvalidArgumentError, match="Softmax.*'axis'"):
        N.softmax(np.ones((2, 3), np.float32), 2)
    with pytest.raises(of.errors.InvalidArgumentError, match="Softmax.*'axis'"):
        N.softmax(np.ones((2, 3), np.float32), -3)
    for bad in (np.ones(3, np.int32), np.ones(3, np.int64), np.ones(3, bool)):
        with pytest.raises(of.errors.InvalidArgumentError, match="Softmax"):
            N.softmax(bad)


RMS_SHAPES = [(4,), (3, 8), (2, 3, 16), (5, 1), (2, 4097), (1000, 64), (0, 8), (3, 0)]


@pytest.mark.parametrize("eps", [1e-6, 0.0, 0.5])
@pytest.mark.parametrize("shape", RMS_SHAPES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_rms_norm_matches_numpy(dtype, shape, eps):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    w = rng.standard_normal(shape[-1]).astype(dtype)
    _close(N.rms_norm(x, w, eps), _rms_norm(x, w, eps), dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_rms_norm_default_epsilon_and_zero_rows(dtype):
    x = np.zeros((2, 3), dtype)
    x[1] = [1.0, -2.0, 3.0]
    w = np.array([1.0, 0.5, 2.0], dtype)
    _close(N.rms_norm(x, w), _rms_norm(x, w, 1e-6), dtype)
    got = _np(N.rms_norm(x, w, 0.0))  # 0 / sqrt(0) is NaN, as in numpy
    assert np.isnan(got[0]).all() and np.isfinite(got[1]).all()


def test_rms_norm_float32_long_rows_are_accurate():
    x = np.random.default_rng(6).random((2, 1_000_000), dtype=np.float32) + 100
    w = np.ones(x.shape[-1], np.float32)
    want = _rms_norm(x.astype(np.float64), w.astype(np.float64), 1e-6)
    np.testing.assert_allclose(_np(N.rms_norm(x, w)), want, rtol=1e-6)


def test_rms_norm_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(of.errors.InvalidArgumentError, match="RmsNorm.*'weight'"):
        N.rms_norm(x, np.ones(4, np.float32))
    with pytest.raises(of.errors.InvalidArgumentError, match="RmsNorm.*'weight'"):
        N.rms_norm(x, np.ones((1, 3), np.float32))
    with pytest.raises(of.errors.InvalidArgumentError, match="RmsNorm.*'x'"):
        N.rms_norm(np.ones((), np.float32), np.ones(1, np.float32))
    with pytest.raises(of.errors.InvalidArgumentError, match="RmsNorm.*'epsilon'"):
        N.rms_norm(x, np.ones(3, np.float32), -1e-3)
    with pytest.raises(of.errors.InvalidArgumentError, match="RmsNorm.*'epsilon'"):
        N.rms_norm(x, np.ones(3, np.float32), float("nan"))
    with pytest.raises(of.errors.InvalidArgumentError, match="RmsNorm"):
        N.rms_norm(x, np.ones(3, np.float64))  # no implicit promotion
    with pytest.raises(of.errors.InvalidArgumentError, match="RmsNorm"):
        N.rms_norm(np.ones((2, 3), np.int32), np.ones(3, np.int32))
