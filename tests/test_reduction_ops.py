"""Reduction ops (Sum, Prod, Max, Min, Mean, ArgMax, ArgMin) against numpy."""
import warnings
import zlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import opforge as of
from opforge.ops import gen_reduction_ops as R

ALL_DTYPES = [np.float32, np.float64, np.int32, np.int64]
FLOAT_DTYPES = [np.float32, np.float64]
OPS = {"Sum": R.sum, "Prod": R.prod, "Max": R.max, "Min": R.min, "Mean": R.mean}
ARG_OPS = {"ArgMax": (R.arg_max, np.argmax), "ArgMin": (R.arg_min, np.argmin)}


def _np(t):
    return np.asarray(t.numpy() if isinstance(t, of.Tensor) else t)


def _values(shape, dtype, rng, op="Sum"):
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal(shape)
        if op == "Prod":  # keep long products finite and well conditioned
            x = 1 + 0.05 * x
        return x.astype(dtype)
    lo, hi = (-3, 4) if op == "Prod" else (-1000, 1000)
    return rng.integers(lo, hi, size=shape).astype(dtype)


def _numpy_reduce(op, x, axis, keepdims):
    ax = None if axis is None else tuple(axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if op == "Sum":
            return np.asarray(np.sum(x, axis=ax, keepdims=keepdims, dtype=x.dtype))
        if op == "Prod":
            return np.asarray(np.prod(x, axis=ax, keepdims=keepdims, dtype=x.dtype))
        if op == "Mean":
            return np.asarray(np.mean(x, axis=ax, keepdims=keepdims, dtype=x.dtype))
        if op == "Max":
            return np.asarray(np.max(x, axis=ax, keepdims=keepdims))
        return np.asarray(np.min(x, axis=ax, keepdims=keepdims))


def _check(op, x, got, axis, keepdims):
    want = _numpy_reduce(op, x, axis, keepdims)
    got = _np(got)
    assert got.shape == want.shape
    assert got.dtype == x.dtype
    if x.dtype.kind != "f" or op in ("Max", "Min"):
        np.testing.assert_array_equal(got, want)
        return
    ax = None if axis is None else tuple(axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        x64 = x.astype(np.float64)
        if op == "Prod":
            ref = np.prod(x64, axis=ax, keepdims=keepdims)
            rtol = 1e-5 if x.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(got, ref, rtol=rtol, equal_nan=True)
            return
        ref = (np.sum if op == "Sum" else np.mean)(x64, axis=ax, keepdims=keepdims)
        scale = (np.sum if op == "Sum" else np.mean)(np.abs(x64), axis=ax, keepdims=keepdims)
    eps = 1e-6 if x.dtype == np.float32 else 1e-13
    err = np.abs(got - ref)
    ok = (err <= eps * (np.nan_to_num(scale) + 1e-30)) | (np.isnan(got) & np.isnan(ref))
    assert ok.all(), f"max abs error {np.nanmax(err)}"


# (shape, axis) pairs; axis None = all axes, [] = none.
CASES = [
    ((), None),
    ((), []),
    ((5,), None),
    ((5,), [0]),
    ((5,), [-1]),
    ((3, 4), None),
    ((3, 4), [0]),
    ((3, 4), [1]),
    ((3, 4), [-1, 0]),
    ((3, 4), []),
    ((2, 3, 4), [1]),
    ((2, 3, 4), [0, 2]),
    ((2, 3, 4), [-3, -1]),
    ((2, 1, 3, 1, 4), [1, 3, 4]),
    ((2, 3, 4, 5), [0, 2]),
    ((2, 3, 4, 5), [1, 3]),
    ((2, 3, 4, 5), [3, 0, 1]),
    ((40, 33), [0]),
    ((33, 40), [1]),
    ((7, 300, 5), [1]),
    ((0, 3), [1]),
    ((0, 3), []),
    ((2, 0), [0]),
]
EMPTY_CASES = [((0, 3), [0]), ((0, 3), None), ((2, 0, 3), [0, 1]), ((2, 0), [1]), ((0,), None)]


OP_DTYPES = [(op, dt) for op in OPS for dt in (FLOAT_DTYPES if op == "Mean" else ALL_DTYPES)]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape,axis", CASES)
@pytest.mark.parametrize("op,dtype", OP_DTYPES)
def test_reduce_matches_numpy(op, dtype, shape, axis, keepdims):
    rng = np.random.default_rng(zlib.crc32(repr((op, shape)).encode()))
    x = _values(shape, dtype, rng, op)
    _check(op, x, OPS[op](x, axis, keepdims), axis, keepdims)


def test_defaults_reduce_all_axes():
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert _np(R.sum(x)).shape == ()
    assert _np(R.sum(x)) == 66.0
    assert _np(R.sum(x, keepdims=True)).shape == (1, 1)
    np.testing.assert_array_equal(_np(R.max(x, axis=[1])), [3, 7, 11])


@pytest.mark.parametrize("axis", [1, np.int64(1), (1,), [np.int32(-1)], np.array([1])])
def test_axis_accepts_int_like_and_sequences(axis):
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    np.testing.assert_array_equal(_np(R.sum(x, axis)), [6, 22, 38])
    np.testing.assert_array_equal(_np(R.max(x, axis=axis, keepdims=True)), [[3], [7], [11]])


def test_tensor_input_and_chaining():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y = R.sum(x, [2])
    assert isinstance(y, of.Tensor) and y.shape == (2, 3) and y.dtype == of.float32
    np.testing.assert_array_equal(_np(R.max(y, [0, 1])), 86.0)


@pytest.mark.parametrize("shape,axis", EMPTY_CASES)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_empty_identities(dtype, shape, axis):
    x = np.zeros(shape, dtype)
    _check("Sum", x, R.sum(x, axis), axis, False)
    _check("Prod", x, R.prod(x, axis), axis, False)
    if dtype in FLOAT_DTYPES:
        got = _np(R.mean(x, axis))
        _check("Mean", x, got, axis, False)
        assert np.isnan(got).all()


@pytest.mark.parametrize("shape,axis", EMPTY_CASES)
@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_min_of_nothing_is_an_error(op, shape, axis):
    x = np.zeros(shape, np.float32)
    with pytest.raises(ValueError):  # numpy's behaviour
        _numpy_reduce(op, x, axis, False)
    with pytest.raises(of.errors.InvalidArgumentError, match=op):
        OPS[op](x, axis)


def test_max_min_of_empty_result_with_nonempty_reduction():
    x = np.zeros((0, 3), np.float64)
    for op in ("Max", "Min"):
        got = _np(OPS[op](x, [1]))
        assert got.shape == (0,)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Prod", "Mean"])
def test_nan_propagates(op, dtype):
    rng = np.random.default_rng(7)
    x = _values((6, 50), dtype, rng)
    x[1, 0] = np.nan
    x[2, 49] = np.nan
    x[3, 17] = np.nan
    x[4, :] = np.nan
    for axis in (None, [0], [1], [0, 1]):
        got = _np(OPS[op](x, axis))
        want = _numpy_reduce(op, x, axis, False)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    x = np.full(40, np.inf, dtype)
    x[5] = np.nan
    assert np.isnan(_np(R.max(x))) and np.isnan(_np(R.min(x)))
    assert _np(R.max(np.array([-np.inf, -np.inf], dtype))) == -np.inf


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_sum_and_prod_wrap_like_numpy(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.max, 1, info.max, 5], dtype)
    assert _np(R.sum(x)) == np.sum(x, dtype=dtype)
    assert _np(R.sum(x)).dtype == dtype  # no promotion to int64
    rng = np.random.default_rng(3)
    y = rng.integers(-(2**20), 2**20, size=(37, 40)).astype(dtype)
    for axis in (None, [0], [1]):
        np.testing.assert_array_equal(_np(R.prod(y, axis)), np.prod(y, axis=None if axis is None else tuple(axis), dtype=dtype))
        np.testing.assert_array_equal(_np(R.sum(y, axis)), np.sum(y, axis=None if axis is None else tuple(axis), dtype=dtype))
    assert _np(R.max(np.array([info.min, info.min], dtype))) == info.min
    assert _np(R.min(np.array([info.max], dtype))) == info.max


def test_float32_sum_is_accurate_on_10m_elements():
    rng = np.random.default_rng(11)
    x = rng.random(10_000_000, dtype=np.float32)
    ref = np.sum(x, dtype=np.float64)
    assert abs(float(_np(R.sum(x))) - ref) <= 1e-6 * ref
    assert abs(float(_np(R.mean(x))) - ref / x.size) <= 1e-6 * ref / x.size


@pytest.mark.parametrize(
    "shape,axis",
    [
        ((3, 100_003), [1]),         # long rows: chunked partial sums
        ((100_003, 3), [0]),         # long columns, narrow rows
        ((70_001, 40), [0]),
        ((4, 50_000, 2), [1]),
        ((60, 70, 80), [0, 2]),      # two reduced groups
        ((5, 40_000, 3, 2), [1, 3]),
        ((200_000,), None),
    ],
)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_large_reductions(dtype, shape, axis):
    rng = np.random.default_rng(5)
    x = _values(shape, dtype, rng)
    for op in ("Sum", "Max", "Min") + (("Mean",) if dtype in FLOAT_DTYPES else ()):
        _check(op, x, OPS[op](x, axis), axis, False)


@pytest.mark.parametrize("op", list(OPS))
def test_bad_axis(op):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(of.errors.InvalidArgumentError, match=rf"{op}.*'axis'"):
        OPS[op](x, [2])
    with pytest.raises(of.errors.InvalidArgumentError, match=rf"{op}.*'axis'"):
        OPS[op](x, [-3])
    with pytest.raises(of.errors.InvalidArgumentError, match=rf"{op}.*'axis'"):
        OPS[op](x, [0, -2])  # duplicate, like numpy
    with pytest.raises(of.errors.InvalidArgumentError, match=rf"{op}.*'axis'"):
        OPS[op](np.ones((), np.float32), [0])  # 0-d has no axis 0


@pytest.mark.parametrize("op", list(OPS))
def test_bool_input_is_rejected(op):
    with pytest.raises(of.errors.InvalidArgumentError, match=op):
        OPS[op](np.array([True, False]))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_mean_of_int_is_rejected(dtype):
    with pytest.raises(of.errors.InvalidArgumentError, match="Mean"):
        R.mean(np.arange(4, dtype=dtype))


# ---- ArgMax / ArgMin

ARG_CASES = [
    ((), None), ((), 0), ((), -1),
    ((7,), None), ((7,), 0), ((7,), -1),
    ((3, 4), None), ((3, 4), 0), ((3, 4), 1), ((3, 4), -2),
    ((2, 3, 5), 1), ((2, 3, 5), 2), ((2, 3, 5), None),
    ((50, 600), 0), ((600, 50), 1), ((3, 40_000), 1),
    ((0, 3), 1), ((2, 0, 3), 0),
]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape,axis", ARG_CASES)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op", list(ARG_OPS))
def test_arg_reduce_matches_numpy(op, dtype, shape, axis, keepdims):
    fn, npfn = ARG_OPS[op]
    rng = np.random.default_rng(9)
    x = rng.integers(0, 4, size=shape).astype(dtype)  # many ties: first occurrence wins
    got = _np(fn(x, axis, keepdims))
    want = np.asarray(npfn(x, axis=axis, keepdims=keepdims))
    assert got.dtype == np.int64
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", list(ARG_OPS))
def test_arg_reduce_nan_returns_first_nan(op, dtype):
    fn, npfn = ARG_OPS[op]
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 100)).astype(dtype)
    x[1, 50] = x[1, 70] = np.nan
    x[2, 0] = np.nan
    x[5, 99] = np.nan
    x[6, 3:] = np.inf if op == "ArgMax" else -np.inf
    for axis in (None, 0, 1):
        np.testing.assert_array_equal(_np(fn(x, axis)), npfn(x, axis=axis))
    big = rng.standard_normal(1_000_000).astype(dtype)
    big[777_777] = np.nan
    big[888_888] = np.nan
    assert int(_np(fn(big))) == 777_777


@pytest.mark.parametrize("op", list(ARG_OPS))
def test_arg_reduce_errors(op):
    fn, _ = ARG_OPS[op]
    with pytest.raises(of.errors.InvalidArgumentError, match=rf"{op}.*'axis'"):
        fn(np.ones((2, 3)), 2)
    with pytest.raises(of.errors.InvalidArgumentError, match=rf"{op}.*'axis'"):
        fn(np.ones(()), 1)
    with pytest.raises(of.errors.InvalidArgumentError, match=op):
        fn(np.ones((0, 3)), 0)  # empty reduced axis, like numpy
    with pytest.raises(of.errors.InvalidArgumentError, match=op):
        fn(np.ones((0,)))
    with pytest.raises(of.errors.InvalidArgumentError, match=op):
        fn(np.array([True]))


def test_numpy_aliases():
    x = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    np.testing.assert_array_equal(_np(of.argmax(x, 1)), [1, 0])
    np.testing.assert_array_equal(_np(of.argmin(x, 0)), [0, 1, 0])


# ---- property tests over random shapes and axes

@st.composite
def _shape_and_axes(draw):
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 6), min_size=rank, max_size=rank)))
    axes = None
    if draw(st.booleans()):
        picked = draw(st.lists(st.integers(0, max(rank - 1, 0)), unique=True, max_size=rank)) if rank else []
        axes = [a - rank if draw(st.booleans()) else a for a in picked]
    return shape, axes


@settings(max_examples=40, deadline=None)
@given(_shape_and_axes(), st.sampled_from(ALL_DTYPES), st.sampled_from(["Sum", "Prod", "Max", "Min"]),
       st.booleans())
def test_reduce_property(shape_axes, dtype, op, keepdims):
    shape, axis = shape_axes
    x = _values(shape, dtype, np.random.default_rng(0), op)
    try:
        _numpy_reduce(op, x, axis, keepdims)
    except ValueError:
        with pytest.raises(of.errors.InvalidArgumentError, match=op):
            OPS[op](x, axis, keepdims)
        return
    _check(op, x, OPS[op](x, axis, keepdims), axis, keepdims)
