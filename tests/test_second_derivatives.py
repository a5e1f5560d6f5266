"""Second derivatives end to end: Hessian-vector products through the
backward ops' own gradients, against autograd in float64, eager and graph."""
import numpy as np
import pytest

import opforge as of

autograd = pytest.importorskip("autograd")
anp = autograd.numpy

RNG = np.random.default_rng(11)


def hvp(loss, params, vs):
    """H v of `loss` at `params`: the gradient of <grad loss, v>."""
    n = len(params)

    def inner(*ps):
        gs = of.grad(loss, argnums=tuple(range(n)))(*ps)
        return sum(of.sum(g * v) for g, v in zip(gs, vs))
    return [g.numpy() for g in of.grad(inner, argnums=tuple(range(n)))(*params)]


def ref_hvp(ref_loss, params, vs):
    n = len(params)
    grad = autograd.grad(ref_loss, argnum=tuple(range(n)))

    def inner(*ps):
        return sum(anp.sum(g * v) for g, v in zip(grad(*ps), vs))
    return autograd.grad(inner, argnum=tuple(range(n)))(*params)


def assert_hvp_matches(loss, ref_loss, params):
    vs = [RNG.normal(size=np.shape(p)) for p in params]
    got, want = hvp(loss, params, vs), ref_hvp(ref_loss, params, vs)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10, err_msg=f"H v w.r.t. parameter {i}")


# --- an MLP with softmax cross-entropy (SparseSoftmaxCrossEntropyWithLogits) -

X = RNG.normal(size=(6, 5))
LABELS = np.array([0, 2, 1, 2, 0, 1])
MLP = [RNG.normal(size=(5, 4)), RNG.normal(size=4), RNG.normal(size=(4, 3)), RNG.normal(size=3)]


def mlp_loss(w1, b1, w2, b2):
    logits = of.matmul(of.tanh(of.matmul(X, w1) + b1), w2) + b2
    loss, _ = of.sparse_softmax_cross_entropy_with_logits(logits, LABELS)
    return of.mean(loss)


def ref_mlp_loss(w1, b1, w2, b2):
    logits = anp.dot(anp.tanh(anp.dot(X, w1) + b1), w2) + b2
    logits = logits - anp.max(logits, axis=1, keepdims=True)
    logp = logits - anp.log(anp.sum(anp.exp(logits), axis=1, keepdims=True))
    return -anp.mean(logp[np.arange(len(LABELS)), LABELS])


def test_hvp_of_an_mlp_with_softmax_cross_entropy():
    assert_hvp_matches(mlp_loss, ref_mlp_loss, MLP)


def test_hvp_of_an_mlp_through_softmax_and_gather():
    # Softmax (SoftmaxGrad's gradient) and an embedding lookup (GatherGrad's).
    ids = np.array([3, 0, 3, 1])
    table, w = RNG.normal(size=(5, 4)), RNG.normal(size=(4, 3))
    onehot = np.eye(3)[[0, 2, 1, 1]]

    def loss(table, w):
        p = of.softmax(of.matmul(of.gather(table, ids), w))
        return -of.sum(onehot * of.log(p))

    def ref(table, w):
        z = anp.dot(table[ids], w)
        e = anp.exp(z - anp.max(z, axis=1, keepdims=True))
        return -anp.sum(onehot * anp.log(e / anp.sum(e, axis=1, keepdims=True)))
    assert_hvp_matches(loss, ref, [table, w])


# --- LayerNorm and RmsNorm -----------------------------------------------------

def test_hvp_of_layer_norm():
    x, w, b = RNG.normal(size=(3, 2, 5)), RNG.normal(size=5), RNG.normal(size=5)
    c = RNG.normal(size=(3, 2, 5))

    def loss(x, w, b):
        return of.sum(of.tanh(of.layer_norm(x, w, b, epsilon=1e-3)) * c)

    def ref(x, w, b):
        m = anp.mean(x, axis=-1, keepdims=True)
        v = anp.mean((x - m) ** 2, axis=-1, keepdims=True)
        return anp.sum(anp.tanh((x - m) / anp.sqrt(v + 1e-3) * w + b) * c)
    assert_hvp_matches(loss, ref, [x, w, b])


def test_hvp_of_rms_norm():
    x, w = RNG.normal(size=(4, 6)), RNG.normal(size=6)
    c = RNG.normal(size=(4, 6))

    def loss(x, w):
        return of.sum(of.tanh(of.rms_norm(x, w, epsilon=1e-4)) * c)

    def ref(x, w):
        return anp.sum(anp.tanh(x / anp.sqrt(anp.mean(x ** 2, axis=-1, keepdims=True) + 1e-4) * w) * c)
    assert_hvp_matches(loss, ref, [x, w])


def test_hessian_of_gelu_and_concat_matches_finite_differences():
    # autograd's erf needs scipy: the oracle here is central differences of
    # the (already checked) first derivative.
    def loss(a, b):
        return of.sum(of.gelu(of.concat([a, b * of.slice(a, begin=[0, 0], size=[2, 2])], axis=1)) ** 3)

    def gradient(a, b):
        ga, gb = of.grad(loss, argnums=(0, 1))(a, b)
        return of.concat([of.reshape(ga, [-1]), of.reshape(gb, [-1])], axis=0)
    of.testing.check_gradients(gradient, [RNG.normal(size=(2, 3)), RNG.normal(size=(2, 2))],
                               atol=1e-6, rtol=1e-5, delta=1e-6)


# --- a matmul chain with broadcast batch dims and transposes ------------------

def test_hvp_of_a_matmul_chain_with_broadcast_batch_dims():
    a, b, c = RNG.normal(size=(2, 1, 3, 4)), RNG.normal(size=(3, 5, 4)), RNG.normal(size=(5, 2))

    def loss(a, b, c):
        ab = of.matmul(a, b, transpose_b=True)            # (2, 3, 3, 5)
        return of.sum(of.tanh(of.matmul(ab, c)))          # (2, 3, 3, 2)

    def ref(a, b, c):
        return anp.sum(anp.tanh(anp.matmul(anp.matmul(a, anp.swapaxes(b, -1, -2)), c)))
    assert_hvp_matches(loss, ref, [a, b, c])


def test_third_derivative_through_compositions():
    # d3/dx3 sum(softmax(x) * c) along v, from three nested gradients.
    x, c, v = RNG.normal(size=4), RNG.normal(size=4), RNG.normal(size=4)

    def f(x):
        return of.sum(of.softmax(x) * c)

    def dir2(x):
        return of.sum(of.grad(lambda y: of.sum(of.grad(f)(y) * v))(x) * v)

    def ref(x):
        e = anp.exp(x - anp.max(x))
        return anp.sum(e / anp.sum(e) * c)
    ref2 = autograd.grad(lambda y: anp.sum(autograd.grad(lambda z: anp.sum(autograd.grad(ref)(z) * v))(y) * v))
    np.testing.assert_allclose(of.grad(dir2)(x).numpy(), ref2(x), rtol=1e-8, atol=1e-10)


# --- graph mode: of.gradients of of.gradients ----------------------------------

def test_graph_gradients_of_gradients_equal_the_eager_hvp():
    vs = [RNG.normal(size=np.shape(p)) for p in MLP]
    g = of.Graph()
    with g.as_default():
        params = [of.placeholder(of.float64, shape=list(np.shape(p))) for p in MLP]
        grads = of.gradients(mlp_loss(*params), params)
        inner = of.sum(grads[0] * vs[0])
        for gr, v in zip(grads[1:], vs[1:]):
            inner = inner + of.sum(gr * v)
        hv = of.gradients(inner, params)
    with of.Session(g) as sess:
        got = sess.run(hv, feed_dict=dict(zip(params, MLP)))
    want = ref_hvp(ref_mlp_loss, MLP, vs)
    for gv, wv in zip(got, want):
        np.testing.assert_allclose(gv, wv, rtol=1e-8, atol=1e-10)
