"""Gradient functions know which inputs need a gradient (op.needs_input_grad)
and skip the work for the others: MatMulGrad's compute_grad_a/b, and every
generated gradient function's rules."""
import numpy as np
import pytest

import opforge as of
from opforge.ops import gen_grad_ops as G

rng = np.random.default_rng(9)


def r(*shape):
    return rng.normal(size=shape)


def _sum_to(x, shape):
    lead = x.ndim - len(shape)
    x = x.sum(axis=tuple(range(lead))) if lead else x
    return x.sum(axis=tuple(i for i, d in enumerate(shape) if d == 1), keepdims=True).reshape(shape)


def matmul_grads(a, b, g, ta, tb):
    """numpy: (grad_a, grad_b) of <matmul(op(a), op(b)), g>, 2-D and batched operands."""
    tr = lambda m: np.swapaxes(m, -1, -2)
    oa, ob = (tr(a) if ta else a), (tr(b) if tb else b)
    ga, gb = g @ tr(ob), tr(oa) @ g
    return _sum_to(tr(ga) if ta else ga, a.shape), _sum_to(tr(gb) if tb else gb, b.shape)


CASES = [
    ((r(4, 3), r(3, 5), r(4, 5)), False, False),
    ((r(3, 4), r(3, 5), r(4, 5)), True, False),
    ((r(4, 3), r(5, 3), r(4, 5)), False, True),
    ((r(2, 1, 4, 3), r(3, 3, 2), r(2, 3, 4, 2)), False, False),   # broadcast batch dims: summed
    ((r(3, 2, 4), r(4, 5), r(3, 2, 5)), False, False),            # a stack times one matrix (folded)
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_mat_mul_grad_computes_only_what_is_asked(case, dtype):
    (a, b, g), ta, tb = CASES[case]
    a, b, g = a.astype(dtype), b.astype(dtype), g.astype(dtype)
    want_a, want_b = matmul_grads(a, b, g, ta, tb)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for ca, cb in [(True, True), (False, True), (True, False), (False, False)]:
        ga, gb = G.mat_mul_grad(a, b, g, transpose_a=ta, transpose_b=tb, compute_grad_a=ca, compute_grad_b=cb)
        assert ga.shape == a.shape and gb.shape == b.shape
        assert ga.dtype == gb.dtype == of.as_dtype(dtype)
        # Not asked for: zeros of the operand's shape (never uninitialised memory).
        np.testing.assert_allclose(ga.numpy(), want_a if ca else np.zeros_like(a), **tol)
        np.testing.assert_allclose(gb.numpy(), want_b if cb else np.zeros_like(b), **tol)


def test_mat_mul_grad_rejects_a_non_bool_flag():
    with pytest.raises(of.errors.InvalidArgumentError, match=r"MatMulGrad.*compute_grad_a"):
        G.mat_mul_grad(r(2, 3), r(3, 4), r(2, 4), compute_grad_a="no")


def test_tape_skips_the_gradient_of_an_input_that_needs_none():
    # x @ w with only w requiring a gradient: the recorded MatMulGrad (seen
    # through create_graph, which records the backward ops) computes grad_b only.
    x, wv = r(6, 4), r(4, 3)
    w = of.tensor(wv, requires_grad=True)
    loss = of.sum(of.tanh(of.matmul(x, w)))
    loss.backward(create_graph=True)
    node = w.grad.grad_fn
    assert node.type == "MatMulGrad"
    assert node.get_attr("compute_grad_a") is False and node.get_attr("compute_grad_b") is True
    want = x.T @ (1 - np.tanh(x @ wv) ** 2)
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-12)

    # Both operands requiring one: both computed.
    xt = of.tensor(x, requires_grad=True)
    w2 = of.tensor(wv, requires_grad=True)
    of.sum(of.tanh(of.matmul(xt, w2))).backward(create_graph=True)
    assert w2.grad.grad_fn.get_attr("compute_grad_a") is True
    np.testing.assert_allclose(xt.grad.numpy(), (1 - np.tanh(x @ wv) ** 2) @ wv.T, rtol=1e-12)


def test_python_gradient_sees_needs_input_grad():
    from opforge.autodiff import registry
    seen = []

    @of.RegisterGradient("Sub")  # registered once per process: restored below
    def sub_grad(op, dz):
        seen.append(tuple(op.needs_input_grad))
        return [dz if op.needs_input_grad[0] else None, -dz if op.needs_input_grad[1] else None]

    try:
        x = of.tensor(r(3), requires_grad=True)
        y = r(3)
        of.sum(of.sub(x, y)).backward()
        of.sum(of.sub(y, x)).backward()
        assert seen == [(True, False), (False, True)]
        np.testing.assert_array_equal(x.grad.numpy(), np.zeros(3))  # +1, then -1

        g = of.Graph()
        with g.as_default():
            p = of.placeholder(of.float64, shape=[3])
            q = of.placeholder(of.float64, shape=[3])
            of.gradients(of.sum(of.sub(p, q)), [q])
        assert seen[-1] == (False, True)  # p is not on a path from xs
    finally:
        del registry._python["Sub"]


def _mlp(x, w1, w2):
    return of.sum(of.square(of.matmul(of.tanh(of.matmul(x, w1)), w2)))


def test_graph_gradients_skip_what_xs_do_not_need_and_equal_eager():
    xv, w1v, w2v = r(5, 4), r(4, 6), r(6, 2)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float64, shape=[5, 4])
        w1 = of.placeholder(of.float64, shape=[4, 6])
        w2 = of.constant(w2v)
        (gw1,) = of.gradients(_mlp(x, w1, w2), [w1])
    grads = [op for op in g.get_operations() if op.type == "MatMulGrad"]
    assert len(grads) == 2
    # The first layer's gradient needs neither x's, the second's not w2's.
    flags = sorted((op.get_attr("compute_grad_a"), op.get_attr("compute_grad_b")) for op in grads)
    assert flags == [(False, True), (True, False)]
    with of.Session(g) as sess:
        got = sess.run(gw1, feed_dict={x: xv, w1: w1v})
    want = of.grad(lambda a: _mlp(xv, a, w2v))(w1v)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12)


def test_second_derivative_through_a_skipped_operand_equals_autograd():
    # Hessian-vector product in w1 of an MLP whose input needs no gradient:
    # MatMulGrad's own gradient runs with compute_grad_a false.
    autograd = pytest.importorskip("autograd")
    anp = autograd.numpy
    xv, w1v, w2v, v = r(5, 4), r(4, 6), r(6, 2), r(4, 6)

    def ref(w1):
        return anp.sum(anp.square(anp.dot(anp.tanh(anp.dot(xv, w1)), w2v)))

    want = autograd.grad(lambda w: anp.sum(autograd.grad(ref)(w) * v))(w1v)
    got = of.grad(lambda w: of.sum(of.grad(lambda u: _mlp(xv, u, w2v))(w) * v))(w1v)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)
