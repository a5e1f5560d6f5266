"""The tape: leaves, backward, accumulation, no_grad, grad/value_and_grad,
higher derivatives, Python-registered gradients, and the hazards (borrowed
memory, dtypes, reference cycles, threads). autograd is the oracle."""
import gc
import os
import threading

import numpy as np
import pytest

import opforge as of


def test_readme_example():
    a = of.tensor(2.0, requires_grad=True)
    b = of.tensor(3.0, requires_grad=True)
    c = of.tensor(4.0, requires_grad=True)
    y = a * b * c
    y.backward()
    assert (a.grad.item(), b.grad.item(), c.grad.item()) == (12.0, 8.0, 6.0)


def test_leaves_results_and_grad_fn():
    x = of.tensor([1.0, 2.0], requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad_fn is None and x.grad is None
    y = of.exp(x)
    assert y.requires_grad and not y.is_leaf and y.grad_fn.type == "Exp"
    assert y.grad_fn.get_attr("T") == of.float64
    z = of.exp(of.tensor([1.0]))
    assert not z.requires_grad and z.grad_fn is None


def test_grad_accumulates_and_can_be_reset():
    x = of.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for _ in range(2):
        of.sum(x * x).backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.array([1.0, 2.0, 3.0]))
    x.grad = None
    assert x.grad is None
    of.sum(x * 3.0).backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0, 3.0])


def test_non_scalar_backward_needs_grad():
    x = of.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    with pytest.raises(of.errors.InvalidArgumentError, match="pass grad="):
        y.backward()
    y.backward(np.array([1.0, 10.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 20.0])


def test_integer_and_bool_tensors_cannot_require_grad():
    with pytest.raises(of.errors.InvalidArgumentError, match="floating-point"):
        of.tensor([1, 2], requires_grad=True)
    t = of.tensor([True])
    with pytest.raises(of.errors.InvalidArgumentError, match="floating-point"):
        t.requires_grad = True


def test_detach_and_no_grad():
    x = of.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and np.shares_memory(d.numpy(), x.numpy())
    with of.no_grad():
        y = x * 2.0
    assert not y.requires_grad
    with pytest.raises(of.errors.InvalidArgumentError, match="does not require gradients"):
        y.backward(np.ones(2))


def test_no_grad_is_per_thread():
    x = of.tensor([1.0], requires_grad=True)
    seen = {}

    def other():
        seen["other"] = (x * 2.0).requires_grad

    with of.no_grad():
        t = threading.Thread(target=other)
        t.start()
        t.join()
        seen["here"] = (x * 2.0).requires_grad
    assert seen == {"other": True, "here": False}


def test_float32_gradients_are_float32():
    x = of.tensor(np.array([0.5, 1.5], np.float32), requires_grad=True)
    of.sum(of.tanh(x) * x).backward()
    assert x.grad.dtype == of.float32


def test_broadcast_gradients_are_summed_to_the_input_shape():
    x = of.tensor(np.ones((2, 3)), requires_grad=True)
    b = of.tensor(np.ones(3), requires_grad=True)
    s = of.tensor(2.0, requires_grad=True)
    of.sum((x + b) * s).backward()
    assert b.grad.shape == (3,) and s.grad.shape == ()
    np.testing.assert_allclose(b.grad.numpy(), [4.0, 4.0, 4.0])
    assert s.grad.item() == 12.0


def test_overwriting_a_borrowed_input_does_not_change_the_gradient():
    w = of.tensor([1.0, 2.0, 3.0], requires_grad=True)
    data = np.array([10.0, 20.0, 30.0])
    loss = of.sum(w * data)  # data is borrowed without a copy for the forward pass
    data[:] = -1.0
    loss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [10.0, 20.0, 30.0])


def test_requires_grad_leaf_owns_its_memory():
    a = np.array([1.0, 2.0])
    x = of.tensor(a, requires_grad=True)
    a[:] = 0
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])


def test_grad_and_value_and_grad():
    f = lambda x, y: of.sum(of.sin(x) * y)  # noqa: E731
    x, y = np.array([0.1, 0.2]), np.array([3.0, 4.0])
    np.testing.assert_allclose(of.grad(f)(x, y).numpy(), np.cos(x) * y)
    value, (gx, gy) = of.value_and_grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(value.item(), np.sum(np.sin(x) * y))
    np.testing.assert_allclose(gx.numpy(), np.cos(x) * y)
    np.testing.assert_allclose(gy.numpy(), np.sin(x))
    with pytest.raises(of.errors.InvalidArgumentError, match="single-element"):
        of.grad(lambda x: x * 2.0)(x)


def test_second_derivatives_of_sin_and_tanh():
    x = np.array([0.3, -1.2, 2.0])
    d2sin = of.grad(lambda t: of.sum(of.grad(lambda u: of.sum(of.sin(u)))(t)))(x)
    np.testing.assert_allclose(d2sin.numpy(), -np.sin(x), rtol=1e-12)
    d2tanh = of.grad(lambda t: of.sum(of.grad(lambda u: of.sum(of.tanh(u)))(t)))(x)
    th = np.tanh(x)
    np.testing.assert_allclose(d2tanh.numpy(), -2 * th * (1 - th**2), rtol=1e-12)


def test_backward_with_create_graph_gives_higher_derivatives():
    x = of.tensor([0.5, 1.0], requires_grad=True)
    y = of.sum(x * x * x)
    y.backward(create_graph=True)
    g = x.grad
    assert g.requires_grad
    x.grad = None
    of.sum(g).backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * np.array([0.5, 1.0]))


def test_python_registered_gradient_and_errors():
    @of.RegisterGradient("TestOnlyNoSuchOp")
    def _g(op, grad):
        return [grad]

    with pytest.raises(of.errors.AlreadyExistsError, match="TestOnlyNoSuchOp"):
        of.RegisterGradient("TestOnlyNoSuchOp")(_g)


def test_an_op_without_a_gradient_raises_not_found_naming_it(monkeypatch):
    # Every in-tree op declares one: hide SoftmaxGrad's, the backward op of Softmax.
    from opforge.autodiff import registry
    registry.lookup("Softmax")  # loads the declared gradients
    monkeypatch.delitem(registry._declared, "SoftmaxGrad")
    x = of.tensor(np.array([[0.1, 0.5, -0.3]]), requires_grad=True)
    y = of.softmax(x)
    of.sum(y * np.array([1.0, 2.0, 3.0])).backward(create_graph=True)
    g = x.grad
    with pytest.raises(of.errors.NotFoundError, match=r"SoftmaxGrad.*RegisterGradient"):
        of.sum(g * g).backward()


def test_mlp_gradients_equal_autograd():
    autograd = pytest.importorskip("autograd")
    anp = autograd.numpy
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 5))
    Y = np.eye(3)[rng.integers(0, 3, size=8)]
    params = [rng.normal(size=(5, 7)), rng.normal(size=7), rng.normal(size=(7, 3)), rng.normal(size=3)]

    def ref_loss(w1, b1, w2, b2):
        h = anp.tanh(anp.dot(X, w1) + b1)
        logits = anp.dot(h, w2) + b2
        logits = logits - anp.max(logits, axis=1, keepdims=True)
        logp = logits - anp.log(anp.sum(anp.exp(logits), axis=1, keepdims=True))
        return -anp.sum(Y * logp) / X.shape[0]

    def loss(w1, b1, w2, b2):
        h = of.tanh(of.matmul(X, w1) + b1)
        logits = of.matmul(h, w2) + b2
        return -of.sum(Y * of.log(of.softmax(logits))) / float(X.shape[0])

    want = autograd.grad(ref_loss, argnum=(0, 1, 2, 3))(*params)
    got = of.grad(loss, argnums=(0, 1, 2, 3))(*params)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-10, atol=1e-12)


def _rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.skipif(bool(os.environ.get("OPFORGE_SANITIZED")),
                    reason="RSS is meaningless under ASan (quarantine, shadow memory)")
def test_no_reference_cycles_over_many_steps():
    rng = np.random.default_rng(1)
    w1 = of.tensor(rng.normal(size=(16, 32)).astype(np.float32), requires_grad=True)
    w2 = of.tensor(rng.normal(size=(32, 4)).astype(np.float32), requires_grad=True)
    x = rng.normal(size=(8, 16)).astype(np.float32)

    def step():
        loss = of.sum(of.matmul(of.relu(of.matmul(x, w1)), w2))
        loss.backward()
        w1.grad = w2.grad = None

    for _ in range(200):
        step()
    gc.collect()
    before = _rss_mb()
    for _ in range(10_000):
        step()
    gc.collect()
    assert _rss_mb() - before < 5.0


def test_gradient_graph_is_freed_with_its_tensors():
    import weakref
    x = of.tensor([1.0, 2.0], requires_grad=True)
    y = of.exp(x * 2.0)
    node = weakref.ref(y.grad_fn)
    del y
    assert node() is None


def test_bad_list_argument_raises_the_ops_error_while_recording():
    x = of.tensor([1.0], requires_grad=True)
    with pytest.raises(of.errors.InvalidArgumentError, match="Concat.*values"):
        of.concat(None)
    assert x.requires_grad  # the recorder was active for that call
