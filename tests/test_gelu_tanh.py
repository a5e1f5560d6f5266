"""GeluTanh (the tanh form of GELU in one pass, cpp/kernels/gelu_tanh*) against a
float64 numpy reference: every vector width's tail, the far tails, inf and NaN."""

import numpy as np
import pytest

import opforge as of
from opforge import errors


def _ref(x):
    # x * sigmoid(2z) = 0.5 x (1 + tanh z), without the latter's cancellation
    # in the negative tail (0.7 % off at x = -7 even in double).
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return x / (1 + np.exp(-2 * np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


@pytest.mark.parametrize("n", [1, 7, 8, 15, 16, 17, 33, 1000])
def test_float32_matches_the_float64_formula(n):
    x = np.linspace(-12, 12, n).astype(np.float32) if n > 1 else np.array([0.7], np.float32)
    got = of.ops.gelu_tanh(x).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _ref(x), rtol=2e-5, atol=1e-30)  # (u's rounding times |u|)


def test_far_tails_inf_nan_and_float64():
    x = np.array([-1e4, -50.0, -10.0, -1e-30, 0.0, 1e-30, 10.0, 50.0, 1e4, np.inf, -np.inf, np.nan] * 2,
                 np.float32)
    got = of.ops.gelu_tanh(x).numpy()
    want = _ref(x)
    want[np.isneginf(x)] = np.nan  # -inf * 0, as 0.5 x (1 + tanh z) (the exported graph) gives
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-30, equal_nan=True)
    x64 = np.random.default_rng(3).standard_normal((3, 5)) * 4
    np.testing.assert_allclose(of.ops.gelu_tanh(x64).numpy(), _ref(x64), rtol=1e-14, atol=1e-15)


def test_integer_input_names_the_op():
    with pytest.raises(errors.OpError, match="GeluTanh"):
        of.ops.gelu_tanh(np.arange(4, dtype=np.int32))
