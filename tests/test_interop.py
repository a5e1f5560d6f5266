"""numpy interop: zero-copy borrowing, lifetimes, conversions, the Tensor API."""

import gc
import sys
import weakref

import numpy as np
import pytest

import opforge as of

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]


@pytest.mark.parametrize("dtype", DTYPES)
def test_contiguous_input_is_borrowed_not_copied(dtype):
    x = np.ones((3, 4), dtype=dtype)
    t = of.identity(x)
    assert np.shares_memory(t.numpy(), x)
    assert t.numpy().ctypes.data == x.ctypes.data


def test_reshape_and_tensor_constructor_share_memory():
    x = np.arange(12, dtype=np.float32)
    assert np.shares_memory(of.reshape(x, (3, -1)).numpy(), x)
    assert np.shares_memory(of.tensor(x).numpy(), x)


def test_numpy_view_of_output_is_zero_copy_and_keeps_tensor_alive():
    t = of.add(np.ones(5, np.float32), 1.0)
    a = t.numpy()
    b = t.numpy()
    assert np.shares_memory(a, b)
    ref = weakref.ref(t)
    del t
    gc.collect()
    # the view's base keeps the tensor alive
    assert ref() is not None
    np.testing.assert_array_equal(a, np.full(5, 2.0, np.float32))
    del a, b
    gc.collect()
    assert ref() is None


def test_borrow_holds_exactly_one_reference_for_the_tensor_lifetime():
    x = np.arange(10, dtype=np.float64)
    base = sys.getrefcount(x)
    t = of.identity(x)
    assert sys.getrefcount(x) == base + 1
    del t
    assert sys.getrefcount(x) == base
    for _ in range(100):
        of.add(x, x)
    assert sys.getrefcount(x) == base


def test_input_array_outlives_python_reference():
    t = of.identity(np.arange(1000, dtype=np.int64))  # the temporary array is kept alive by t
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(1000))


@pytest.mark.parametrize("make", [
    lambda a: a[:, ::2],                                   # strided
    lambda a: a.T,                                         # Fortran order
    lambda a: a.astype(a.dtype.newbyteorder()),            # byte-swapped
    lambda a: np.frombuffer(b"\0" + a.tobytes(), dtype=a.dtype, offset=1).reshape(a.shape),  # misaligned
], ids=["strided", "transposed", "byteswapped", "misaligned"])
def test_awkward_layouts_are_copied_correctly(make):
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    x = make(a)
    np.testing.assert_array_equal(of.add(x, 1.0).numpy(), np.asarray(x) + 1.0)
    np.testing.assert_array_equal(of.identity(x).numpy(), x)


def test_read_only_input_gives_read_only_view():
    x = np.arange(4, dtype=np.float32)
    x.setflags(write=False)
    assert not of.identity(x).numpy().flags.writeable
    np.testing.assert_array_equal(of.mul(x, 2.0).numpy(), x * 2)


def test_output_views_are_writable():
    t = of.zeros_like(np.ones(3))
    v = t.numpy()
    v[0] = 7
    assert t.numpy()[0] == 7


def test_numpy_scalars_and_subclasses():
    assert of.add(np.float32(1.5), np.float32(2)).dtype == of.float32
    m = np.ma.masked_array(np.arange(3.0))
    np.testing.assert_array_equal(of.add(m, 1.0).numpy(), np.arange(3.0) + 1)


@pytest.mark.parametrize("partner,scalar,want", [
    (np.float32, 2, np.float32), (np.float32, 2.5, np.float32), (np.float64, True, np.float64),
    (np.int32, 3, np.int32), (np.int64, -7, np.int64), (np.int32, False, np.int32),
])
def test_python_scalars_take_the_partner_dtype(partner, scalar, want):
    x = np.arange(4).astype(partner)
    got = of.add(x, scalar)
    assert got.dtype == want
    np.testing.assert_array_equal(got.numpy(), (x + np.asarray(scalar).astype(partner)).astype(want))
    assert of.add(scalar, x).dtype == want


def test_lone_scalars_and_lists_use_numpy_natural_dtypes():
    assert of.add(1, 2).dtype == of.int64
    assert of.add(1.0, 2.0).dtype == of.float64
    assert of.logical_and(True, [True, False]).dtype == of.bool_
    np.testing.assert_array_equal(of.add([[1, 2], [3, 4]], 1).numpy(), np.array([[2, 3], [4, 5]]))


def test_lists_take_the_partner_dtype():
    x = np.ones(3, np.float32)
    got = of.add(x, [1, 2, 3])
    assert got.dtype == of.float32
    np.testing.assert_array_equal(got.numpy(), np.array([2, 3, 4], np.float32))


@pytest.mark.parametrize("x,y,needle", [
    (np.ones(3, np.int32), 1.5, "Python float"),
    (np.ones(3, np.int32), 2**40, "out of range for int32"),
    (np.ones(3, np.int32), [1.5, 2.0, 3.0], "float"),
    (np.ones(3, np.int32), [2**40, 1, 1], "out of range"),
    (np.ones(3, np.bool_), 1, "Python int"),
    (np.ones(3, np.float32), "a", "must be an opforge.Tensor"),
    (np.ones(3, np.float32), None, "not NoneType"),
    (np.ones(3, np.float32), [[1, 2], [3]], "rectangular"),
    (np.ones(3, np.int64), np.ones(3, np.uint64), "no common dtype"),  # float32 + float16 promotes
    (np.ones(3, np.float32), np.ones(3, np.complex64), "complex64"),
    (np.ones(3, np.float32), np.array([1, "a"], dtype=object), "object"),
    (np.ones(3, np.int8), np.ones(3, np.uint8), "promote to int16"),  # Add has no int16 kernel
])
def test_unconvertible_inputs_raise_invalid_argument(x, y, needle):
    with pytest.raises(of.errors.InvalidArgumentError, match="Add") as info:
        of.add(x, y)
    assert needle in str(info.value)
    assert "'y'" in str(info.value) or "'x'" in str(info.value)


def test_tensor_properties_and_protocols():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = of.identity(x)
    assert isinstance(t, of.Tensor)
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6 and len(t) == 2
    assert t.dtype == of.int32 and t.dtype == np.int32 and t.dtype.name == "int32"
    np.testing.assert_array_equal(np.asarray(t), x)
    mv = memoryview(t)
    assert mv.format == "i" and mv.shape == (2, 3) and mv.tolist() == x.tolist()
    assert np.shares_memory(np.asarray(mv), x)
    assert t.tolist() == x.tolist()
    assert "opforge.Tensor(" in repr(t) and "int32" in repr(t)
    np.testing.assert_array_equal(t[1].numpy(), x[1])
    assert of.identity(np.float64(2.5)).item() == 2.5
    assert of.identity(np.array(3)).shape == ()
    weakref.ref(t)


def test_tensor_operators_match_numpy():
    a = np.arange(1, 7, dtype=np.float64).reshape(2, 3)
    b = np.full((3,), 2.0)
    ta, tb = of.tensor(a), of.tensor(b)
    for got, want in [
        (ta + tb, a + b), (ta - 1, a - 1), (1 - ta, 1 - a), (ta * tb, a * b), (ta / tb, a / b),
        (2 / ta, 2 / a), (ta ** 2, a ** 2), (-ta, -a), (abs(-ta), a), (ta @ ta.T, a @ a.T),
        (ta < 3, a < 3), (ta >= 3, a >= 3), (ta == tb, a == b), (ta != tb, a != b),
        (a + tb, a + b), (b * ta, b * a),
        ((ta > 2) & (ta < 5), (a > 2) & (a < 5)), ((ta > 2) | (ta < 2), (a > 2) | (a < 2)),
        (~(ta > 2), ~(a > 2)), (ta.sum(axis=1), a.sum(axis=1)), (ta.astype(of.int32), a.astype(np.int32)),
        (ta.reshape(3, 2), a.reshape(3, 2)), (ta.T, a.T), (ta.max(), a.max()),
    ]:
        assert isinstance(got, of.Tensor)
        np.testing.assert_allclose(got.numpy(), want)


def test_empty_and_zero_d_round_trip():
    for shape in [(0,), (2, 0, 3), ()]:
        x = np.zeros(shape, np.float32)
        t = of.identity(x)
        assert t.shape == shape
        np.testing.assert_array_equal(t.numpy(), x)
        assert memoryview(t).shape == shape


def test_dtypes_module():
    assert of.as_dtype("float64") is of.float64
    assert of.as_dtype(np.int32) is of.int32
    assert of.as_dtype(np.dtype(bool)) is of.bool_
    assert of.bool is of.bool_
    with pytest.raises(TypeError):
        of.as_dtype(np.complex64)
