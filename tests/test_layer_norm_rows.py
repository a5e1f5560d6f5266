"""The float32 LayerNorm kernel's vector loops (cpp/kernels/layer_norm_rows*): every
row width's tail, constant rows, a tiny epsilon, against float64 numpy."""

import numpy as np
import pytest

import opforge as of

RNG = np.random.default_rng(7)


def _ref(x, w, b, eps):
    x = x.astype(np.float64)
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


@pytest.mark.parametrize("d", [1, 3, 8, 15, 16, 17, 24, 64, 100])
def test_float32_rows_match_float64(d):
    x = (RNG.standard_normal((2, 5, d)) * 3 + 10).astype(np.float32)  # an offset: the two-pass variance
    w, b = RNG.standard_normal(d).astype(np.float32), RNG.standard_normal(d).astype(np.float32)
    x[1, 2] = 4.0  # a constant row: var 0, y = b
    got = of.layer_norm(x, w, b, epsilon=1e-5).numpy()
    np.testing.assert_allclose(got, _ref(x, w, b, 1e-5), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(got[1, 2], b, rtol=0, atol=1e-6)


def test_an_epsilon_below_float_range_on_a_constant_row_stays_finite():
    x = np.zeros((3, 16), np.float32)
    x[0] = RNG.standard_normal(16)
    w, b = np.ones(16, np.float32), np.zeros(16, np.float32)
    got = of.layer_norm(x, w, b, epsilon=1e-45).numpy()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got[0], _ref(x, w, b, 1e-45)[0], rtol=2e-5, atol=2e-5)
