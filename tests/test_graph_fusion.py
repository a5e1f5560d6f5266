"""The graph elementwise fusion pass (cpp/framework/graph_fusion.cc): chains of
float elementwise nodes run as one FusedElementwise node when a graph is
planned. Oracles: the same graph planned with OPFORGE_GRAPH_FUSION=0 (equal
bits: the fused kernel runs the same loops per op) and numpy."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge as of
from opforge import errors
from opforge.ops import gen_fused_elementwise_ops as fe


def _run(build, feeds, fuse, monkeypatch, fetch_all=False):
    """Builds a graph with build(placeholders) and runs it, fusion on or off;
    returns (results, nodes_run)."""
    monkeypatch.setenv("OPFORGE_GRAPH_FUSION", "1" if fuse else "0")
    g = of.Graph()
    with g.as_default():
        phs = [of.placeholder(of.as_dtype(v.dtype), list(v.shape)) for v in feeds]
        outs = build(*phs)
    with of.Session(g) as sess:
        got = sess.run(outs, dict(zip(phs, feeds)))
        return got, sess.last_run_stats["nodes_run"]


# Unary steps as (opforge, numpy); the domain-limited ones take |x| first.
_UNARY = {
    "neg": (of.neg, np.negative),
    "abs": (of.abs, np.abs),
    "square": (of.square, np.square),
    "relu": (of.relu, lambda v: np.maximum(v, 0)),
    "exp": (lambda v: of.exp(of.tanh(v)), lambda v: np.exp(np.tanh(v))),
    "log": (lambda v: of.log(of.abs(v) + 1.0), lambda v: np.log(np.abs(v) + 1)),
    "sqrt": (lambda v: of.sqrt(of.abs(v)), lambda v: np.sqrt(np.abs(v))),
    "tanh": (of.tanh, np.tanh),
    "sigmoid": (of.sigmoid, lambda v: 1 / (1 + np.exp(-v))),
    "sin": (of.sin, np.sin),
    "cos": (of.cos, np.cos),
    "pow3": (lambda v: v ** 3.0, lambda v: v ** 3),
    "pow-0.5": (lambda v: (of.abs(v) + 1.0) ** -0.5, lambda v: (np.abs(v) + 1) ** -0.5),
    "pow1.7": (lambda v: of.abs(v) ** 1.7, lambda v: np.abs(v) ** 1.7),
}
_BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]


def _binary(name, a, b, lib):
    if name == "div":
        return a / (lib.abs(b) + 1.0)
    f = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
         "maximum": lambda: lib.maximum(a, b), "minimum": lambda: lib.minimum(a, b)}[name]
    return f()


def _chain(steps, lib, x, row):
    v = x
    for kind, name, operand in steps:
        if kind == "u":
            v = (_UNARY[name][0] if lib is of else _UNARY[name][1])(v)
        else:
            other = {"x": x, "row": row, "scalar": x.dtype.type(0.75) if lib is np else 0.75}[operand]
            v = _binary(name, v, other, lib) if operand != "scalar" or name != "div" else v / 0.75
    return v


_step = st.one_of(
    st.tuples(st.just("u"), st.sampled_from(sorted(_UNARY)), st.just(None)),
    st.tuples(st.just("b"), st.sampled_from(_BINARY), st.sampled_from(["x", "row", "scalar"])),
)


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(_step, min_size=2, max_size=8), dtype=st.sampled_from([np.float32, np.float64]),
       seed=st.integers(0, 2**16))
def test_random_chains_equal_the_unfused_graph_and_numpy(steps, dtype, seed):
    rng = np.random.default_rng(seed)
    xv = rng.normal(size=(3, 1500)).astype(dtype)  # several blocks and a partial one
    rowv = rng.normal(size=(1500,)).astype(dtype)
    mp = pytest.MonkeyPatch()
    try:
        fused, n_fused = _run(lambda x, r: _chain(steps, of, x, r), [xv, rowv], True, mp)
        plain, n_plain = _run(lambda x, r: _chain(steps, of, x, r), [xv, rowv], False, mp)
    finally:
        mp.undo()
    np.testing.assert_array_equal(fused, plain)
    # numpy in float64; a chain like |x|**1.7 three times then cos amplifies the inputs' own
    # rounding, so the allowed error grows with the reference's change under a relative nudge
    # of the inputs by the dtype's epsilon (the problem's conditioning, not the kernel's error).
    eps = np.finfo(dtype).eps
    with np.errstate(all="ignore"):
        want = _chain(steps, np, xv.astype(np.float64), rowv.astype(np.float64))
        nudged = _chain(steps, np, xv * (1 + 2 * eps), rowv * (1 + 2 * eps))
        tol = 2e-5 if dtype == np.float32 else 1e-12
        bound = tol * np.max(np.abs(want), initial=1) + tol * np.abs(want) + 4 * np.abs(nudged - want)
        np.testing.assert_array_less(np.abs(fused - want), bound + np.finfo(np.float64).tiny)
    assert n_fused < n_plain


def test_gpt2_tanh_gelu_chain_is_one_node(monkeypatch):
    # The import-time rewrite's form of GPT-2's GELU (onnx/_rewrite.py): six ops.
    k = float(np.sqrt(2 / np.pi))

    def gelu(x):
        u = 2 * k + (2 * k * 0.044715) * (x * x)
        return x * of.sigmoid(x * u)
    xv = np.random.default_rng(0).normal(size=(2, 16, 256)).astype(np.float32)
    fused, n1 = _run(gelu, [xv], True, monkeypatch)
    plain, n6 = _run(gelu, [xv], False, monkeypatch)
    assert (n1, n6) == (1, 6)
    np.testing.assert_array_equal(fused, plain)
    want = 0.5 * xv * (1 + np.tanh(k * (xv + 0.044715 * xv ** 3)))
    np.testing.assert_allclose(fused, want, rtol=1e-5, atol=1e-6)


def test_a_fetched_intermediate_keeps_its_node(monkeypatch):
    xv = np.linspace(-3, 3, 50, dtype=np.float32)

    def build(x):
        mid = of.exp(of.tanh(x))
        return [mid, x * mid]
    (mid, out), n = _run(build, [xv], True, monkeypatch)
    assert n == 2  # Exp(Tanh) fused; the Mul reads the fetched value
    (mid0, out0), n0 = _run(build, [xv], False, monkeypatch)
    assert n0 == 3
    np.testing.assert_array_equal(mid, mid0)
    np.testing.assert_array_equal(out, out0)
    only, n1 = _run(lambda x: x * of.exp(of.tanh(x)), [xv], True, monkeypatch)
    assert n1 == 1
    np.testing.assert_array_equal(only, out0)


def test_an_intermediate_read_outside_the_chain_is_not_absorbed(monkeypatch):
    xv = np.random.default_rng(1).normal(size=(4, 8))

    def build(x):
        t = of.tanh(x)
        a = of.exp(t) + 1.0
        return of.matmul(t, of.transpose(a))  # t is read by the chain and by Transpose/MatMul
    fused, _ = _run(build, [xv], True, monkeypatch)
    plain, _ = _run(build, [xv], False, monkeypatch)
    np.testing.assert_array_equal(fused, plain)
    np.testing.assert_allclose(fused, np.tanh(xv) @ (np.exp(np.tanh(xv)) + 1).T, rtol=1e-12)


def test_control_dependencies_on_an_intermediate_are_kept(monkeypatch):
    monkeypatch.setenv("OPFORGE_GRAPH_FUSION", "1")
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [5])
        v = of.Variable(np.zeros(5, np.float32))
        mid = of.exp(x)
        with of.control_dependencies([mid]):
            upd = v.assign(x * 2.0)
        y = of.sqrt(mid) + 1.0
    xv = np.arange(5, dtype=np.float32)
    with of.Session(g) as sess:
        sess.run(v.initializer) if hasattr(v, "initializer") else None
        yv, _ = sess.run([y, upd], {x: xv})
        assert sess.last_run_stats["nodes_run"] >= 4  # exp stays its own node: Assign waits on it
    np.testing.assert_allclose(yv, np.sqrt(np.exp(xv)) + 1, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradients_through_a_fused_graph(dtype, monkeypatch):
    """The pass runs when the graph is planned, after of.gradients built the
    backward nodes from the original ones, so the fused op needs no gradient;
    the intermediates the backward nodes read stay nodes of their own."""
    xv = np.linspace(-4, 4, 2000).astype(dtype)

    def build(x):
        y = x * of.sigmoid(x)  # SiLU
        loss = of.sum(of.tanh(y) * 0.5 + y * y)
        (dx,) = of.gradients(loss, x)
        return [loss, dx]
    (l1, d1), n1 = _run(build, [xv], True, monkeypatch)
    (l0, d0), n0 = _run(build, [xv], False, monkeypatch)
    assert n1 < n0
    np.testing.assert_array_equal(d1, d0)
    s = 1 / (1 + np.exp(-xv.astype(np.float64)))
    y = xv * s
    dy = 0.5 * (1 - np.tanh(y) ** 2) + 2 * y
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(d1, dy * (s + xv * s * (1 - s)), rtol=tol, atol=tol)


def test_unknown_dims_and_reshaped_feeds(monkeypatch):
    monkeypatch.setenv("OPFORGE_GRAPH_FUSION", "1")
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [None, 6])
        b = of.placeholder(of.float32, [6])
        y = of.relu(x * 2.0 + b) - of.tanh(b)
    with of.Session(g) as sess:
        for rows in (1, 3, 700):
            xv = np.random.default_rng(rows).normal(size=(rows, 6)).astype(np.float32)
            bv = np.arange(6, dtype=np.float32) / 3
            got = sess.run(y, {x: xv, b: bv})
            np.testing.assert_allclose(got, np.maximum(xv * 2 + bv, 0) - np.tanh(bv), rtol=1e-6, atol=1e-6)
            assert sess.last_run_stats["nodes_run"] == 2  # Tanh(b) stays one pass over the row


def test_general_broadcast_inputs_are_expanded(monkeypatch):
    xv = np.random.default_rng(2).normal(size=(4, 1, 5))
    cv = np.random.default_rng(3).normal(size=(3, 1))
    got, n = _run(lambda x, c: of.exp(x - c) * c, [xv, cv], True, monkeypatch)
    assert n == 1
    np.testing.assert_allclose(got, np.exp(xv - cv) * cv, rtol=1e-12)


def test_the_op_called_directly_and_its_bad_programs():
    x = np.array([[1.0, -2.0, 3.0]], np.float32)
    # r0 = x; r1 = 2.5; r2 = r0 * r1; r0 = sigmoid(r2); r1 = r2 * r0
    prog = [0, 0, 0, 0, 1, 1, 0, 0, 14 + 2, 2, 0, 1, 10, 0, 2, 0, 16, 1, 2, 0]
    y = fe.fused_elementwise([x], program=prog, constants=[2.5])
    z = 2.5 * x
    np.testing.assert_allclose(y.numpy(), z / (1 + np.exp(-z)), rtol=1e-6)
    with pytest.raises(errors.InvalidArgumentError, match="FusedElementwise.*program"):
        fe.fused_elementwise([x], program=[16, 1, 0, 0], constants=[])  # reads registers never written
    with pytest.raises(errors.InvalidArgumentError, match="FusedElementwise.*program"):
        fe.fused_elementwise([x], program=[0, 0, 3, 0, 2, 1, 0, 0])  # input 3 of 1
    with pytest.raises(errors.InvalidArgumentError, match="FusedElementwise.*program"):
        fe.fused_elementwise([x], program=[99, 0, 0, 0])
    with pytest.raises(errors.InvalidArgumentError, match="FusedElementwise.*program"):
        fe.fused_elementwise([x], program=[0, 0, 0])
