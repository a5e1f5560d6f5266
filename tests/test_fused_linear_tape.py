"""nn.Linear on FusedMatMul under the gradient tape: first and second
derivatives against autograd (float64) and finite differences, and the
activations whose second derivative through the fused op is refused."""
import numpy as np
import pytest

import opforge as of
from opforge.ops import gen_linalg_ops as gen

RNG = np.random.default_rng(22)


def _recorded_ops(t):
    """The op types on the tape from t back to the leaves."""
    seen, out, stack = set(), [], [t.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node.type)
        stack.extend(e.grad_fn for e in node.edges if e is not None)
    return out


def _mlp(seed=0):
    of.manual_seed(seed)
    return of.nn.Sequential(of.nn.Linear(5, 7), of.nn.ReLU(), of.nn.Linear(7, 4), of.nn.ReLU(), of.nn.Linear(4, 3))


def test_sequential_linear_relu_records_fused_matmul():
    model = _mlp()
    x = RNG.standard_normal((6, 5)).astype(np.float32)
    out = model(x)
    ops = _recorded_ops(out)
    assert ops.count("FusedMatMul") == 3 and "Relu" not in ops and "MatMul" not in ops, ops
    # The same numbers as the layers called one by one (the unfused ops).
    want = x
    for layer in model:
        want = layer(want)
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_sequential_gelu_fuses_only_without_the_tape():
    of.manual_seed(1)
    model = of.nn.Sequential(of.nn.Linear(5, 7), of.nn.GELU(), of.nn.Linear(7, 3))
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    taped = _recorded_ops(model(x))
    assert "Gelu" in taped and taped.count("FusedMatMul") == 1, taped  # gelu'' through the fused op is refused
    with of.no_grad():
        fused = model(x).numpy()
    unfused = model[2](model[1](model[0](x))).detach().numpy()
    np.testing.assert_allclose(fused, unfused, rtol=1e-5, atol=1e-6)


def _ce(logits, labels):
    loss, _ = of.sparse_softmax_cross_entropy_with_logits(logits, labels)
    return of.mean(loss)


X = RNG.standard_normal((6, 5))
LABELS = np.array([0, 2, 1, 2, 0, 1])
PARAMS = [RNG.standard_normal(s) for s in ((7, 5), (7,), (3, 7), (3,))]


def fused_loss(w1, b1, w2, b2):
    h = gen.fused_mat_mul(X.astype(np.float32), w1, b1, transpose_b=True, activation="relu")
    return _ce(gen.fused_mat_mul(h, w2, b2, transpose_b=True), LABELS)


def ref_loss(anp, w1, b1, w2, b2):
    z = anp.dot(anp.maximum(anp.dot(X, w1.T) + b1, 0), w2.T) + b2
    z = z - anp.max(z, axis=1, keepdims=True)
    return -anp.mean((z - anp.log(anp.sum(anp.exp(z), axis=1, keepdims=True)))[np.arange(len(LABELS)), LABELS])


def test_hvp_through_fused_relu_layers_matches_autograd():
    autograd = pytest.importorskip("autograd")
    anp = autograd.numpy
    params = [p.astype(np.float32) for p in PARAMS]
    vs = [RNG.standard_normal(p.shape).astype(np.float32) for p in params]
    n = len(params)

    def inner(*ps):
        gs = of.grad(fused_loss, argnums=tuple(range(n)))(*ps)
        return sum(of.sum(g * v) for g, v in zip(gs, vs))
    got = of.grad(inner, argnums=tuple(range(n)))(*params)

    grad = autograd.grad(lambda *ps: ref_loss(anp, *ps), argnum=tuple(range(n)))
    want = autograd.grad(lambda *ps: sum(anp.sum(g * v) for g, v in zip(grad(*ps), vs)), argnum=tuple(range(n)))(
        *[p.astype(np.float64) for p in params])
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g.numpy(), w, rtol=2e-4, atol=2e-5, err_msg=f"H v w.r.t. parameter {i}")


@pytest.mark.parametrize("act", ["none", "relu", "sigmoid", "gelu", "silu"])
def test_activation_grad_gradient_wrt_dy_is_the_op_itself(act):
    # dpre is linear in dy: <dpre(dy + e), w> - <dpre(dy), w> = <e, grad>, checked by central differences.
    a, b, bias = (RNG.standard_normal(s).astype(np.float32) for s in ((4, 5), (5, 3), (3,)))
    y = gen.fused_mat_mul(a, b, bias, activation=act).numpy()
    dy = of.tensor(RNG.standard_normal(y.shape).astype(np.float32), requires_grad=True)
    w = RNG.standard_normal(y.shape).astype(np.float32)
    of.sum(gen.fused_mat_mul_activation_grad(dy, y, a, b, bias, activation=act) * w).backward()
    f = lambda d: float(np.sum(np.asarray(gen.fused_mat_mul_activation_grad(d, y, a, b, bias, activation=act),
                                          np.float64) * w))
    d0 = dy.detach().numpy()
    for flat in range(0, y.size, 3):
        up, dn = d0.copy(), d0.copy()
        up.reshape(-1)[flat] += 0.5
        dn.reshape(-1)[flat] -= 0.5
        np.testing.assert_allclose(dy.grad.numpy().reshape(-1)[flat], f(up) - f(dn), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("act", ["gelu", "silu", "sigmoid"])
def test_second_derivative_of_smooth_fused_activations_is_refused(act):
    a = of.tensor(RNG.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    b, bias = RNG.standard_normal((4, 2)).astype(np.float32), RNG.standard_normal(2).astype(np.float32)
    g = of.grad(lambda a: of.sum(gen.fused_mat_mul(a, b, bias, activation=act)))
    with pytest.raises(of.errors.UnimplementedError, match=f"FusedMatMulActivationGradGrad.*'activation' is '{act}'"):
        of.grad(lambda a: of.sum(of.square(g(a))))(a)


@pytest.mark.parametrize("act", ["none", "relu"])
def test_grad_grad_is_exactly_zero_and_checks_shapes(act):
    a, b, bias = np.ones((4, 3), np.float32), np.ones((3, 5), np.float32), np.ones(5, np.float32)
    t = np.full((4, 5), 2.0, np.float32)
    out = gen.fused_mat_mul_activation_grad_grad(t, t, t, a, b, bias, activation=act)
    assert out.shape == (4, 5) and not np.any(out.numpy())
    with pytest.raises(of.errors.InvalidArgumentError, match="argument 'dy'"):
        gen.fused_mat_mul_activation_grad_grad(t, t[:3], t, a, b, bias, activation=act)
    with pytest.raises(of.errors.InvalidArgumentError, match="argument 'y'"):
        gen.fused_mat_mul_activation_grad_grad(t[:, :4], t[:, :4], t[:, :4], a, b, bias, activation=act)


def test_linear_training_step_matches_unfused():
    # The gradients through fused layers against the same model's unfused ops.
    model = _mlp(3)
    x = RNG.standard_normal((8, 5)).astype(np.float32)
    labels = RNG.integers(0, 3, 8)
    loss = of.nn.functional.cross_entropy(model(x), labels)
    loss.backward()
    fused = [p.grad.numpy().copy() for p in model.parameters()]
    for p in model.parameters():
        p.grad = None
    h = x
    for i, layer in enumerate(model[::2]):
        h = of.add(of.matmul(h, layer.weight, transpose_b=True), layer.bias)  # MatMul, Add, Relu
        h = of.relu(h) if i < 2 else h
    of.nn.functional.cross_entropy(h, labels).backward()
    for f, p in zip(fused, model.parameters()):
        np.testing.assert_allclose(f, p.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_linear_rejects_an_unknown_activation():
    with pytest.raises(of.errors.InvalidArgumentError, match="argument 'activation'"):
        of.nn.functional.linear(np.ones((2, 3), np.float32), np.ones((4, 3), np.float32), activation="tanh")
