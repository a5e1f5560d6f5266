"""of.autograd.Function (finite differences and closed forms as oracles) and of.grad over pytrees."""

import collections
import gc

import numpy as np
import pytest

import opforge as of
from opforge import errors
from opforge.autograd import function as function_module


class Exp(of.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = of.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return dy * y


class ScaledSquare(of.autograd.Function):
    """x**2 * k for a Python number k (no gradient) and a tensor x; backward deliberately in numpy."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return of.tensor(x.numpy() ** 2 * k)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return of.tensor(dy.numpy() * 2 * ctx.k * x.numpy()), None


class SplitSum(of.autograd.Function):
    """Two outputs: (sum of x, sum of x * w)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return of.sum(x), of.sum(x * w)

    @staticmethod
    def backward(ctx, d_sum, d_dot):
        x, w = ctx.saved_tensors
        return of.ones_like(x) * d_sum + w * d_dot, x * d_dot


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def test_function_on_the_tape():
    a = np.array([0.5, -1.0, 2.0])
    x = of.tensor(a, requires_grad=True)
    y = Exp.apply(x)
    assert y.requires_grad and y.grad_fn.type == "PythonFunction"
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(2 * a), rtol=1e-12)
    x.grad = None
    z = ScaledSquare.apply(of.tanh(x), 3.0)  # inside a chain of recorded ops
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), _fd(lambda v: np.sum(np.tanh(v) ** 2 * 3), a), rtol=1e-6)


def test_several_outputs_and_needs_input_grad():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 4.0])
    x, w = of.tensor(a, requires_grad=True), of.tensor(b, requires_grad=True)
    s, d = SplitSum.apply(x, w)
    (s * 2.0 + d * 3.0).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 + 3 * b)
    np.testing.assert_allclose(w.grad.numpy(), 3 * a)
    seen = []

    class Probe(of.autograd.Function):
        @staticmethod
        def forward(ctx, p, q):
            seen.append(ctx.needs_input_grad)
            return p * q

        @staticmethod
        def backward(ctx, g):
            return g, None

    Probe.apply(x, b)
    assert seen == [(True, False)]


def test_without_grad_no_node_and_the_context_is_freed():
    x = of.tensor(np.ones(2))
    assert Exp.apply(x).grad_fn is None
    xr = of.tensor(np.ones(2), requires_grad=True)
    with of.no_grad():
        assert not Exp.apply(xr).requires_grad
    before = len(function_module._contexts)
    y = Exp.apply(xr)
    assert len(function_module._contexts) == before + 1
    del y
    gc.collect()
    assert len(function_module._contexts) == before


def test_function_in_a_graph_with_gradients():
    a = np.array([-1.0, 0.0, 2.0])
    eager_contexts = len(function_module._contexts)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float64, [3])
        s, d = SplitSum.apply(x, of.constant(a * 2))
        y = Exp.apply(x)
        loss = of.sum(y * y) + s * 2.0 + d
        (gx,) = of.gradients(loss, [x])
    with of.Session(g) as sess:
        vy, vg = sess.run([y, gx], feed_dict={x: a})
    np.testing.assert_allclose(vy, np.exp(a), rtol=1e-12)
    np.testing.assert_allclose(vg, 2 * np.exp(2 * a) + 2 + 2 * a, rtol=1e-12)
    assert len(g._autograd_functions) == 2 and len(function_module._contexts) == eager_contexts  # the contexts live in the graph


def test_function_errors():
    class WrongCount(of.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g, g

    x = of.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(errors.InvalidArgumentError, match="WrongCount.backward returned 2 gradients"):
        WrongCount.apply(x).sum().backward()
    with pytest.raises(errors.UnimplementedError, match="share one float dtype"):
        SplitSum.apply(x, of.tensor(np.ones(2, np.float32), requires_grad=True))


def test_value_and_grad_over_pytrees():
    rng = np.random.default_rng(0)
    W, b, X = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal((4, 3))

    def loss(params, x):
        return of.sum(of.tanh(x @ params["w"] + params["b"]) ** 2)

    value, g = of.value_and_grad(loss)({"w": W, "b": b}, X)
    ref = lambda W_, b_: np.sum(np.tanh(X @ W_ + b_) ** 2)  # noqa: E731
    assert abs(float(value) - ref(W, b)) < 1e-12 and list(g) == ["w", "b"]
    np.testing.assert_allclose(g["w"].numpy(), _fd(lambda v: ref(v, b), W), rtol=1e-6)
    np.testing.assert_allclose(g["b"].numpy(), _fd(lambda v: ref(W, v), b), rtol=1e-6)

    P = collections.namedtuple("P", "w b")
    tree = [P(W, b), (X,)]
    g = of.grad(lambda t: of.sum(t[1][0] @ t[0].w + t[0].b))(tree)
    assert isinstance(g, list) and isinstance(g[0], P) and isinstance(g[1], tuple)
    np.testing.assert_allclose(g[0].b.numpy(), np.full(2, 4.0))
    np.testing.assert_allclose(g[1][0].numpy(), np.tile(W.sum(1), (4, 1)))
    od = collections.OrderedDict(a=np.float64(2.0), c=np.float64(3.0))
    ga, gx = of.grad(lambda p, x: p["a"] * p["c"] * x, argnums=(0, 1))(od, np.float64(5.0))
    assert type(ga) is collections.OrderedDict and float(ga["a"]) == 15 and float(ga["c"]) == 10 and float(gx) == 6
    plain = of.grad(lambda x: of.sum(x * x))(np.array([1.0, 2.0]))  # a bare tensor still works
    np.testing.assert_allclose(plain.numpy(), [2.0, 4.0])
    with pytest.raises(errors.InvalidArgumentError, match="no tensors"):
        of.grad(lambda d: 0)({})


def test_pytree_grad_of_model_parameters():
    model = of.nn.Linear(3, 2, seed=0)
    x = np.ones((4, 3), np.float32)
    params = {k: v.detach() for k, v in model.state_dict().items()}
    g = of.grad(lambda p: of.sum(of.nn.functional.linear(x, p["weight"], p["bias"])))(params)
    np.testing.assert_allclose(g["weight"].numpy(), np.full((2, 3), 4.0))
    np.testing.assert_allclose(g["bias"].numpy(), np.full(2, 4.0))
