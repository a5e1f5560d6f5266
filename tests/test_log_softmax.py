"""LogSoftmax against its numpy formula (computed in float64)."""
import warnings

import numpy as np
import pytest

import opforge as of
from opforge.ops import gen_nn_ops as N


def _log_softmax(x, axis):
    if x.size == 0:
        return x.copy()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        x64 = x.astype(np.float64)
        s = x64 - x64.max(axis, keepdims=True)
        return (s - np.log(np.exp(s).sum(axis, keepdims=True))).astype(x.dtype)


def _close(got, want):
    got = got.numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-5 if want.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


CASES = [((5,), -1), ((5,), 0), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -3),
         ((4, 1000), -1), ((1000, 4), 0), ((3, 300, 7), 1), ((1,), 0), ((0, 3), -1), ((3, 0), 1)]


@pytest.mark.parametrize("shape,axis", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_softmax_matches_numpy(dtype, shape, axis):
    x = (np.random.default_rng(1).standard_normal(shape) * 4).astype(dtype)
    got = N.log_softmax(x, axis)
    _close(got, _log_softmax(x, axis))
    if x.size:
        np.testing.assert_allclose(np.exp(got.numpy().astype(np.float64)).sum(axis), 1, rtol=1e-5)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_softmax_extremes(dtype, axis):
    # Large logits stay finite; tiny probabilities stay finite in log space (log(softmax) is -inf).
    x = np.array([[1000.0, 1001.0, 999.0], [0.0, -200.0, -1000.0]], dtype)
    got = N.log_softmax(x, axis)
    assert np.isfinite(got.numpy()).all()
    _close(got, _log_softmax(x, axis))
    y = np.random.default_rng(3).standard_normal((4, 5)).astype(dtype)
    y[0, 1], y[1, 2], y[2, :], y[3, 0] = np.nan, np.inf, -np.inf, -np.inf
    _close(N.log_softmax(y, axis), _log_softmax(y, axis))


def test_log_softmax_errors():
    with pytest.raises(of.errors.InvalidArgumentError, match="LogSoftmax.*'logits'"):
        N.log_softmax(np.ones((), np.float32))
    with pytest.raises(of.errors.InvalidArgumentError, match="LogSoftmax.*'axis'"):
        N.log_softmax(np.ones((2, 3), np.float32), 2)
    with pytest.raises(of.errors.InvalidArgumentError, match="LogSoftmax"):
        N.log_softmax(np.ones(3, np.int32))
