"""The Tensor conveniences users expect from numpy: pickle, copies, format,
item assignment, iteration, sizes, dtypes numpy understands."""

import copy
import pickle

import numpy as np
import pytest

import opforge as of


def _tensor(a):
    return of.identity(np.asarray(a))


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_pickle_round_trip(protocol, dtype):
    x = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
    t = of.add(x, x) if dtype != np.bool_ else of.logical_not(x)
    back = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert isinstance(back, of.Tensor) and back.dtype == t.dtype and back.shape == t.shape
    np.testing.assert_array_equal(back.numpy(), t.numpy())
    back[0, 0] = 1  # a writable tensor pickles into a writable one


def test_pickle_protocol5_is_out_of_band_and_zero_copy():
    t = of.add(np.zeros(1000, np.float64), 2.0)
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1 and len(data) < 1000  # the 8000 bytes travel out of band
    back = pickle.loads(data, buffers=buffers)
    np.testing.assert_array_equal(back.numpy(), t.numpy())
    assert np.shares_memory(back.numpy(), t.numpy())  # same process: the very memory


def test_pickle_0d_and_empty():
    for t in (of.sum(np.arange(4.0)), _tensor(np.zeros((0, 3), np.int32))):
        back = pickle.loads(pickle.dumps(t))
        assert back.shape == t.shape and back.dtype == t.dtype
        np.testing.assert_array_equal(back.numpy(), t.numpy())


def test_copy_and_deepcopy_do_not_share_memory():
    t = of.add(np.arange(4.0), 0.0)
    for c in (copy.copy(t), copy.deepcopy(t), t.copy()):
        assert isinstance(c, of.Tensor)
        np.testing.assert_array_equal(c.numpy(), t.numpy())
        assert not np.shares_memory(c.numpy(), t.numpy())
        c[0] = 100
        assert t.numpy()[0] == 0
    nested = copy.deepcopy({"w": [t]})
    np.testing.assert_array_equal(nested["w"][0].numpy(), t.numpy())


def test_format():
    s = of.sum(np.array([1.0, 2.25]))
    assert f"{s:.3f}" == "3.250"
    assert f"{s}" == str(s)
    assert f"{of.sum(np.array([3, 4])):>4d}" == "   7"
    v = _tensor([1.0, 2.0])
    assert f"{v}" == str(np.array([1.0, 2.0]))
    with pytest.raises(TypeError):  # as numpy: a format spec needs a 0-d value
        f"{v:.3f}"


def test_setitem_on_writable_tensor():
    t = of.add(np.zeros((2, 3), np.float32), 0.0)
    t[0] = 5
    t[1, 1:] = [7, 8]
    t[:, 0] = of.tensor(np.array([-1.0, -2.0], np.float32))
    np.testing.assert_array_equal(t.numpy(), [[-1, 5, 5], [-2, 7, 8]])
    x = np.zeros(3)
    borrowed = of.tensor(x)
    borrowed[1] = 4.0  # borrows x, like np.asarray
    assert x[1] == 4.0


def test_setitem_on_read_only_tensor_raises():
    x = np.zeros(3)
    x.flags.writeable = False
    t = of.tensor(x)
    with pytest.raises(of.errors.InvalidArgumentError, match="read-only"):
        t[0] = 1.0
    with pytest.raises((ValueError, TypeError)):
        of.add(np.zeros(3), 0.0)[0] = "abc"


def test_setitem_refuses_tensors_that_require_grad():
    w = of.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(of.errors.InvalidArgumentError, match="requires grad"):
        w[0] = 2.0
    c = w.detach().copy()
    c[0] = 2.0
    assert c.numpy()[0] == 2.0 and w.numpy()[0] == 1.0


def test_iter():
    t = _tensor(np.arange(6).reshape(3, 2))
    rows = list(t)
    assert len(rows) == 3 and all(isinstance(r, of.Tensor) for r in rows)
    np.testing.assert_array_equal(np.stack([r.numpy() for r in rows]), t.numpy())
    assert [int(v) for v in _tensor([4, 5])] == [4, 5]
    with pytest.raises(TypeError, match="0-d"):
        list(of.sum(t))
    with pytest.raises(TypeError):
        iter(of.sum(t))


def test_sizes_and_copy_method():
    t = _tensor(np.zeros((3, 5), np.float32))
    assert t.nbytes == 60 and t.itemsize == 4
    assert _tensor(np.zeros(2, np.int64)).itemsize == 8
    assert of.sum(t).nbytes == 4


def test_numpy_understands_opforge_dtypes():
    assert np.dtype(of.float32) == np.float32
    assert np.zeros(3, dtype=of.float64).dtype == np.float64
    for d in (of.float32, of.float64, of.int32, of.int64, of.bool_):
        assert np.dtype(d) == d.as_numpy_dtype
        assert np.ones(2).astype(d).dtype == d.as_numpy_dtype


def test_tensor_cannot_be_instantiated_directly():
    with pytest.raises(TypeError, match=r"opforge\.tensor"):
        of.Tensor()
    with pytest.raises(TypeError, match=r"opforge\.tensor"):
        of.Tensor([1, 2])
