"""special_ops (Erf, Floor, Ceil, Round, Sign, IsNan, IsInf) against numpy,
every dtype each claims; gradients are checked in test_gradient_check.py."""
import math

import numpy as np
import pytest

import opforge as of
from opforge import errors

RNG = np.random.default_rng(11)
FLOATS = [np.float32, np.float64]
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e30, -1e-30]


def _data(dtype, n=1000):
    # Larger than one ParallelFor chunk, plus the edge values.
    x = RNG.uniform(-6, 6, size=n).astype(dtype)
    return np.concatenate([x, np.array(SPECIALS, dtype=dtype)])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name, ref", [("floor", np.floor), ("ceil", np.ceil), ("round", np.round),
                                       ("sign", np.sign)])
def test_rounding_matches_numpy(name, ref, dtype):
    x = _data(dtype)
    y = getattr(of.ops, name)(x).numpy()
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, ref(x))
    np.testing.assert_array_equal(np.signbit(y[~np.isnan(y)]), np.signbit(ref(x)[~np.isnan(y)]))


def test_round_halves_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5000001], dtype=np.float64)
    np.testing.assert_array_equal(of.ops.round(x).numpy(), [0, 2, 2, -0, -2, -2, 4])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_sign_of_integers(dtype):
    info = np.iinfo(dtype)
    x = np.array([0, 1, -1, 7, -9, info.min, info.max], dtype=dtype)
    y = of.ops.sign(x).numpy()
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, np.sign(x))


@pytest.mark.parametrize("dtype", FLOATS)
def test_erf_matches_libm(dtype):
    x = _data(dtype)
    want = np.array([math.erf(float(v)) for v in x], dtype=np.float64)
    y = of.ops.erf(x).numpy()
    assert y.dtype == dtype
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", FLOATS)
def test_classification(dtype):
    x = _data(dtype)
    for fn, ref in [(of.ops.is_nan, np.isnan), (of.ops.is_inf, np.isinf)]:
        y = fn(x).numpy()
        assert y.dtype == np.bool_
        np.testing.assert_array_equal(y, ref(x))


def test_shapes_are_kept():
    x = RNG.standard_normal((2, 3, 4))
    for fn in (of.ops.erf, of.ops.floor, of.ops.ceil, of.ops.round, of.ops.sign, of.ops.is_nan, of.ops.is_inf):
        assert fn(x).shape == (2, 3, 4)
        assert fn(np.float32(1.5)).shape == ()


def test_erf_gradient_is_the_gaussian():
    x = np.linspace(-3, 3, 13)
    tx = of.tensor(x, requires_grad=True)
    of.ops.erf(tx).sum().backward()
    g = tx.grad.numpy()
    np.testing.assert_allclose(g, 2 / np.sqrt(np.pi) * np.exp(-x * x), rtol=1e-12)


@pytest.mark.parametrize("fn", ["erf", "floor", "ceil", "round", "is_nan", "is_inf"])
def test_integer_inputs_are_refused(fn):
    with pytest.raises(errors.OpError, match="(?i)int32|dtype|type"):
        getattr(of.ops, fn)(np.arange(3, dtype=np.int32))
