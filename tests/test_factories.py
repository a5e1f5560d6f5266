"""Factories with PyTorch's names, of.tensor's dtype conversion, of.any / of.all (numpy oracles)."""

import numpy as np
import pytest

import opforge as of
from opforge import _factories, errors


def test_zeros_ones_full_empty():
    for f, v in ((of.zeros, 0), (of.ones, 1)):
        for args in ((2, 3), ((2, 3),), ([2, 3],)):
            t = f(*args)
            assert t.dtype == of.float32 and np.array_equal(t.numpy(), np.full((2, 3), v, np.float32))
    assert of.zeros(4, dtype="int64").dtype == of.int64
    assert of.ones((), dtype=of.float64).shape == ()
    assert of.empty(2, 2).shape == (2, 2)
    assert of.full((2,), 7).dtype == of.int64 and of.full((2,), 7.5).dtype == of.float32
    assert of.full((2,), True).dtype.name == "bool"
    assert np.array_equal(of.full([2, 2], 3.0, dtype="float64").numpy(), np.full((2, 2), 3.0))
    with pytest.raises(errors.InvalidArgumentError, match="negative"):
        of.zeros(2, -1)


def test_like_factories():
    x = of.tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert of.zeros_like(x).dtype == of.int32  # the op: x's dtype
    z = _factories.zeros_like(x, dtype="float64")
    assert z.dtype == of.float64 and z.shape == (2, 3) and not z.numpy().any()
    assert np.array_equal(_factories.ones_like(x, dtype=of.float32).numpy(), np.ones((2, 3), np.float32))
    assert np.array_equal(of.full_like(x, 4).numpy(), np.full((2, 3), 4, np.int32))
    assert of.empty_like(x).shape == (2, 3)
    assert of.rand_like(of.zeros(3, 2)).shape == (3, 2) and of.randn_like(np.zeros(4)).dtype == of.float64


def test_arange_linspace_eye():
    assert np.array_equal(of.arange(5).numpy(), np.arange(5)) and of.arange(5).dtype == of.int64
    assert of.arange(0, 1, 0.25).dtype == of.float32
    np.testing.assert_allclose(of.arange(1, 2, 0.25).numpy(), [1, 1.25, 1.5, 1.75])
    np.testing.assert_allclose(of.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5, dtype=np.float32))
    assert np.array_equal(of.eye(3).numpy(), np.eye(3, dtype=np.float32))
    assert of.eye(2, 3, dtype="int64").numpy().tolist() == [[1, 0, 0], [0, 1, 0]]
    with pytest.raises(errors.InvalidArgumentError, match="step"):
        of.arange(0, 3, 0)
    leaf = of.arange(3.0, requires_grad=True)
    assert leaf.requires_grad and leaf.is_leaf


def test_random_factories_and_manual_seed():
    of.manual_seed(42)
    a, b, c = of.rand(2, 3), of.randn((4,)), of.randint(0, 10, (5,))
    assert a.shape == (2, 3) and a.dtype == of.float32 and b.shape == (4,) and c.dtype == of.int64
    assert np.all((c.numpy() >= 0) & (c.numpy() < 10))
    assert of.randint(3, (2, 2)).numpy().max() < 3  # randint(high, size)
    of.manual_seed(42)
    assert np.array_equal(of.rand(2, 3).numpy(), a.numpy()) and np.array_equal(of.randn(4).numpy(), b.numpy())
    p = of.randperm(10).numpy()
    assert sorted(p.tolist()) == list(range(10))
    assert of.rand(3, requires_grad=True).requires_grad


def test_tensor_converts_dtype():
    a = np.arange(4, dtype=np.float64)
    t = of.tensor(a, dtype=of.float32)
    assert t.dtype == of.float32 and np.array_equal(t.numpy(), a.astype(np.float32))
    assert of.tensor([1, 2, 3], dtype="float64").dtype == of.float64
    assert of.tensor([1.7, -2.2], dtype="int32").numpy().tolist() == [1, -2]  # numpy's (C) truncation
    assert of.tensor(of.tensor([1, 2]), dtype="float32").dtype == of.float32
    assert of.tensor([0, 2], dtype="bool").numpy().tolist() == [False, True]
    same = np.ones(3, np.float32)
    assert np.shares_memory(of.tensor(same, dtype="float32").numpy(), same)  # no copy when it already fits
    g = of.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    assert g.requires_grad and g.dtype == of.float64
    with pytest.raises(errors.InvalidArgumentError, match="non-finite"):
        of.tensor([np.nan], dtype="int64")


@pytest.mark.parametrize("data", [np.array([[0, 1, 0], [0, 0, 0]]), np.array([[1.5, 2.0], [0.0, -1.0]]),
                                  np.array([[True, True], [True, False]]), np.zeros((0, 3))])
def test_any_all(data):
    assert bool(of.any(data)) == bool(np.any(data)) and bool(of.all(data)) == bool(np.all(data))
    if data.ndim == 2 and data.size:
        for dim in (0, 1):
            assert np.array_equal(of.any(data, dim).numpy(), np.any(data, dim))
            assert np.array_equal(of.all(data, dim, keepdim=True).numpy(), np.all(data, dim, keepdims=True))
        t = of.tensor(data)
        assert np.array_equal(t.any(1).numpy(), np.any(data, 1)) and bool(t.all()) == bool(np.all(data))
