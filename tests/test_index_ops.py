"""The index ops (cpp/ops/index_ops.cc) against numpy: GatherND, ScatterND,
GatherElements, ScatterElements, TopK, NonZero; bad indices and attrs."""

import numpy as np
import pytest

import opforge as of
from opforge import errors

RNG = np.random.default_rng(24)
DTYPES = [np.float32, np.float64, np.int32, np.int64]


def _data(shape, dtype):
    return (RNG.standard_normal(shape) * 10).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES + [np.bool_])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_gather_nd_matches_numpy(dtype, itype):
    x = _data((4, 3, 2), dtype)
    idx = np.array([[[0, 2], [3, -1]], [[1, 0], [2, 1]]], dtype=itype)  # [2, 2, 2]: k = 2
    want = x[tuple(np.moveaxis(idx, -1, 0))]
    np.testing.assert_array_equal(of.gather_nd(x, idx).numpy(), want)
    whole = np.array([[3], [0]], dtype=itype)  # k = 1: whole [3, 2] slices
    np.testing.assert_array_equal(of.gather_nd(x, whole).numpy(), x[[3, 0]])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_matches_numpy(dtype, reduction):
    data = _data((5, 3), dtype)
    idx = np.array([[4], [0], [4]])
    upd = _data((3, 3), dtype)
    want = data.copy()
    for i, row in zip(idx[:, 0], upd):  # in order: with 'none' the last write wins
        want[i] = {"none": lambda a, b: b, "add": np.add, "mul": np.multiply,
                   "max": np.maximum, "min": np.minimum}[reduction](want[i], row)
    got = of.scatter_nd(data, idx, upd, reduction=reduction).numpy()
    np.testing.assert_array_equal(got, want)
    assert not np.shares_memory(got, data)


@pytest.mark.parametrize("dtype", DTYPES + [np.bool_])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_is_take_along_axis(dtype, axis):
    x = _data((3, 4), dtype)
    idx = RNG.integers(0, x.shape[axis], size=(2, 3))
    # indices may be smaller than x in the other dim (ONNX): numpy sees that corner of x.
    corner = x[:2, :] if axis in (1, -1) else x[:, :3]
    want = np.take_along_axis(corner, idx, axis=axis)
    np.testing.assert_array_equal(of.gather_elements(x, idx, axis=axis).numpy(), want)
    np.testing.assert_array_equal(of.gather_elements(x, idx - x.shape[axis], axis=axis).numpy(),
                                  want)  # negative indices wrap


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
def test_scatter_elements_matches_numpy(reduction):
    data = _data((3, 4), np.float64)
    idx = np.array([[1, 3, 1], [0, 0, 2]])
    upd = _data((2, 3), np.float64)
    want = data.copy()
    for (r, c), u in zip(np.ndindex(*idx.shape), upd.reshape(-1)):
        j = idx[r, c]
        want[r, j] = {"none": u, "add": want[r, j] + u, "max": max(want[r, j], u)}[reduction]
    got = of.scatter_elements(data, idx, upd, axis=1, reduction=reduction).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
def test_top_k_matches_a_stable_sort(dtype, largest):
    x = RNG.integers(-3, 4, size=(4, 9)).astype(dtype)  # many ties: the lower index comes first
    for axis in (0, 1):
        k = 3
        key = -x if largest else x
        order = np.argsort(key, axis=axis, kind="stable")
        want_i = np.take(order, np.arange(k), axis=axis)
        v, i = of.top_k(x, k=k, axis=axis, largest=largest)
        np.testing.assert_array_equal(i.numpy(), want_i)
        np.testing.assert_array_equal(v.numpy(), np.take_along_axis(x, want_i, axis=axis))


def test_top_k_puts_nan_above_every_number():
    x = np.array([1.0, np.nan, 3.0, -np.inf], np.float32)
    v, i = of.top_k(x, k=2)
    assert np.isnan(v.numpy()[0]) and i.numpy().tolist() == [1, 2]
    v, i = of.top_k(x, k=2, largest=False)
    assert i.numpy().tolist() == [3, 0]


@pytest.mark.parametrize("dtype", DTYPES + [np.bool_])
def test_nonzero_matches_numpy(dtype):
    x = (RNG.integers(0, 3, size=(3, 4, 2)) * (RNG.random((3, 4, 2)) > 0.4)).astype(dtype)
    np.testing.assert_array_equal(of.nonzero(x).numpy(), np.array(np.nonzero(x)))
    assert of.nonzero(np.zeros((2, 2), dtype)).numpy().shape == (2, 0)


def test_bad_input_names_the_op_and_argument():
    x = np.zeros((3, 2), np.float32)
    with pytest.raises(errors.InvalidArgumentError, match=r"GatherND: argument 'indices' has 3 .*dim 0 of size 3"):
        of.gather_nd(x, np.array([[3]]))
    with pytest.raises(errors.InvalidArgumentError, match=r"ScatterND: argument 'updates'"):
        of.scatter_nd(x, np.array([[1]]), np.zeros((1, 3), np.float32))
    with pytest.raises(errors.InvalidArgumentError, match=r"ScatterElements: attr 'reduction' is 'sum'"):
        of.scatter_elements(x, np.zeros((3, 2), np.int64), x, reduction="sum")
    with pytest.raises(errors.InvalidArgumentError, match=r"GatherElements: argument 'indices' has -4"):
        of.gather_elements(x, np.array([[-4, 0]]), axis=0)
    with pytest.raises(errors.InvalidArgumentError, match=r"TopK: attr 'k' is 3"):
        of.top_k(x, k=3)
    with pytest.raises(errors.InvalidArgumentError, match=r"NonZero: attr 'count' is 1"):
        of.non_zero(np.array([1, 1]), count=1)


def test_scatter_gradients_refuse_what_they_do_not_implement():
    data = of.tensor(np.ones((3, 2)), requires_grad=True)
    y = of.scatter_nd(data, np.array([[1]]), np.full((1, 2), 2.0), reduction="mul")
    with pytest.raises(errors.UnimplementedError, match="ScatterND: the gradient of reduction 'mul'"):
        y.sum().backward()


def test_top_k_gradient_goes_to_the_chosen_elements():
    x = of.tensor(np.array([[0.5, 3.0, 1.0, 2.0]]), requires_grad=True)
    v, _ = of.top_k(x, k=2)
    (v * np.array([[10.0, 1.0]])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 10.0, 0.0, 1.0]])
