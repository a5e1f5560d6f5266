"""FusedMatMulGrad, a FusedMatMul layer's backward in one op (dpre, the
bias's column sums and MatMulGrad's two products), against the unfused ops
it replaces (FusedMatMulActivationGrad, MatMulGrad, a sum over the rows) and
against central differences of the forward op; its own gradient (second
order, through the tape) against the unfused ops' gradients."""

import numpy as np
import pytest

import opforge as of
from opforge import ops as gen

RNG = np.random.default_rng(22)
ACTS = ["none", "relu", "sigmoid", "gelu", "silu"]


def operands(ta, tb, rows=(5,), k=4, n=3):
    a = RNG.standard_normal((k, rows[0]) if ta else rows + (k,)).astype(np.float32)
    b = RNG.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    return a, b, RNG.standard_normal(n).astype(np.float32)


CASES = [(ta, tb, rows) for ta in (False, True) for tb in (False, True) for rows in ((5,), (2, 3))
         if not (ta and len(rows) > 1)]


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("ta,tb,rows", CASES)
def test_matches_the_unfused_ops(ta, tb, rows, act):
    a, b, bias = operands(ta, tb, rows, k=37, n=70)  # n: more than one 64-column block of sums
    kw = dict(transpose_a=ta, transpose_b=tb, activation=act)
    y = gen.fused_mat_mul(a, b, bias, **kw)
    dy = RNG.standard_normal(y.shape).astype(np.float32)
    ga, gb, gbias = gen.fused_mat_mul_grad(dy, y, a, b, bias, **kw)
    dpre = gen.fused_mat_mul_activation_grad(dy, y, a, b, bias, **kw)
    wa, wb = gen.mat_mul_grad(a, b, dpre, transpose_a=ta, transpose_b=tb)
    np.testing.assert_allclose(ga.numpy(), wa.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gb.numpy(), wb.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gbias.numpy(), dpre.numpy().reshape(-1, 70).sum(0, dtype=np.float64),
                               rtol=1e-5, atol=1e-5)
    assert ga.shape == a.shape and gb.shape == b.shape and gbias.shape == bias.shape


@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_matches_central_differences_of_the_forward_op(ta, tb, act):
    # <dy, FusedMatMul(a + e, b, bias)>: the op's outputs are its derivatives.
    a, b, bias = (x.astype(np.float64) for x in operands(ta, tb))
    if act == "relu":  # keep pre away from the kink
        bias += np.sign(bias) * 0.5
    kw = dict(transpose_a=ta, transpose_b=tb, activation=act)
    y = gen.fused_mat_mul(a.astype(np.float32), b.astype(np.float32), bias.astype(np.float32), **kw)
    dy = RNG.standard_normal(y.shape)
    got = gen.fused_mat_mul_grad(dy.astype(np.float32), y, a.astype(np.float32), b.astype(np.float32),
                                 bias.astype(np.float32), **kw)

    def f(a_, b_, c_):
        return float(np.sum(np.asarray(gen.fused_mat_mul(a_.astype(np.float32), b_.astype(np.float32),
                                                          c_.astype(np.float32), **kw), np.float64) * dy))
    args, h = [a, b, bias], 1e-2
    for i, g in enumerate(got):
        for flat in range(args[i].size):
            up, dn = [x.copy() for x in args], [x.copy() for x in args]
            up[i].reshape(-1)[flat] += h
            dn[i].reshape(-1)[flat] -= h
            np.testing.assert_allclose(g.numpy().reshape(-1)[flat], (f(*up) - f(*dn)) / (2 * h), rtol=2e-2,
                                       atol=2e-3, err_msg=f"input {i}, element {flat}")


def test_skipped_gradients_are_zeros():
    a, b, bias = operands(False, True)
    y = gen.fused_mat_mul(a, b, bias, transpose_b=True, activation="relu")
    dy = RNG.standard_normal(y.shape).astype(np.float32)
    ga, gb, gbias = gen.fused_mat_mul_grad(dy, y, a, b, bias, transpose_b=True, activation="relu",
                                           compute_grad_a=False, compute_grad_bias=False)
    assert not np.any(ga.numpy()) and not np.any(gbias.numpy()) and np.any(gb.numpy())
    _, wb = gen.mat_mul_grad(a, b, gen.fused_mat_mul_activation_grad(dy, y, a, b, bias, transpose_b=True,
                                                                      activation="relu"), transpose_b=True)
    np.testing.assert_allclose(gb.numpy(), wb.numpy(), rtol=1e-5, atol=1e-5)


def test_bad_shapes_name_the_argument():
    a, b, bias = operands(False, False)
    y = np.zeros((5, 3), np.float32)
    with pytest.raises(of.errors.InvalidArgumentError, match="FusedMatMulGrad.*argument 'y'"):
        gen.fused_mat_mul_grad(y, y[:4], a, b, bias)
    with pytest.raises(of.errors.InvalidArgumentError, match="FusedMatMulGrad.*argument 'bias'"):
        gen.fused_mat_mul_grad(y, y, a, b, bias[:2])


@pytest.mark.parametrize("act", ["none", "relu"])
@pytest.mark.parametrize("ta,tb", [(False, True), (True, False)])
def test_second_order_matches_the_unfused_ops(ta, tb, act):
    # d/d(a, b, bias) of <v, grad of sum(w * layer(a, b, bias))>, through
    # FusedMatMulGrad's declared gradient, against the same through MatMul,
    # Add and Relu (their own declared gradients).
    a, b, bias = operands(ta, tb)
    w = RNG.standard_normal((5, 3)).astype(np.float32)
    vs = [RNG.standard_normal(x.shape).astype(np.float32) for x in (a, b, bias)]

    def fused(a, b, bias):
        return of.sum(gen.fused_mat_mul(a, b, bias, transpose_a=ta, transpose_b=tb, activation=act) ** 2 * w)

    def unfused(a, b, bias):
        pre = of.matmul(of.transpose(a) if ta else a, of.transpose(b) if tb else b) + bias
        return of.sum((of.relu(pre) if act == "relu" else pre) ** 2 * w)

    def hvp(loss):
        def inner(a, b, bias):
            return sum(of.sum(g * v) for g, v in zip(of.grad(loss, argnums=(0, 1, 2))(a, b, bias), vs))
        return of.grad(inner, argnums=(0, 1, 2))(a, b, bias)
    for got, want in zip(hvp(fused), hvp(unfused)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


def test_a_linear_relu_layer_backward_runs_it(monkeypatch):
    model = of.nn.Sequential(of.nn.Linear(4, 3), of.nn.ReLU())
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    out = model(x)
    assert out.grad_fn.type == "FusedMatMul"
    calls = []
    real = of.ops.fused_mat_mul_grad
    monkeypatch.setattr(of.ops, "fused_mat_mul_grad", lambda *a, **k: calls.append(k) or real(*a, **k))
    of.sum(out * out).backward()
    assert len(calls) == 1 and calls[0]["compute_grad_a"] is False  # x needs no gradient
    w, c = model.parameters()
    pre = x @ w.numpy().T + c.numpy()
    dpre = 2 * np.maximum(pre, 0)
    np.testing.assert_allclose(w.grad.numpy(), dpre.T @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c.grad.numpy(), dpre.sum(0), rtol=1e-5, atol=1e-5)
