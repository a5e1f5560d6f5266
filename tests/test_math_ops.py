"""Tests of the math op group against numpy as the oracle."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import opforge as of

gen = of.ops.gen_math_ops

FLOATS = [np.float32, np.float64]
INTS = [np.int32, np.int64]
NUMERIC = FLOATS + INTS
ALL = NUMERIC + [np.bool_]

# (x shape, y shape): same shape, trailing/leading broadcasts, scalars, empty.
BROADCAST_SHAPES = [
    ((2, 3), (2, 3)),
    ((2, 3), (3,)),
    ((3,), (2, 3)),
    ((4, 1, 3), (2, 1)),
    ((3, 1), (1, 4)),
    ((2, 1, 4, 1), (3, 1, 5)),
    ((1,), (3,)),
    ((1, 5), (5,)),
    ((), (5,)),
    ((5,), ()),
    ((), ()),
    ((0, 3), (3,)),
    ((0, 3), (1, 3)),
    ((2, 0), ()),
]

# Big enough to be split across the intra-op thread pool.
LARGE_SHAPES = [
    ((513, 1031), (513, 1031)),
    ((513, 1031), (1031,)),
    ((513, 1031), (513, 1)),
    ((513, 1031), ()),
    ((), (513, 1031)),
    ((7, 1, 5003), (1, 13, 1)),
]

rng = np.random.default_rng(0)


def make(shape, dtype, lo=-10, hi=10):
    """Random values of `dtype`; floats avoid exact zero, ints span [lo, hi)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "i":
        return rng.integers(lo, hi, size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def run(name, *args):
    return getattr(gen, name)(*args).numpy()


def check_exact(got, want):
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


def check_close(got, want, dtype):
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if np.dtype(dtype) == np.float32:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def dtype_id(dt):
    return np.dtype(dt).name


# ---------------------------------------------------------------- binary ops

BINARY = {
    "add": (np.add, NUMERIC),
    "sub": (np.subtract, NUMERIC),
    "mul": (np.multiply, NUMERIC),
    "div": (np.true_divide, FLOATS),
    "maximum": (np.maximum, NUMERIC),
    "minimum": (np.minimum, NUMERIC),
}
BINARY_CASES = [(op, dt) for op, (_, dts) in BINARY.items() for dt in dts]


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
@pytest.mark.parametrize("op,dtype", BINARY_CASES, ids=lambda v: dtype_id(v) if isinstance(v, type) else v)
def test_binary(op, dtype, shapes):
    fn, _ = BINARY[op]
    x, y = make(shapes[0], dtype), make(shapes[1], dtype)
    check_exact(run(op, x, y), fn(x, y))


@pytest.mark.parametrize("shapes", LARGE_SHAPES, ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "minimum"])
def test_binary_large(op, shapes):
    fn, _ = BINARY[op]
    for dtype in [np.float32, np.int64] if op != "div" else [np.float64]:
        x, y = make(shapes[0], dtype), make(shapes[1], dtype)
        check_exact(run(op, x, y), fn(x, y))


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES + LARGE_SHAPES[1:2], ids=str)
@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
def test_pow(dtype, shapes):
    if np.dtype(dtype).kind == "i":
        x, y = make(shapes[0], dtype, -10, 10), make(shapes[1], dtype, 0, 6)
        check_exact(run("pow", x, y), np.power(x, y))
    else:
        x, y = make(shapes[0], dtype, 0.1, 4), make(shapes[1], dtype, -3, 3)
        check_close(run("pow", x, y), np.power(x, y), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_pow_float_edge_cases(dtype):
    x = np.array([-2, -2, 0, 0, 1, np.nan, 2, -1], dtype=dtype)
    y = np.array([3, 0.5, 0, -1, np.nan, 0, np.inf, np.inf], dtype=dtype)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    check_close(run("pow", x, y), want, dtype)


@pytest.mark.parametrize("dtype", INTS, ids=dtype_id)
def test_pow_int_edge_cases(dtype):
    info = np.iinfo(dtype)
    x = np.array([0, 1, -1, -1, 2, 3, 7, info.max, info.min], dtype=dtype)
    y = np.array([0, 100, 3, 4, info.bits - 1, info.bits, 33, 2, 2], dtype=dtype)
    check_exact(run("pow", x, y), np.power(x, y))


@pytest.mark.parametrize("dtype", INTS, ids=dtype_id)
def test_pow_int_negative_exponent_is_error(dtype):
    x = np.array([1, 2, 3], dtype=dtype)
    y = np.array([2, -1, 0], dtype=dtype)
    with pytest.raises(ValueError):  # numpy's own behaviour
        np.power(x, y)
    with pytest.raises(of.errors.InvalidArgumentError, match="Pow") as e:
        run("pow", x, y)
    assert "'y'" in str(e.value)
    # Broadcast scalar exponent too.
    with pytest.raises(of.errors.InvalidArgumentError, match="Pow"):
        run("pow", x, np.array(-2, dtype=dtype))


@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_max_min_propagate_nan(op, dtype):
    fn, _ = BINARY[op]
    x = np.array([np.nan, 1, np.nan, 2, -np.inf, np.inf, 5], dtype=dtype)
    y = np.array([1, np.nan, np.nan, 3, np.nan, 1, np.inf], dtype=dtype)
    got = run(op, x, y)
    check_exact(got, fn(x, y))
    assert np.isnan(got[[0, 1, 2, 4]]).all()
    # Scalar NaN on either side.
    check_exact(run(op, x, np.array(np.nan, dtype=dtype)), fn(x, np.array(np.nan, dtype=dtype)))
    check_exact(run(op, np.array(np.nan, dtype=dtype), y), fn(np.array(np.nan, dtype=dtype), y))


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_div_by_zero(dtype):
    x = np.array([1, -1, 0, np.nan], dtype=dtype)
    y = np.zeros(4, dtype=dtype)
    with np.errstate(all="ignore"):
        want = x / y
    check_exact(run("div", x, y), want)


@pytest.mark.parametrize("dtype", INTS, ids=dtype_id)
def test_integer_wraparound(dtype):
    info = np.iinfo(dtype)
    big = np.array([info.max, info.min, info.max, -1], dtype=dtype)
    other = np.array([1, -1, info.max, info.min], dtype=dtype)
    with np.errstate(all="ignore"):
        check_exact(run("add", big, other), big + other)
        check_exact(run("sub", big, other), big - other)
        check_exact(run("mul", big, other), big * other)
        check_exact(run("neg", big), -big)
        check_exact(run("abs", big), np.abs(big))
        check_exact(run("square", big), np.square(big))
    assert run("add", np.array([info.max], dtype=dtype), np.array([1], dtype=dtype))[0] == info.min


# ----------------------------------------------------------------- unary ops

UNARY = {
    "neg": (np.negative, NUMERIC),
    "abs": (np.abs, NUMERIC),
    "square": (np.square, NUMERIC),
    "relu": (lambda x: np.maximum(x, np.zeros((), x.dtype)), NUMERIC),
    "exp": (np.exp, FLOATS),
    "log": (np.log, FLOATS),
    "sqrt": (np.sqrt, FLOATS),
    "sin": (np.sin, FLOATS),
    "cos": (np.cos, FLOATS),
    "tanh": (np.tanh, FLOATS),
    "sigmoid": (None, FLOATS),
}
EXACT_UNARY = {"neg", "abs", "square", "relu", "sqrt"}
UNARY_CASES = [(op, dt) for op, (_, dts) in UNARY.items() for dt in dts]
UNARY_SHAPES = [(), (0,), (0, 3), (7,), (3, 4, 5), (300, 401)]


def sigmoid_oracle(x):
    """Stable float64 logistic, cast back to x's dtype."""
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(-np.abs(x64))
        r = np.where(x64 >= 0, 1 / (1 + e), e / (1 + e))
    return r.astype(x.dtype)


def unary_oracle(op, x):
    if op == "sigmoid":
        return sigmoid_oracle(x)
    with np.errstate(all="ignore"):
        return UNARY[op][0](x)


def unary_input(op, shape, dtype):
    if op == "log":
        return make(shape, dtype, 0.01, 50)
    if op == "exp":
        return make(shape, dtype, -20, 20)
    if op == "square" and np.dtype(dtype).kind == "i":
        return make(shape, dtype, -1000, 1000)
    return make(shape, dtype, -10, 10)


@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("op,dtype", UNARY_CASES, ids=lambda v: dtype_id(v) if isinstance(v, type) else v)
def test_unary(op, dtype, shape):
    x = unary_input(op, shape, dtype)
    want = unary_oracle(op, x)
    if op in EXACT_UNARY:
        check_exact(run(op, x), want)
    else:
        check_close(run(op, x), want, dtype)


@pytest.mark.parametrize("op", ["exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "abs", "neg", "square"])
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_unary_special_values(op, dtype):
    x = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 700, -700],
                 dtype=dtype)
    got = run(op, x)
    want = unary_oracle(op, x)
    if dtype == np.float32 and op == "sigmoid":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-40)
    else:
        check_close(got, want, dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_sigmoid_is_stable(dtype):
    x = np.array([-1e6, -1000, -100, -50, -20, 0, 20, 50, 100, 1000, 1e6, np.inf, -np.inf],
                 dtype=dtype)
    got = run("sigmoid", x)
    assert not np.isnan(got).any()
    assert ((got >= 0) & (got <= 1)).all()
    assert got[0] == 0 and got[-3] == 1 and got[-2] == 1 and got[-1] == 0
    assert got[5] == 0.5
    np.testing.assert_allclose(got, sigmoid_oracle(x), rtol=1e-6, atol=1e-40)
    assert np.isnan(run("sigmoid", np.array([np.nan], dtype=dtype))).all()


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_relu_nan_and_sign(dtype):
    x = np.array([np.nan, -1, 0, 2, -np.inf, np.inf], dtype=dtype)
    check_exact(run("relu", x), np.maximum(x, dtype(0)))


# -------------------------------------------------------------- comparisons

COMPARE = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
}


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL, ids=dtype_id)
@pytest.mark.parametrize("op", list(COMPARE))
def test_compare(op, dtype, shapes):
    # Small value range so that equality happens often.
    x, y = make(shapes[0], dtype, -2, 3), make(shapes[1], dtype, -2, 3)
    if np.dtype(dtype).kind == "f":
        x, y = np.round(x), np.round(y)
    check_exact(run(op, x, y), COMPARE[op](x, y))


@pytest.mark.parametrize("op", list(COMPARE))
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_compare_nan(op, dtype):
    x = np.array([np.nan, 1, np.nan, np.inf, -np.inf], dtype=dtype)
    y = np.array([1, np.nan, np.nan, np.inf, np.nan], dtype=dtype)
    check_exact(run(op, x, y), COMPARE[op](x, y))


@pytest.mark.parametrize("shapes", LARGE_SHAPES, ids=str)
def test_compare_large(shapes):
    x, y = make(shapes[0], np.int32, 0, 3), make(shapes[1], np.int32, 0, 3)
    check_exact(run("less", x, y), x < y)
    check_exact(run("equal", x, y), x == y)


# ------------------------------------------------------------------ logical

LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or}


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES + LARGE_SHAPES[:3], ids=str)
@pytest.mark.parametrize("op", list(LOGICAL))
def test_logical_binary(op, shapes):
    x, y = make(shapes[0], np.bool_), make(shapes[1], np.bool_)
    check_exact(run(op, x, y), LOGICAL[op](x, y))


@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
def test_logical_not(shape):
    x = make(shape, np.bool_)
    check_exact(run("logical_not", x), np.logical_not(x))


def test_logical_truth_table():
    x = np.array([False, False, True, True])
    y = np.array([False, True, False, True])
    check_exact(run("logical_and", x, y), [False, False, False, True])
    check_exact(run("logical_or", x, y), [False, True, True, True])
    check_exact(run("logical_not", x), [True, True, False, False])


# ------------------------------------------------------------------- select

SELECT_SHAPES = [
    ((2, 3), (2, 3), (2, 3)),
    ((2, 3), (3,), ()),
    ((3, 1), (1, 4), (4,)),
    ((), (2, 3), (2, 3)),
    ((2, 1, 3), (4, 1), (1, 1, 1)),
    ((), (), ()),
    ((0, 3), (3,), (1, 3)),
    ((5,), (), ()),
    ((301, 257), (301, 257), (301, 257)),
    ((301, 1), (257,), ()),
]


@pytest.mark.parametrize("shapes", SELECT_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL, ids=dtype_id)
def test_select(dtype, shapes):
    c = make(shapes[0], np.bool_)
    x, y = make(shapes[1], dtype), make(shapes[2], dtype)
    check_exact(run("select", c, x, y), np.where(c, x, y))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "uint8", "int16", "uint16", "uint32", "uint64"])
def test_select_copies_the_bits_of_every_element_size(dtype):
    # Select runs one loop per element size (1, 2, 4, 8 bytes) for all dtypes:
    # the chosen elements must come back bit for bit, NaN payloads and -0 too.
    np_dtype = pytest.importorskip("ml_dtypes").bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(3)
    size = np.dtype(np_dtype).itemsize
    bits = np.dtype(f"u{size}")
    x = rng.integers(0, np.iinfo(bits).max, (4, 33), dtype=bits, endpoint=True).view(np_dtype)
    y = rng.integers(0, np.iinfo(bits).max, (33,), dtype=bits, endpoint=True).view(np_dtype)
    c = rng.random((3, 1, 33)) < 0.5
    got = np.asarray(of.select(c, x, y).numpy())
    assert got.dtype == np.dtype(np_dtype)
    np.testing.assert_array_equal(got.view(bits), np.where(c, x, y).view(bits))


def test_where_facade_alias():
    if not hasattr(of, "where"):
        pytest.skip("facade has no `where` yet")
    c = np.array([True, False, True])
    x = np.array([1.0, 2.0, 3.0])
    check_exact(of.where(c, x, -x).numpy(), np.where(c, x, -x))


# ------------------------------------------------- scalars, lists, chaining


@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
def test_python_int_scalar_takes_partner_dtype(dtype):
    x = make((2, 3), dtype)
    check_exact(run("add", x, 2), x + np.asarray(2, dtype=dtype))
    check_exact(run("sub", 2, x), np.asarray(2, dtype=dtype) - x)
    check_exact(run("maximum", x, 0), np.maximum(x, np.asarray(0, dtype=dtype)))
    check_exact(run("less", x, 3), x < np.asarray(3, dtype=dtype))


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_python_float_scalar_takes_partner_dtype(dtype):
    x = make((4,), dtype)
    check_exact(run("mul", x, 1.5), x * np.asarray(1.5, dtype=dtype))
    check_exact(run("div", 1.5, x), np.asarray(1.5, dtype=dtype) / x)
    c = x > 0
    check_exact(run("select", c, x, 0.0), np.where(c, x, np.asarray(0.0, dtype=dtype)))


@pytest.mark.parametrize("dtype", INTS, ids=dtype_id)
def test_python_float_with_int_tensor_is_error(dtype):
    x = make((3,), dtype)
    with pytest.raises(of.errors.InvalidArgumentError):
        run("add", x, 1.5)
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError
        run("mul", 2.5, x)


def test_python_bool_scalar():
    x = np.array([True, False])
    check_exact(run("logical_and", x, True), x)
    check_exact(run("logical_or", x, False), x)
    check_exact(run("equal", x, False), ~x)


def test_nested_lists_and_chaining():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    check_exact(run("add", x, [[10.0, 20.0]]), x + [[10.0, 20.0]])
    t = gen.mul(gen.add(x, x), x)  # Tensors in, Tensors out
    check_exact(t.numpy(), (x + x) * x)
    check_exact(gen.sqrt(t).numpy(), np.sqrt((x + x) * x))


def test_non_contiguous_inputs():
    x = make((6, 8), np.float64)
    y = make((8, 12), np.float64)
    check_exact(run("add", x[:, ::2], y[::2, ::2].T), x[:, ::2] + y[::2, ::2].T)
    check_exact(run("sub", x.T, y[:, :6]), x.T - y[:, :6])


def test_zero_d_results():
    x = np.array(3.0, dtype=np.float32)
    y = np.array(2.0, dtype=np.float32)
    for op, want in [("add", 5.0), ("pow", 9.0), ("div", 1.5), ("maximum", 3.0)]:
        got = run(op, x, y)
        assert got.shape == () and got.dtype == np.float32 and got == want
    got = run("greater", x, y)
    assert got.shape == () and got.dtype == np.bool_ and bool(got)


# -------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "op,args",
    [
        ("add", (np.ones(3, np.float32), np.ones(3, np.float64))),
        ("sub", (np.ones(3, np.int32), np.ones(3, np.int64))),
        ("maximum", (np.ones(3, np.int64), np.ones(3, np.float64))),
        ("less", (np.ones(3, np.float32), np.ones(3, np.int32))),
        ("equal", (np.ones(3, np.bool_), np.ones(3, np.int32))),
        ("select", (np.ones(3, np.bool_), np.ones(3, np.float32), np.ones(3, np.int32))),
    ],
)
def test_mixed_dtypes_promote_by_the_table(op, args):
    # the dtype is the promotion table's (docs/dtype_promotion.md); the values
    # numpy's, computed in that dtype
    strong = [a for a in args if a.dtype != np.bool_] if op == "select" else list(args)
    common = np.dtype(of.result_type(*strong).name)
    got = run(op, *args)
    want = getattr(np, {"select": "where", "sub": "subtract"}.get(op, op))(*[a if op == "select" and k == 0 else a.astype(common)
                                                          for k, a in enumerate(args)])
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["add", "sub", "maximum", "less", "equal"])
def test_no_common_dtype_is_error(op):
    name = "".join(p.capitalize() for p in op.split("_"))
    with pytest.raises(of.errors.InvalidArgumentError, match=f"{name}.*no common dtype"):
        run(op, np.ones(3, np.int64), np.ones(3, np.uint64))


@pytest.mark.parametrize(
    "op,args",
    [
        ("add", (np.ones(3, np.bool_), np.ones(3, np.bool_))),
        ("div", (np.ones(3, np.int32), np.ones(3, np.int32))),
        ("div", (np.ones(3, np.int64), np.ones(3, np.int64))),
        ("pow", (np.ones(3, np.bool_), np.ones(3, np.bool_))),
        ("neg", (np.ones(3, np.bool_),)),
        ("exp", (np.ones(3, np.int32),)),
        ("sigmoid", (np.ones(3, np.int64),)),
        ("sqrt", (np.ones(3, np.bool_),)),
        ("logical_and", (np.ones(3, np.float32), np.ones(3, np.float32))),
        ("logical_not", (np.ones(3, np.int32),)),
        ("select", (np.ones(3, np.int32), np.ones(3), np.ones(3))),
    ],
)
def test_unsupported_dtype_is_error(op, args):
    name = "".join(p.capitalize() for p in op.split("_"))
    with pytest.raises(of.errors.InvalidArgumentError, match=name):
        run(op, *args)


@pytest.mark.parametrize(
    "op,args",
    [
        ("add", (np.ones((2, 3)), np.ones(4))),
        ("mul", (np.ones((2, 3)), np.ones((3, 2)))),
        ("less", (np.ones((0, 3)), np.ones((2, 3)))),
        ("logical_or", (np.ones((2,), np.bool_), np.ones((3,), np.bool_))),
        ("select", (np.ones((2,), np.bool_), np.ones((3,)), np.ones((3,)))),
        ("select", (np.ones((3,), np.bool_), np.ones((3,)), np.ones((2, 2)))),
    ],
)
def test_incompatible_shapes_is_error(op, args):
    name = "".join(p.capitalize() for p in op.split("_"))
    with pytest.raises(of.errors.InvalidArgumentError, match=name):
        run(op, *args)


# ---------------------------------------------------------------- hypothesis


@settings(max_examples=40, deadline=None)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=5, min_side=0, max_side=4),
    op=st.sampled_from(["add", "sub", "mul", "maximum", "minimum"]),
    dtype=st.sampled_from(NUMERIC),
)
def test_binary_broadcast_property(shapes, op, dtype):
    x, y = make(shapes.input_shapes[0], dtype), make(shapes.input_shapes[1], dtype)
    got = run(op, x, y)
    assert got.shape == shapes.result_shape
    check_exact(got, BINARY[op][0](x, y))


@settings(max_examples=30, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=5, min_side=0, max_side=4))
def test_select_broadcast_property(shapes):
    c = make(shapes.input_shapes[0], np.bool_)
    x, y = make(shapes.input_shapes[1], np.int64), make(shapes.input_shapes[2], np.int64)
    got = run("select", c, x, y)
    assert got.shape == shapes.result_shape
    check_exact(got, np.where(c, x, y))


@settings(max_examples=30, deadline=None)
@given(
    x=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=5),
                 elements=st.floats(allow_nan=True, allow_infinity=True)),
)
def test_float_ops_match_numpy_on_any_values(x):
    with np.errstate(all="ignore"):
        check_exact(run("maximum", x, x[::-1] if x.ndim else x), np.maximum(x, x[::-1] if x.ndim else x))
        check_exact(run("relu", x), np.maximum(x, 0.0))
        check_exact(run("abs", x), np.abs(x))
        check_exact(run("less_equal", x, 0.0), x <= 0.0)
        got = run("sigmoid", x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x))
