"""Tests of the array op group against numpy as the oracle."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import opforge as of

gen = of.ops.gen_array_ops

FLOATS = [np.float32, np.float64]
INTS = [np.int32, np.int64]
ALL = FLOATS + INTS + [np.bool_]

rng = np.random.default_rng(0)


def make(shape, dtype, lo=-10, hi=10):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.kind == "i":
        return np.asarray(rng.integers(lo, hi, size=shape), dtype=dtype)
    return np.asarray(rng.uniform(lo, hi, size=shape), dtype=dtype)


def check(got, want):
    got = got.numpy() if isinstance(got, of.Tensor) else np.asarray(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


def raises(op_name, fn, *args, err=of.errors.InvalidArgumentError, match=None):
    with pytest.raises(err) as info:
        fn(*args)
    assert op_name in str(info.value), str(info.value)
    if match is not None:
        assert match in str(info.value), str(info.value)
    return info


# ---- reshape -----------------------------------------------------------------

RESHAPES = [
    ((2, 3), [6]),
    ((2, 3), [3, 2]),
    ((2, 3), [-1]),
    ((2, 3), [3, -1]),
    ((2, 3, 4), [-1, 4]),
    ((2, 3, 4), [2, 1, -1, 1]),
    ((6,), [1, 2, 1, 3]),
    ((), [1, 1]),
    ((1, 1), []),
    ((), [-1]),
    ((0, 3), [3, 0]),
    ((0, 3), [-1, 5]),
    ((4, 0), [0]),
]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape,new", RESHAPES)
def test_reshape(dtype, shape, new):
    x = make(shape, dtype)
    check(gen.reshape(x, new), x.reshape(new))


@pytest.mark.parametrize("dtype", ALL)
def test_reshape_is_zero_copy(dtype):
    x = make((4, 6), dtype)
    y = of.reshape(x, [2, -1, 3]).numpy()
    assert y.shape == (2, 4, 3)
    assert np.shares_memory(y, x)


@pytest.mark.parametrize("shape,new,match", [
    ((2, 3), [-1, -1], "more than one -1"),
    ((2, 3), [-2, 3], "negative"),
    ((2, 3), [4], "6"),
    ((2, 3), [4, -1], "cannot hold"),
    ((0, 3), [0, -1], "ambiguous"),
])
def test_reshape_errors(shape, new, match):
    info = raises("Reshape", gen.reshape, np.zeros(shape, np.float32), new, match=match)
    assert "'shape'" in str(info.value)


# ---- identity ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3, 4)])
def test_identity(dtype, shape):
    x = make(shape, dtype)
    y = gen.identity(x).numpy()
    check(y, x)
    if x.size:
        assert np.shares_memory(y, x)


# ---- transpose -----------------------------------------------------------------

TRANSPOSES = [
    ((), None),
    ((), []),
    ((5,), None),
    ((5,), [0]),
    ((5,), [-1]),
    ((0,), None),
    ((2, 3), None),
    ((2, 3), [1, 0]),
    ((2, 3), [0, 1]),
    ((0, 3), None),
    ((3, 0, 2), [2, 0, 1]),
    ((2, 3, 4), None),
    ((2, 3, 4), [0, 2, 1]),
    ((2, 3, 4), [1, 0, 2]),
    ((2, 3, 4), [-1, 0, -2]),
    ((2, 1, 3, 1), [3, 2, 1, 0]),
    ((1, 5, 1), [2, 0, 1]),
    ((2, 3, 4, 5), [3, 1, 0, 2]),
    ((2, 3, 4, 5, 2), [4, 3, 2, 1, 0]),
    ((67, 45), None),           # several tiles with ragged edges
    ((3, 70, 33), [0, 2, 1]),   # batched 2-D
    ((300, 513), [1, 0]),       # big enough to go parallel
    ((40, 50, 60), [2, 1, 0]),
]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape,perm", TRANSPOSES)
def test_transpose(dtype, shape, perm):
    x = make(shape, dtype)
    want = np.array(np.transpose(x, perm))
    if perm is None:
        got = gen.transpose(x)
    else:
        got = gen.transpose(x, perm)
    check(got, want)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_transpose_random(data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=5, min_side=0, max_side=5))
    perm = data.draw(st.permutations(range(len(shape))))
    x = make(shape, np.float64)
    check(gen.transpose(x, list(perm)), np.array(np.transpose(x, perm)))


@pytest.mark.parametrize("shape,perm,match", [
    ((2, 3), [0], "entries"),
    ((2, 3), [0, 0], "repeats"),
    ((2, 3), [0, 2], "out of range"),
    ((2, 3), [-3, 0], "out of range"),
    ((), [0], "entries"),
])
def test_transpose_errors(shape, perm, match):
    info = raises("Transpose", gen.transpose, np.zeros(shape, np.int32), perm, match=match)
    assert "'perm'" in str(info.value)


# ---- cast ----------------------------------------------------------------------

def numpy_cast(x, to):
    """numpy astype with the documented rule made explicit for NaN/inf/out of
    range float -> int (numpy's result there is platform-dependent)."""
    to = np.dtype(to)
    if x.dtype.kind == "f" and to.kind == "i":
        info = np.iinfo(to)
        xd = x.astype(np.float64)
        bad = ~(np.isfinite(xd) & (xd >= float(info.min)) & (xd < -float(info.min)))
        with np.errstate(invalid="ignore"):
            out = np.asarray(np.trunc(np.where(bad, 0, xd))).astype(to)
        return np.where(bad, to.type(info.min), out).astype(to)
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(to)


@pytest.mark.parametrize("src,dst", list(itertools.product(ALL, ALL)))
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 4), (1000, 37)])
def test_cast(src, dst, shape):
    x = make(shape, src, lo=-1000, hi=1000)
    y = gen.cast(x, np.dtype(dst))
    assert y.dtype == np.dtype(dst)
    check(y, numpy_cast(x, dst))


@pytest.mark.parametrize("dst", ALL)
def test_cast_accepts_opforge_dtype(dst):
    x = np.array([1.5, -2.5, 0.0], np.float64)
    check(of.cast(x, of.as_dtype(dst)), numpy_cast(x, dst))


@pytest.mark.parametrize("src", FLOATS)
@pytest.mark.parametrize("dst", INTS)
def test_cast_float_to_int_special_values(src, dst):
    info = np.iinfo(dst)
    vals = [np.nan, np.inf, -np.inf, -0.0, 0.0, 2.9, -2.9, 0.5, -0.5, 1e30, -1e30,
            3e9, -3e9, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 63, -(2.0 ** 63), 123456.75]
    x = np.array(vals, dtype=src)
    got = gen.cast(x, np.dtype(dst)).numpy()
    want = numpy_cast(x, dst)
    np.testing.assert_array_equal(got, want)
    assert got[0] == got[1] == got[2] == info.min      # NaN, +inf, -inf
    assert got[5] == 2 and got[6] == -2                 # truncation toward zero


@pytest.mark.parametrize("src", FLOATS)
def test_cast_nan_to_bool_is_true(src):
    x = np.array([np.nan, 0.0, -0.0, 1e-30, -np.inf], dtype=src)
    check(gen.cast(x, np.dtype(np.bool_)), np.array([True, False, False, True, True]))


def test_cast_int_narrowing_wraps():
    x = np.array([2 ** 40 + 5, -(2 ** 40) - 3, 2 ** 31, -(2 ** 31) - 1], np.int64)
    check(gen.cast(x, np.dtype(np.int32)), x.astype(np.int32))


@pytest.mark.parametrize("dtype", ALL)
def test_cast_same_dtype_shares_buffer(dtype):
    x = make((3, 4), dtype)
    y = gen.cast(x, np.dtype(dtype)).numpy()
    check(y, x)
    assert np.shares_memory(y, x)


# ---- fill, zeros_like, ones_like --------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape", [[], [0], [5], [2, 3], [2, 0, 4], [1000, 257]])
def test_fill(dtype, shape):
    v = make((), dtype)
    check(gen.fill(shape, np.asarray(v)), np.full(shape, v, dtype=dtype))


@pytest.mark.parametrize("vshape", [(1,), (1, 1)])
def test_fill_one_element_value(vshape):
    v = np.full(vshape, 3.5, np.float32)
    check(gen.fill([2, 2], v), np.full((2, 2), 3.5, np.float32))


def test_fill_errors():
    info = raises("Fill", gen.fill, [2], np.zeros(2, np.float32))
    assert "'value'" in str(info.value)
    raises("Fill", gen.fill, [2], np.zeros(0, np.float32), match="'value'")
    with pytest.raises(of.errors.InvalidArgumentError):
        gen.fill([2, -1], np.float32(1))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape", [(), (0,), (4,), (3, 5), (600, 301)])
def test_zeros_ones_like(dtype, shape):
    x = make(shape, dtype)
    check(gen.zeros_like(x), np.zeros_like(x))
    check(gen.ones_like(x), np.ones_like(x))


# ---- concat ----------------------------------------------------------------------

CONCATS = [
    ([(3,)], 0),
    ([(3,), (0,)], 0),
    ([(0,), (0,)], 0),
    ([(2,), (3,), (1,)], -1),
    ([(2, 3), (4, 3)], 0),
    ([(2, 3), (2, 5)], 1),
    ([(2, 3), (2, 0), (2, 1)], -1),
    ([(2, 3, 4), (2, 1, 4), (2, 2, 4), (2, 0, 4)], 1),
    ([(2, 3, 4), (2, 3, 1)], 2),
    ([(2, 3, 4), (5, 3, 4), (1, 3, 4)], -3),
    ([(0, 3), (0, 2)], 1),
    ([(500, 300), (500, 301)], 1),  # big enough to go parallel
    ([(3, 200, 300), (3, 100, 300)], 1),
]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shapes,axis", CONCATS)
def test_concat(dtype, shapes, axis):
    xs = [make(s, dtype) for s in shapes]
    check(gen.concat(xs, axis), np.concatenate(xs, axis))


def test_concat_default_axis():
    xs = [make((2, 3), np.float32), make((1, 3), np.float32)]
    check(gen.concat(xs), np.concatenate(xs))


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_concat_random(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=4))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = data.draw(st.integers(1, 4))
    xs = []
    for _ in range(n):
        s = list(shape)
        s[axis] = data.draw(st.integers(0, 4))
        xs.append(make(tuple(s), np.int64))
    check(gen.concat(xs, axis), np.concatenate(xs, axis))


def test_concat_errors():
    f = np.float32
    info = raises("Concat", gen.concat, [np.zeros((2, 3), f), np.zeros((2, 4), f)], 0)
    assert "'values'[1]" in str(info.value)
    info = raises("Concat", gen.concat, [np.zeros((2, 3), f), np.zeros((2, 3), f),
                                         np.zeros((2,), f)], 0)
    assert "'values'[2]" in str(info.value)
    raises("Concat", gen.concat, [np.zeros((), f), np.zeros((), f)], 0, match="'values'")
    raises("Concat", gen.concat, [np.zeros((2,), f)], 1, match="'axis'")
    raises("Concat", gen.concat, [np.zeros((2,), f)], -2, match="'axis'")
    with pytest.raises(of.errors.InvalidArgumentError):
        gen.concat([np.zeros(2, np.float32), np.zeros(2, np.int32)], 0)


# ---- slice -----------------------------------------------------------------------

SLICES = [
    ((5,), [0], [5]),
    ((5,), [1], [3]),
    ((5,), [2], [-1]),
    ((5,), [5], [0]),
    ((5,), [5], [-1]),
    ((0,), [0], [-1]),
    ((), [], []),
    ((4, 6), [1, 2], [2, 3]),
    ((4, 6), [0, 0], [-1, -1]),
    ((4, 6), [1, 0], [2, -1]),
    ((4, 6), [0, 3], [4, 3]),
    ((4, 6), [2, 2], [0, 2]),
    ((3, 4, 5), [1, 1, 1], [2, 2, 2]),
    ((3, 4, 5), [0, 1, 0], [-1, 2, -1]),
    ((2, 3, 4, 5), [1, 0, 2, 1], [1, -1, 2, 3]),
    ((600, 500), [10, 7], [550, 400]),  # big enough to go parallel
]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape,begin,size", SLICES)
def test_slice(dtype, shape, begin, size):
    x = make(shape, dtype)
    idx = tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))
    check(gen.slice(x, begin, size), np.array(x[idx]))


@pytest.mark.parametrize("begin,size,attr", [
    ([0], [1], "begin"),
    ([0, 0], [1], "size"),
    ([-1, 0], [1, 1], "begin"),
    ([5, 0], [0, 1], "begin"),
    ([1, 0], [4, 1], "size"),
    ([0, 0], [1, -2], "size"),
    ([0, 7], [1, 0], "begin"),
    ([0, 6], [1, 1], "size"),
])
def test_slice_errors(begin, size, attr):
    raises("Slice", gen.slice, np.zeros((4, 6), np.float64), begin, size, match=f"'{attr}'")


# ---- dtype checks ------------------------------------------------------------------

def test_wrong_dtype_names_op():
    raises("Identity", gen.identity, np.zeros(3, np.complex64))
