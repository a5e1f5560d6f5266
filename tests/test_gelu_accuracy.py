"""The standalone Gelu's accuracy (issue 25): float32 runs the vector GELU,
float64 erfc in double; both against x/2 erfc(-x/sqrt 2) in double, and the
oracle tolerance test_bad_input uses must still reject a wrong GELU."""
import math
import pathlib
import sys

import numpy as np
import pytest

import opforge as of

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from robustness_oracles import TOLERANCES, gelu  # noqa: E402

X = np.concatenate([np.linspace(-14, 14, 56001), [0.0, -0.0, 1e-30, -1e-30, 3.4e38, -3.4e38]])


def _reference(x):
    return np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float64)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_within_its_tolerance_everywhere(dtype):
    x = X.astype(dtype)
    rtol, atol = TOLERANCES["Gelu"][np.dtype(dtype).name]
    got = of.gelu(x).numpy()
    np.testing.assert_allclose(got.astype(np.float64), _reference(x).astype(dtype), rtol=rtol, atol=atol)
    # the negative tail keeps its relative precision (1 + erf would give 0 or garbage below -8)
    tail = (x > -10) & (x < -6)
    rel = np.abs(got[tail] - _reference(x[tail])) / np.abs(_reference(x[tail]))
    assert rel.max() < (1e-5 if dtype == np.float32 else 1e-13)
    special = of.gelu(np.array([np.inf, np.nan, -0.0], dtype)).numpy()
    assert special[0] == np.inf and np.isnan(special[1]) and special[2] == 0


def test_gelu_tolerance_catches_a_wrong_gelu():
    x = X.astype(np.float32)
    want = gelu(x)
    rtol, atol = TOLERANCES["Gelu"]["float32"]
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        sigmoid_form = x64 / (1 + np.exp(-1.702 * x64))
    wrong = {
        "tanh form": 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3))),
        "1 + erf form in float32": x * 0.5 * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x64], np.float32)),
        "sigmoid form": sigmoid_form,
    }
    for name, w in wrong.items():
        with pytest.raises(AssertionError):
            np.testing.assert_allclose(w.astype(np.float32).astype(np.float64), want.astype(np.float64), rtol=rtol,
                                       atol=atol, err_msg=name)
