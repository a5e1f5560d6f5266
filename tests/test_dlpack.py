"""DLPack both ways (Tensor.__dlpack__, of.from_dlpack) and protocol inputs.

numpy is the other party (and torch when it is installed): zero copy is
checked by address, lifetimes by dropping the producer before reading.
"""

import array
import gc

import numpy as np
import pytest

import opforge as of

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]


def _address(a):
    return np.asarray(a).__array_interface__["data"][0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_imports_tensor_without_copy(dtype):
    t = of.add(np.arange(6).reshape(2, 3).astype(dtype), np.zeros((2, 3), dtype)) if dtype != np.bool_ \
        else of.logical_not(np.zeros((2, 3), np.bool_))
    a = np.from_dlpack(t)
    assert a.dtype == dtype and a.shape == (2, 3)
    assert _address(a) == _address(t.numpy())
    np.testing.assert_array_equal(a, t.numpy())


def test_tensor_imports_numpy_without_copy_and_keeps_it_alive():
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = of.from_dlpack(x)
    assert isinstance(t, of.Tensor)
    assert _address(t.numpy()) == _address(x)
    expected = x.copy()
    del x
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), expected)


def test_capsule_outlives_its_producer():
    t = of.mul(np.arange(5, dtype=np.float32), 2.0)
    capsule = t.__dlpack__(max_version=(1, 0))
    del t
    gc.collect()

    class Holder:  # np.from_dlpack takes producers, not capsules
        def __dlpack__(self, **kwargs):
            return capsule

        def __dlpack_device__(self):
            return (1, 0)

    np.testing.assert_array_equal(np.from_dlpack(Holder()), np.arange(5, dtype=np.float32) * 2)


def test_versioned_and_legacy_capsules():
    t = of.tensor(np.ones(3, np.float32))
    assert "dltensor_versioned" in repr(t.__dlpack__(max_version=(1, 0)))
    assert "dltensor_versioned" not in repr(t.__dlpack__())  # no max_version: a legacy capsule
    assert t.__dlpack_device__() == (1, 0)


def test_read_only_flag_round_trips():
    x = np.arange(4, dtype=np.int64)
    x.flags.writeable = False
    t = of.tensor(x)
    a = np.from_dlpack(t)  # numpy asks for a versioned capsule, which says read-only
    assert not a.flags.writeable
    with pytest.raises(BufferError):  # a legacy capsule cannot say read-only
        t.__dlpack__()
    back = of.from_dlpack(a)
    with pytest.raises(ValueError):
        back[0] = 1


def test_copy_and_device_keywords():
    t = of.add(np.zeros(3, np.float32), 1.0)
    copied = np.from_dlpack(t, copy=True)
    assert _address(copied) != _address(t.numpy())
    assert _address(np.from_dlpack(t, copy=False)) == _address(t.numpy())
    assert _address(of.from_dlpack(t, copy=True).numpy()) != _address(t.numpy())
    assert _address(of.from_dlpack(t).numpy()) == _address(t.numpy())
    np.from_dlpack(t, device="cpu")
    with pytest.raises(BufferError):
        t.__dlpack__(stream=1)
    with pytest.raises((ValueError, BufferError)):
        t.__dlpack__(dl_device=(2, 0))  # CUDA


def test_ops_accept_dlpack_producers():
    class Producer:  # only DLPack, nothing else numpy could read
        def __init__(self, a):
            self._a = a

        def __dlpack__(self, **kwargs):
            return self._a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self._a.__dlpack_device__()

    x = np.arange(4, dtype=np.float32)
    t = of.identity(Producer(x))
    assert _address(t.numpy()) == _address(x)


def test_ops_accept_buffers_and_array_interfaces_without_copy():
    x = np.arange(6, dtype=np.float64)
    t = of.identity(memoryview(x))
    assert _address(t.numpy()) == _address(x)
    np.testing.assert_array_equal(of.add(memoryview(x), 1.0).numpy(), x + 1)

    buf = array.array("d", [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(of.mul(buf, 2.0).numpy(), [2.0, 4.0, 6.0])
    assert _address(of.identity(buf).numpy()) == buf.buffer_info()[0]

    class Interface:
        def __init__(self, a):
            self.__array_interface__ = a.__array_interface__
            self._keep = a

    y = np.arange(4, dtype=np.int32)
    assert _address(of.identity(Interface(y)).numpy()) == _address(y)

    class ArrayLike:
        def __array__(self, dtype=None, copy=None):
            return np.array([1.5, 2.5])

    np.testing.assert_array_equal(of.neg(ArrayLike()).numpy(), [-1.5, -2.5])


def test_protocol_inputs_are_checked():
    with pytest.raises(of.errors.InvalidArgumentError, match=r"Add: argument 'x'.*uint8"):
        of.add(memoryview(b"abc"), 1)
    with pytest.raises(of.errors.InvalidArgumentError, match=r"Add: argument 'x'.*dtype"):
        of.add(b"abc", 1)

    class Broken:
        def __array__(self, dtype=None, copy=None):
            raise RuntimeError("no data today")

    with pytest.raises(of.errors.InvalidArgumentError, match=r"argument 'y'.*no data today"):
        of.add(np.ones(2), Broken())

    class NotCPU:
        def __dlpack__(self, **kwargs):
            raise BufferError("device memory")

        def __dlpack_device__(self):
            return (2, 0)

    with pytest.raises(of.errors.InvalidArgumentError, match="argument 'x'"):
        of.neg(NotCPU())
    with pytest.raises(of.errors.InvalidArgumentError, match="must be an opforge.Tensor"):
        of.neg(object())


def test_torch_both_ways():
    torch = pytest.importorskip("torch")
    t = of.add(np.arange(6, dtype=np.float32).reshape(2, 3), 1.0)
    tt = torch.from_dlpack(t)
    assert tt.data_ptr() == _address(t.numpy())
    np.testing.assert_array_equal(tt.numpy(), t.numpy())
    src = torch.arange(5, dtype=torch.float64)
    back = of.from_dlpack(src)
    assert _address(back.numpy()) == src.data_ptr()
    np.testing.assert_array_equal(of.mul(src, 2.0).numpy(), src.numpy() * 2)  # as an op input
