"""The training ops' backward kernels against finite differences of their forward ops, and the
optimizer update ops against numpy references over several steps."""

import numpy as np
import pytest

import opforge as of
from opforge import _opinfo  # the registry, through its one reader
from opforge import errors

RNG = np.random.default_rng(0)


def has_gradient(*ops):
    """MatMul's and the reductions' gradients come with the grad-kernels work (issue 9)."""
    reg = {o["name"]: o["gradient"] for o in _opinfo.registry_dict()["ops"]}
    return all(reg[o]["rules"] for o in ops)


NEEDS_MODEL_GRADS = pytest.mark.skipif(not has_gradient("MatMul", "Mean"),
                                       reason="MatMul/Mean have no gradient declaration in this build yet")


def numeric_grad(f, x, dy, h=1e-6):
    """d sum(f(x) * dy) / dx by central differences (float64)."""
    g = np.zeros_like(x)
    flat = x.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + h
        up = (f(x) * dy).sum()
        flat[i] = old - h
        down = (f(x) * dy).sum()
        flat[i] = old
        g.reshape(-1)[i] = (up - down) / (2 * h)
    return g


def test_gelu_matches_erf_form_and_its_grad():
    from math import erfc
    x = np.linspace(-6, 6, 101)
    # x/2 erfc(-x/sqrt 2): the 1 + erf form loses relative precision in the negative tail
    want = x * 0.5 * np.vectorize(erfc)(-x / np.sqrt(2))
    np.testing.assert_allclose(of.gelu(x).numpy(), want, rtol=1e-13, atol=1e-300)
    dy = RNG.standard_normal(x.shape)
    np.testing.assert_allclose(of.raw_ops.gelu_grad(dy, x).numpy(), numeric_grad(lambda v: of.gelu(v).numpy(), x, dy),
                               rtol=1e-6, atol=1e-8)


def test_layer_norm_grad_matches_finite_differences():
    x = RNG.standard_normal((3, 5))
    w, b = RNG.standard_normal(5), RNG.standard_normal(5)
    dy = RNG.standard_normal(x.shape)
    fwd = lambda x_, w_, b_: of.layer_norm(x_, w_, b_, epsilon=1e-3).numpy()  # noqa: E731
    dx, dw, db = (t.numpy() for t in of.raw_ops.layer_norm_grad(dy, x, w, epsilon=1e-3))
    np.testing.assert_allclose(db, numeric_grad(lambda v: fwd(x, w, v), b.copy(), dy), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dx, numeric_grad(lambda v: fwd(v, w, b), x.copy(), dy), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dw, numeric_grad(lambda v: fwd(x, v, b), w.copy(), dy), rtol=1e-6, atol=1e-8)


def test_sparse_xent_is_stable_and_its_backprop_is_the_gradient():
    f = RNG.standard_normal((4, 6)) * 3
    labels = np.array([0, 5, 2, 2], np.int32)
    loss, back = of.sparse_softmax_cross_entropy_with_logits(f, labels)
    lse = np.log(np.exp(f).sum(1))
    np.testing.assert_allclose(loss.numpy(), lse - f[np.arange(4), labels], rtol=1e-13)
    num = numeric_grad(lambda v: of.sparse_softmax_cross_entropy_with_logits(v, labels)[0].numpy(), f.copy(),
                       np.ones(4))
    np.testing.assert_allclose(back.numpy(), num, rtol=1e-6, atol=1e-8)
    big = np.array([[1e4, 0.0, -1e4]], np.float32)  # naive exp overflows
    loss, back = of.sparse_softmax_cross_entropy_with_logits(big, np.array([1]))
    assert np.isfinite(loss.numpy()).all() and loss.numpy()[0] == pytest.approx(1e4)
    with pytest.raises(errors.InvalidArgumentError, match="labels.*7.*out of range"):
        of.sparse_softmax_cross_entropy_with_logits(f, np.array([0, 7, 1, 1]))


def test_gather_and_its_scatter_add_grad():
    params = RNG.standard_normal((5, 3))
    idx = np.array([[0, 4], [4, 4]], np.int64)
    np.testing.assert_array_equal(of.gather(params, idx).numpy(), params[idx])
    dy = RNG.standard_normal((2, 2, 3))
    want = np.zeros_like(params)
    np.add.at(want, idx, dy)
    np.testing.assert_allclose(of.raw_ops.gather_grad(params, idx, dy).numpy(), want, rtol=1e-15)
    for bad in ([5], [-1]):
        with pytest.raises(errors.InvalidArgumentError, match=f"Gather.*indices.*{bad[0]}"):
            of.gather(params, np.array(bad, np.int32))


def test_dropout_mask_rate_scale_and_determinism():
    x = np.zeros(200_000, np.float32)
    m = of.dropout_mask(x, rate=0.3, seed=7).numpy()
    assert set(np.unique(m)) == {0.0, np.float32(1 / 0.7)}
    assert abs((m == 0).mean() - 0.3) < 0.005  # 5 sigma
    np.testing.assert_array_equal(m, of.dropout_mask(x, rate=0.3, seed=7).numpy())
    assert (m != of.dropout_mask(x, rate=0.3, seed=8).numpy()).any()
    assert (of.dropout_mask(x, rate=0.0, seed=1).numpy() == 1).all()
    with pytest.raises(errors.InvalidArgumentError, match="rate"):
        of.dropout_mask(x, rate=1.0)


def adam_reference(w, grads, lr, b1, b2, eps, wd):
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        g = g + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr / (1 - b1**t) * m / (np.sqrt(v) / np.sqrt(1 - b2**t) + eps)
    return w


def momentum_reference(w, grads, lr, mu, wd, nesterov):
    buf = np.zeros_like(w)
    for g in grads:
        g = g + wd * w
        buf = mu * buf + g
        w = w - lr * (g + mu * buf if nesterov else buf)
    return w


@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_adam_updates_in_place_like_the_reference(wd):
    w0 = RNG.standard_normal((7, 3))
    grads = [RNG.standard_normal(w0.shape) for _ in range(5)]
    p = of.tensor(w0.copy())
    opt = of.optim.Adam([p], lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=wd)
    before = p.numpy()
    for g in grads:
        opt.step(grads=[g])
    np.testing.assert_allclose(p.numpy(), adam_reference(w0, grads, 0.01, 0.8, 0.99, 1e-6, wd), rtol=1e-12)
    assert np.shares_memory(before, p.numpy())  # updated in place, not replaced


@pytest.mark.parametrize("n", [1, 15, 16, 17, 40, 1000])
@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_adam_float32_matches_the_reference(n, wd):
    # float32 runs a vector loop (AVX-512: the quotient by a reciprocal and a
    # Newton step): every length's tail, zero gradients (v = 0: the
    # denominator is eps alone) and gradients of many magnitudes.
    w0 = RNG.standard_normal(n).astype(np.float32)
    grads = [(RNG.standard_normal(n) * 10.0 ** RNG.integers(-6, 3, n)).astype(np.float32) for _ in range(4)]
    for g in grads:
        g[::3] = 0
    p = of.tensor(w0.copy())
    opt = of.optim.Adam([p], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd)
    for g in grads:
        opt.step(grads=[g])
    ref = adam_reference(w0.astype(np.float64), [g.astype(np.float64) for g in grads], 0.01, 0.9, 0.999, 1e-8, wd)
    # Each step moves a weight by about lr (0.01); float32 keeps the four
    # steps within 2.5e-5 of that (a reciprocal without its Newton step,
    # 2^-14 relative, is not).
    np.testing.assert_allclose(p.numpy(), ref, rtol=0, atol=1e-6)
    m, v = opt._m[0].numpy(), opt._v[0].numpy()
    assert (v >= 0).all() and np.isfinite(m).all()


@pytest.mark.parametrize("momentum,nesterov,wd", [(0.0, False, 0.0), (0.9, False, 0.1), (0.9, True, 0.0)])
def test_sgd_matches_the_reference(momentum, nesterov, wd):
    w0 = RNG.standard_normal(10).astype(np.float32)
    grads = [RNG.standard_normal(10).astype(np.float32) for _ in range(4)]
    p = of.tensor(w0.copy())
    opt = of.optim.SGD([p], lr=0.1, momentum=momentum, weight_decay=wd, nesterov=nesterov)
    for g in grads:
        opt.step(grads=[g])
    np.testing.assert_allclose(p.numpy(), momentum_reference(w0, grads, 0.1, momentum, wd, nesterov), rtol=1e-5)


def test_update_ops_refuse_read_only_weights():
    w = np.ones(4, np.float32)
    w.flags.writeable = False
    g = np.ones(4, np.float32)
    with pytest.raises(errors.InvalidArgumentError, match="ApplyAdam.*'var' is read-only"):
        of.raw_ops.apply_adam(w, np.zeros(4, np.float32), np.zeros(4, np.float32), g, lr=0.1)
    m = np.zeros(4, np.float32)
    m.flags.writeable = False
    with pytest.raises(errors.InvalidArgumentError, match="ApplyMomentum.*'accum' is read-only"):
        of.raw_ops.apply_momentum(np.ones(4, np.float32), m, g, lr=0.1, momentum=0.9)
    np.testing.assert_array_equal(w, 1)
    with pytest.raises(errors.InvalidArgumentError, match="beta1"):
        of.raw_ops.apply_adam(np.ones(4), np.zeros(4), np.zeros(4), np.ones(4), lr=0.1, beta1=1.0)


def test_declared_gradients_match_finite_differences():
    """The .Gradient declarations of the training ops, through the tape, against opforge.testing's checker."""
    from opforge.testing import check_gradients
    x = RNG.standard_normal((3, 4))
    w, b = RNG.standard_normal(4), RNG.standard_normal(4)
    idx = np.array([[0, 2], [2, 2]])
    labels = np.array([1, 0, 3])
    check_gradients(lambda v: of.gelu(v), [x])
    check_gradients(lambda v, w_, b_: of.layer_norm(v, w_, b_), [x, w, b])
    check_gradients(lambda p: of.gather(p, idx), [x])
    check_gradients(lambda f: of.sparse_softmax_cross_entropy_with_logits(f, labels)[0], [x])
    check_gradients(lambda f: of.nn.functional.cross_entropy(f, labels, reduction="none"), [x])
    check_gradients(lambda v: of.mul(v, of.dropout_mask(v, rate=0.5, seed=3)), [x])


@NEEDS_MODEL_GRADS
def test_tape_trains_layers_end_to_end():
    """loss.backward() fills .grad of every parameter, equal to finite differences of the loss."""
    model = of.nn.Sequential(of.nn.Linear(4, 5, seed=0, dtype="float64"), of.nn.GELU(),
                             of.nn.LayerNorm(5, dtype="float64"), of.nn.Linear(5, 3, seed=1, dtype="float64"))
    x, y = RNG.standard_normal((6, 4)), RNG.integers(0, 3, 6)
    loss = of.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    for name, p in model.named_weights():
        w0 = p.numpy().copy()

        def f(v, p=p, w0=w0):
            p.numpy()[...] = v
            with of.no_grad():
                out = float(of.nn.functional.cross_entropy(model(x), y))
            p.numpy()[...] = w0
            return np.array(out)
        np.testing.assert_allclose(p.grad.numpy(), numeric_grad(f, w0.copy(), np.ones(())), rtol=1e-5, atol=1e-8,
                                   err_msg=name)
