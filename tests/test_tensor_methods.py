"""PyTorch's Tensor methods (numpy oracles; PyTorch itself where installed) and in-place rules."""

import numpy as np
import pytest

import opforge as of
from opforge import errors

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal((4, 2)).astype(np.float32)


def _t(a):
    return of.tensor(np.array(a))


def test_math_methods():
    a = _t(A)
    np.testing.assert_allclose(a.mm(B).numpy(), A @ B, rtol=1e-5)
    np.testing.assert_allclose(a.matmul(B).numpy(), A @ B, rtol=1e-5)
    np.testing.assert_allclose(_t(np.abs(A)).pow(1.5).numpy(), np.abs(A) ** 1.5, rtol=1e-5)
    np.testing.assert_allclose(a.clamp(-0.5, 0.5).numpy(), np.clip(A, -0.5, 0.5))
    np.testing.assert_allclose(a.clamp(min=0).numpy(), np.maximum(A, 0))
    np.testing.assert_allclose(a.clamp(max=0).numpy(), np.minimum(A, 0))
    for name, ref in (("exp", np.exp), ("tanh", np.tanh), ("relu", lambda x: np.maximum(x, 0)),
                      ("sigmoid", lambda x: 1 / (1 + np.exp(-x)))):
        np.testing.assert_allclose(getattr(a, name)().numpy(), ref(A), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_t(np.abs(A) + 1).log().numpy(), np.log(np.abs(A) + 1), rtol=1e-5)
    np.testing.assert_allclose(_t(np.abs(A)).sqrt().numpy(), np.sqrt(np.abs(A)), rtol=1e-5)
    e = np.exp(A - A.max(1, keepdims=True))
    np.testing.assert_allclose(a.softmax(1).numpy(), e / e.sum(1, keepdims=True), rtol=1e-5)
    with pytest.raises(errors.InvalidArgumentError, match="2-D"):
        _t(np.ones(3, np.float32)).mm(B)
    with pytest.raises(errors.InvalidArgumentError, match="clamp"):
        a.clamp()


def test_reductions_torch_and_numpy_spelling():
    a = _t(A)
    assert abs(float(a.sum()) - A.sum()) < 1e-4
    np.testing.assert_allclose(a.sum(1).numpy(), A.sum(1), rtol=1e-5)
    np.testing.assert_allclose(a.sum(dim=0, keepdim=True).numpy(), A.sum(0, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(a.sum(axis=0, keepdims=True).numpy(), A.sum(0, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(a.mean(1).numpy(), A.mean(1), rtol=1e-5)
    assert float(a.max()) == A.max() and float(a.min()) == A.min()
    values, indices = a.max(1)
    assert np.array_equal(values.numpy(), A.max(1)) and np.array_equal(indices.numpy(), A.argmax(1))
    values, indices = a.min(dim=0, keepdim=True)
    assert np.array_equal(values.numpy(), A.min(0, keepdims=True))
    assert np.array_equal(a.max(axis=1).numpy(), A.max(1))  # numpy's keyword: values only
    assert np.array_equal(a.max(_t(np.zeros_like(A))).numpy(), np.maximum(A, 0))
    assert int(a.argmax()) == A.argmax() and np.array_equal(a.argmin(0).numpy(), A.argmin(0))
    assert np.array_equal(a.argmax(1, keepdim=True).numpy(), A.argmax(1)[:, None])


def test_comparisons():
    a, b = _t(A), _t(A.T.copy().T * 0 + 0.1)
    for name, ref in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                      ("gt", np.greater), ("ge", np.greater_equal)):
        assert np.array_equal(getattr(a, name)(0.1).numpy(), ref(A, np.float32(0.1)))
        assert np.array_equal(getattr(a, name)(b).numpy(), ref(A, np.float32(0.1)))
    assert a.equal(A.copy()) and not a.equal(A[:2])


def test_shape_methods():
    x = _t(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    X = x.numpy()
    assert x.view(6, 4).shape == (6, 4) and x.view((4, -1)).shape == (4, 6) and x.view(-1).shape == (24,)
    assert x.view_as(np.zeros((3, 8))).shape == (3, 8)
    assert x.flatten().shape == (24,) and x.flatten(1).shape == (2, 12) and x.flatten(0, 1).shape == (6, 4)
    y = _t(np.zeros((1, 3, 1)))
    assert y.squeeze().shape == (3,) and y.squeeze(0).shape == (3, 1) and y.squeeze(1).shape == (1, 3, 1)
    assert x.unsqueeze(0).shape == (1, 2, 3, 4) and x.unsqueeze(-1).shape == (2, 3, 4, 1)
    assert np.array_equal(x.permute(2, 0, 1).numpy(), X.transpose(2, 0, 1))
    assert np.array_equal(x.permute((1, 0, 2)).numpy(), X.transpose(1, 0, 2))
    col = _t(np.arange(3, dtype=np.float32).reshape(3, 1))
    assert np.array_equal(col.expand(3, 4).numpy(), np.broadcast_to(col.numpy(), (3, 4)))
    assert np.array_equal(col.expand(2, -1, 5).numpy(), np.broadcast_to(col.numpy(), (2, 3, 5)))
    assert np.array_equal(_t(np.array([True, False])).expand(2, 2).numpy(), [[True, False]] * 2)
    assert np.array_equal(col.repeat(2, 3).numpy(), np.tile(col.numpy(), (2, 3)))
    assert np.array_equal(col.repeat(2, 1, 2).numpy(), np.tile(col.numpy(), (2, 1, 2)))
    assert x.size() == (2, 3, 4) and x.size(1) == 3 and x.size == 24 and x.size * 2 == 48
    assert x.dim() == 3 and x.numel() == 24


def test_dtype_methods():
    a = _t(np.array([1.7, -2.5], np.float32))
    assert a.double().dtype == of.float64 and a.long().dtype == of.int64 and a.int().dtype == of.int32
    assert a.long().tolist() == [1, -2] and a.bool().tolist() == [True, True]
    assert a.int().float().dtype == of.float32
    assert a.to("float64").dtype == of.float64 and a.to(of.int64).dtype == of.int64
    assert a.to(np.zeros(1, np.int32)).dtype == of.int32 and a.to("cpu") is a
    assert _t(np.float32(2.5)).item() == 2.5 and a.tolist() == [1.7000000476837158, -2.5]
    with pytest.raises(errors.UnimplementedError, match="cuda"):
        a.to(device="cuda")


def test_methods_are_recorded_for_gradients():
    x = of.tensor(A, requires_grad=True)
    loss = x.clamp(-0.5, 0.5).pow(2).sum() + x.view(12).exp().mean() + x.expand(2, 3, 4).sum()
    loss.backward()
    inside = (A >= -0.5) & (A <= 0.5)
    expected = 2 * np.clip(A, -0.5, 0.5) * inside + np.exp(A) / 12 + 2
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_in_place_methods():
    t = _t(np.arange(4, dtype=np.float32))
    assert t.add_(1) is t and t.tolist() == [1, 2, 3, 4]
    t.sub_(np.ones(4, np.float32), alpha=2)
    assert t.tolist() == [-1, 0, 1, 2]
    t.mul_(3)
    t.div_(2)
    assert t.tolist() == [-1.5, 0, 1.5, 3]
    t.clamp_(0, 2)
    assert t.tolist() == [0, 0, 1.5, 2]
    t.fill_(7)
    assert t.tolist() == [7] * 4
    t.copy_(np.array([1, 2, 3, 4]))
    assert t.tolist() == [1, 2, 3, 4]
    t.zero_()
    assert t.tolist() == [0] * 4
    t += 2
    t *= 3
    t -= 1
    t /= 5
    assert t.tolist() == [1] * 4
    i = _t(np.arange(3))
    with pytest.raises(errors.InvalidArgumentError, match="int64"):
        i.add_(0.5)  # a float result is not stored into an int tensor silently
    with pytest.raises(errors.InvalidArgumentError, match="shape"):
        t.copy_(np.ones(3))


def test_in_place_on_a_leaf_that_requires_grad():
    w = of.tensor(np.ones(3, np.float32), requires_grad=True)
    ref = w
    (w * w).sum().backward()
    with pytest.raises(errors.InvalidArgumentError, match="no_grad"):
        w -= 0.1 * w.grad  # would silently detach w in a naive implementation
    with pytest.raises(errors.InvalidArgumentError, match="in place"):
        w.zero_()
    with of.no_grad():
        w -= 0.1 * w.grad
        w.add_(1)
    assert w is ref and w.requires_grad and w.is_leaf
    np.testing.assert_allclose(w.numpy(), [1.8] * 3)
    w.grad = None
    (w * 2.0).sum().backward()  # still in the graph after the update
    np.testing.assert_allclose(w.grad.numpy(), [2.0] * 3)
    y = w * 2.0  # a non-leaf that requires grad
    with pytest.raises(errors.InvalidArgumentError, match="computed from"):
        y.add_(1)
    plain = _t(np.zeros(3, np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="operand requires grad"):
        plain.add_(w)


def test_in_place_on_read_only_memory():
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    t = of.tensor(ro)
    with pytest.raises(errors.InvalidArgumentError, match="read-only"):
        t.add_(1)
    u = t
    u += 1  # augmented assignment rebinds, as for numbers, and leaves the borrowed memory alone
    assert u.tolist() == [2, 2, 2] and ro.tolist() == [1, 1, 1]


def test_against_torch():
    torch = pytest.importorskip("torch")
    a, ta = _t(A), torch.tensor(A)
    cases = [lambda x: x.clamp(-0.3, 0.2), lambda x: x.pow(2).sum(1), lambda x: x.max(0)[0],
             lambda x: x.max(1)[1], lambda x: x.flatten(), lambda x: x.unsqueeze(1).expand(3, 2, 4),
             lambda x: x.repeat(2, 1, 3), lambda x: x.permute(1, 0).softmax(0), lambda x: x.argmin(1),
             lambda x: x.mean(0, keepdim=True), lambda x: x.gt(0).long().sum(), lambda x: x.view(2, 6).sum(-1)]
    for case in cases:
        np.testing.assert_allclose(np.asarray(case(a).numpy()), case(ta).numpy(), rtol=1e-5, atol=1e-6)
    assert a.size() == tuple(ta.size()) and a.size(1) == ta.size(1) and a.numel() == ta.numel()
