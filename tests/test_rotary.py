"""ApplyRotaryEmbedding (the importer's fused rotary embedding) against numpy."""

import numpy as np
import pytest

from opforge import errors
from opforge import ops as P

RNG = np.random.default_rng(7)


def reference(x, cos, sin):
    h = x.shape[-1] // 2
    return x * cos + np.concatenate([-x[..., h:], x[..., :h]], axis=-1) * sin


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-6), (np.float64, 1e-14)])
@pytest.mark.parametrize("x_shape,c_shape", [((2, 4, 16, 16), (1, 1, 16, 16)), ((2, 4, 16, 16), (2, 1, 16, 16)),
                                             ((3, 5, 6), (5, 6)), ((7, 2), (2,)), ((2, 3, 4, 8), (3, 1, 8))])
def test_matches_numpy(dtype, tol, x_shape, c_shape):
    x = RNG.standard_normal(x_shape).astype(dtype)
    cos, sin = (RNG.standard_normal(c_shape).astype(dtype) for _ in range(2))
    got = P.apply_rotary_embedding(x, cos, sin).numpy()
    np.testing.assert_allclose(got, reference(x, cos, sin), rtol=tol, atol=tol)


def test_bad_shapes_name_the_op_and_argument():
    x = np.ones((2, 3, 4), np.float32)
    with pytest.raises(errors.InvalidArgumentError, match="ApplyRotaryEmbedding.*'cos'"):
        P.apply_rotary_embedding(x, np.ones((3, 2), np.float32), np.ones((4,), np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="ApplyRotaryEmbedding.*'sin'"):
        P.apply_rotary_embedding(x, np.ones((4,), np.float32), np.ones((2, 3, 3, 4), np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="ApplyRotaryEmbedding.*even"):
        P.apply_rotary_embedding(np.ones((2, 3), np.float32), np.ones((3,), np.float32), np.ones((3,), np.float32))
