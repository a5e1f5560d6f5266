"""bitwise_ops (BitwiseAnd/Or/Xor/Not, BitShift, BitCast) and trig_ops
(Asin, Acos, Atan, Asinh, Acosh, Atanh) against numpy, every dtype each
claims; the trig gradients are checked in test_gradient_check.py."""

import numpy as np
import pytest

import opforge as of
from opforge import errors

RNG = np.random.default_rng(5)
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def _ints(dtype, shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", INTS + [np.bool_])
@pytest.mark.parametrize("name, ref", [("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                                       ("bitwise_xor", np.bitwise_xor)])
def test_bitwise_binary_matches_numpy(name, ref, dtype):
    if dtype is np.bool_:
        x, y = RNG.random((3, 4)) < 0.5, RNG.random((4,)) < 0.5
    else:
        x, y = _ints(dtype, (3, 4)), _ints(dtype, (4,))  # broadcast
    z = getattr(of.ops, name)(x, y).numpy()
    assert z.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(z, ref(x, y))


@pytest.mark.parametrize("dtype", INTS + [np.bool_])
def test_bitwise_not_matches_numpy(dtype):
    x = RNG.random(7) < 0.5 if dtype is np.bool_ else _ints(dtype, (7,))
    np.testing.assert_array_equal(of.ops.bitwise_not(x).numpy(), np.invert(x))


def _shift_ref(x, n, left):
    bits = x.dtype.itemsize * 8
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        k = int(n[i])
        if not 0 <= k < bits:
            out[i] = -1 if (not left and x[i] < 0) else 0
        elif left:
            out[i] = (int(x[i]) << k) & ((1 << bits) - 1) if x.dtype.kind == "u" else \
                np.array((int(x[i]) << k) & ((1 << bits) - 1), dtype=np.uint64).astype(x.dtype)
        else:
            out[i] = int(x[i]) >> k
    return out


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift_matches_python_ints(dtype, direction):
    x = _ints(dtype, (40,))
    bits = np.dtype(dtype).itemsize * 8
    signed = np.dtype(dtype).kind == "i"
    counts = RNG.integers(-2 if signed else 0, bits + 3, size=40).astype(dtype)  # out-of-range counts too
    z = of.ops.bit_shift(x, counts, direction=direction).numpy()
    assert z.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(z, _shift_ref(x, counts, direction == "LEFT"))


def test_bit_shift_rejects_a_bad_direction():
    with pytest.raises(errors.InvalidArgumentError, match="direction"):
        of.ops.bit_shift(np.uint8([1]), np.uint8([1]), direction="UP")


@pytest.mark.parametrize("src, dst", [(np.float32, np.int32), (np.int32, np.float32), (np.float64, np.uint64),
                                      (np.int8, np.uint8), (np.float16, np.int16), (np.uint16, np.float16)])
def test_bit_cast_matches_view(src, dst):
    x = RNG.standard_normal(9).astype(src) if np.dtype(src).kind == "f" else _ints(src, (9,))
    y = of.ops.bit_cast(x, dtype=np.dtype(dst)).numpy()
    assert y.dtype == np.dtype(dst)
    np.testing.assert_array_equal(y.view(np.uint8), x.view(np.uint8))


def test_bit_cast_refuses_another_width():
    with pytest.raises(errors.InvalidArgumentError, match="BitCast.*x.*float32.*int64"):
        of.ops.bit_cast(np.float32([1.0]), dtype=np.dtype(np.int64))


TRIG = [("asin", np.arcsin, (-1, 1)), ("acos", np.arccos, (-1, 1)), ("atan", np.arctan, (-50, 50)),
        ("asinh", np.arcsinh, (-50, 50)), ("acosh", np.arccosh, (1, 50)), ("atanh", np.arctanh, (-1, 1))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, ref, domain", TRIG)
def test_trig_matches_numpy(name, ref, domain, dtype):
    x = np.concatenate([RNG.uniform(*domain, size=3000), [domain[0], domain[1], 0.0, np.nan, np.inf, -np.inf]])
    x = x.astype(dtype)
    with np.errstate(all="ignore"):
        want = ref(x)
    y = getattr(of.ops, name)(x).numpy()
    assert y.dtype == np.dtype(dtype)
    tol = 2e-7 if dtype == np.float32 else 1e-15
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)


def test_trig_refuses_integers():
    with pytest.raises(errors.OpError, match="(?i)int32|dtype|type"):
        of.ops.asin(np.arange(3, dtype=np.int32))
