"""Backward ops (gen_grad_ops) against numpy formulas and finite differences.

Each op is the gradient of a forward op: its result must equal the gradient
of L = sum(grad * forward(x)), which the tests compute two ways: a numpy
formula written independently of the kernel, and central differences of the
forward op itself (exact up to rounding for the linear ops).
"""
import numpy as np
import pytest

import opforge as of
from opforge import errors
from opforge.ops import gen_grad_ops as G

FLOATS = [np.float32, np.float64]
RNG = np.random.default_rng(9)


def _np(t):
    return np.asarray(t.numpy() if isinstance(t, of.Tensor) else t)


def _rtol(dtype):
    return 1e-5 if dtype == np.float32 else 1e-12


def _close(got, want, dtype, scale=1.0):
    got = _np(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want.astype(dtype), rtol=_rtol(dtype) * 10,
                               atol=_rtol(dtype) * 10 * scale, equal_nan=True)


def rand(shape, dtype=np.float64, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape).astype(dtype)


def numeric_grad(f, x, g, h=1e-6):
    """Central differences of sum(g * f(x)) w.r.t. x, in float64 (exact up to
    rounding for linear f, so those use a large h)."""
    x = x.astype(np.float64)
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += h
        xm[i] -= h
        out[i] = (np.sum(g * f(xp)) - np.sum(g * f(xm))) / (2 * h)
    return out


def forward(op, **attrs):
    return lambda *xs: _np(op(*xs, **attrs)).astype(np.float64)


# ------------------------------------------------------------- SoftmaxGrad


def softmax_grad_np(s, g, axis):
    s, g = s.astype(np.float64), g.astype(np.float64)
    return s * (g - (g * s).sum(axis, keepdims=True))


SOFTMAX_CASES = [((5,), -1), ((3, 4), 0), ((3, 4), -1), ((2, 3, 4), 1), ((2, 3, 4), -3), ((4, 700), -1),
                 ((700, 3), 0), ((3, 300, 5), 1), ((2, 5, 300), 1), ((1,), 0), ((0, 3), -1), ((3, 0), 0)]


@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_grad_matches_formula(dtype, shape, axis):
    s = _np(of.softmax(rand(shape, dtype) * 3, axis=axis))
    g = rand(shape, dtype)
    _close(G.softmax_grad(s, g, axis=axis), softmax_grad_np(s, g, axis), dtype)


@pytest.mark.parametrize("shape,axis", [((4,), 0), ((2, 3), 0), ((2, 3, 2), -2)])
def test_softmax_grad_matches_finite_differences(shape, axis):
    x, g = rand(shape), rand(shape)
    s = _np(of.softmax(x, axis=axis))
    want = numeric_grad(forward(of.softmax, axis=axis), x, g)
    np.testing.assert_allclose(_np(G.softmax_grad(s, g, axis=axis)), want, rtol=1e-7, atol=1e-9)


def test_softmax_grad_default_axis_is_last():
    s, g = rand((3, 4)), rand((3, 4))
    _close(G.softmax_grad(s, g), softmax_grad_np(s, g, -1), np.float64)


# ------------------------------------------------------------- RmsNormGrad


def rms_norm_grad_np(x, w, g, eps):
    x, w, g = (a.astype(np.float64) for a in (x, w, g))
    d = x.shape[-1]
    r = 1 / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps)
    gx = r * g * w - x * r**3 / d * np.sum(g * w * x, -1, keepdims=True)
    gw = np.sum(g * x * r, tuple(range(x.ndim - 1)))
    return gx, gw


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 8), (70, 33), (3000, 4), (2, 20000), (0, 4), (3, 0)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_rms_norm_grad_matches_formula(dtype, shape):
    x, g, w = rand(shape, dtype), rand(shape, dtype), rand(shape[-1:], dtype)
    gx, gw = G.rms_norm_grad(x, w, g, epsilon=1e-5)
    want_x, want_w = rms_norm_grad_np(x, w, g, 1e-5)
    _close(gx, want_x, dtype)
    _close(gw, want_w, dtype, scale=1 + np.abs(want_w).max(initial=0))


@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 2, 3)])
@pytest.mark.parametrize("eps", [0.0, 1e-6, 0.5])
def test_rms_norm_grad_matches_finite_differences(shape, eps):
    x, g, w = rand(shape), rand(shape), rand(shape[-1:])
    gx, gw = G.rms_norm_grad(x, w, g, epsilon=eps)
    np.testing.assert_allclose(_np(gx), numeric_grad(lambda v: forward(of.rms_norm, epsilon=eps)(v, w), x, g),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(_np(gw), numeric_grad(lambda v: forward(of.rms_norm, epsilon=eps)(x, v), w, g),
                               rtol=1e-6, atol=1e-8)


def test_rms_norm_grad_float32_accumulates_in_float64():
    # Long rows of large values: float32 accumulation would lose digits.
    x = (rand((2, 100000), np.float32) + 1000).astype(np.float32)
    g, w = rand(x.shape, np.float32), rand(x.shape[-1:], np.float32)
    gx, gw = G.rms_norm_grad(x, w, g)
    want_x, want_w = rms_norm_grad_np(x, w, g, 1e-6)
    np.testing.assert_allclose(_np(gx), want_x, rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(_np(gw), want_w, rtol=1e-5, atol=1e-6)


# -------------------------------------------------------------- MatMulGrad


def _unbroadcast(g, shape):
    """Sums g down to `shape` (numpy broadcasting in reverse)."""
    g = g.sum(tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g
    return g.sum(tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1), keepdims=True)


def mat_mul_grad_np(a, b, g, ta, tb):
    """Gradients by the matrix rules on numpy.matmul, independent of the kernel."""
    a, b, g = (v.astype(np.float64) for v in (a, b, g))
    a2 = a[None, :] if a.ndim == 1 else (np.swapaxes(a, -1, -2) if ta else a)
    b2 = b[:, None] if b.ndim == 1 else (np.swapaxes(b, -1, -2) if tb else b)
    g2 = g
    if a.ndim == 1:
        g2 = g2[..., None, :] if b.ndim > 1 else g2[..., None]
    if b.ndim == 1:
        g2 = g2[..., None]
    da = g2 @ np.swapaxes(b2, -1, -2)
    db = np.swapaxes(a2, -1, -2) @ g2
    da = _unbroadcast(da, a2.shape)
    db = _unbroadcast(db, b2.shape)
    da = da.reshape(a.shape) if a.ndim == 1 else (np.swapaxes(da, -1, -2) if ta else da)
    db = db.reshape(b.shape) if b.ndim == 1 else (np.swapaxes(db, -1, -2) if tb else db)
    return da, db


def _stored(shape, transposed):
    return shape[:-2] + (shape[-1], shape[-2]) if transposed and len(shape) >= 2 else shape


MATMUL_CASES = [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 6)), ((1, 3, 4), (2, 4, 5)), ((2, 3, 4), (1, 4, 5)), ((4,), (3, 4, 2)),
    ((3, 2, 4), (4,)), ((64, 100), (100, 70)), ((3, 40, 50), (50, 60)), ((0, 4), (4, 5)), ((3, 0), (0, 5)),
    ((2, 0, 3, 4), (4, 5)), ((7, 1, 30, 20), (1, 6, 20, 25)),
]


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("sa,sb", MATMUL_CASES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_mat_mul_grad_matches_formula(dtype, sa, sb, ta, tb):
    a, b = rand(_stored(sa, ta), dtype), rand(_stored(sb, tb), dtype)
    g = rand(_np(of.matmul(a, b, transpose_a=ta, transpose_b=tb)).shape, dtype)
    da, db = G.mat_mul_grad(a, b, g, transpose_a=ta, transpose_b=tb)
    want_a, want_b = mat_mul_grad_np(a, b, g, ta, tb)
    scale = 1 + max(np.abs(want_a).max(initial=0), np.abs(want_b).max(initial=0))
    _close(da, want_a, dtype, scale)
    _close(db, want_b, dtype, scale)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("sa,sb", [((2, 3), (3, 2)), ((3,), (2, 3, 2)), ((2, 1, 2, 3), (3, 3, 2)), ((2, 3), (3,))])
def test_mat_mul_grad_matches_finite_differences(sa, sb, ta, tb):
    a, b = rand(_stored(sa, ta)), rand(_stored(sb, tb))
    mm = forward(of.matmul, transpose_a=ta, transpose_b=tb)
    g = rand(mm(a, b).shape)
    da, db = G.mat_mul_grad(a, b, g, transpose_a=ta, transpose_b=tb)
    np.testing.assert_allclose(_np(da), numeric_grad(lambda v: mm(v, b), a, g, h=1e-2), rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(_np(db), numeric_grad(lambda v: mm(a, v), b, g, h=1e-2), rtol=1e-8, atol=1e-9)


def test_mat_mul_grad_without_blas_matches(monkeypatch):
    # The fallback GEMM (OPFORGE_BLAS=none) runs in a fresh interpreter.
    import subprocess
    import sys
    code = ("import numpy as np, opforge as of; r = np.random.default_rng(0);"
            "a, b, g = r.random((2, 30, 40)), r.random((30, 50)), r.random((2, 40, 50));"
            "da, db = of.raw_ops.mat_mul_grad(a, b, g, transpose_a=True);"
            "print(abs(da.numpy() - b @ np.swapaxes(g, 1, 2)).max(),"
            " abs(db.numpy() - (a @ g).sum(0)).max())")
    out = subprocess.run([sys.executable, "-c", code], env={**__import__("os").environ, "OPFORGE_BLAS": "none"},
                         capture_output=True, text=True, check=True).stdout.split()
    assert max(float(v) for v in out) < 1e-10


# -------------------------------------------------------------- ReduceGrad

FORWARD = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}


def reduce_grad_np(x, y, g, reduction, axis, keepdims):
    """The gradient by its definition, element by element (prod: product of the others)."""
    x, y, g = (v.astype(np.float64) for v in (x, y, g))
    ax = tuple(range(x.ndim)) if axis is None else tuple(a % x.ndim for a in axis)
    if not keepdims:
        y, g = np.expand_dims(y, ax), np.expand_dims(g, ax)
    gb = np.broadcast_to(g, x.shape)
    if reduction == "sum":
        return gb.copy()
    if reduction == "mean":
        return gb / np.prod([x.shape[a] for a in ax])
    if reduction in ("max", "min"):
        mask = (x == y) | (np.isnan(x) & np.isnan(y))
        return np.where(mask, gb / mask.sum(ax, keepdims=True), 0)
    out = np.empty_like(x)
    for i in np.ndindex(x.shape):
        others = x.copy()
        others[i] = 1
        out[i] = np.broadcast_to(np.prod(others, ax, keepdims=True), x.shape)[i] * gb[i]
    return out


REDUCE_CASES = [
    ((3, 4), None, False), ((3, 4), [0], False), ((3, 4), [-1], True), ((2, 3, 4), [0, 2], False),
    ((2, 3, 4), [-2], True), ((2, 3, 4), [], False), ((), None, False), ((5,), [0], True),
    ((2, 3, 4, 5), [1, 3], True), ((0, 3), [1], False), ((0, 3), [0], True),
]


@pytest.mark.parametrize("shape,axis,keepdims", REDUCE_CASES)
@pytest.mark.parametrize("reduction", list(FORWARD))
@pytest.mark.parametrize("dtype", FLOATS)
def test_reduce_grad_matches_definition(dtype, reduction, shape, axis, keepdims):
    ax = None if axis is None else tuple(axis)
    if reduction in ("max", "min") and 0 in shape and (ax is None or any(shape[a] == 0 for a in ax)):
        pytest.skip("no maximum of zero elements (an error, tested below)")
    # Small integers: many ties for max/min, and zeros for prod.
    x = RNG.integers(-2, 3, shape).astype(dtype)
    y = np.asarray(FORWARD[reduction](x, axis=ax, keepdims=keepdims), dtype)
    g = rand(y.shape, dtype)
    got = G.reduce_grad(x, y, g, reduction=reduction, axis=axis, keepdims=keepdims)
    _close(got, reduce_grad_np(x, y, g, reduction, axis, keepdims), dtype)


@pytest.mark.parametrize("reduction", list(FORWARD))
@pytest.mark.parametrize("shape,axis,keepdims", [((3, 4), [1], False), ((2, 3, 2), [0, 2], True), ((4,), None, False)])
def test_reduce_grad_matches_finite_differences(reduction, shape, axis, keepdims):
    x = rand(shape)  # distinct values: max/min differentiable
    op = {"sum": of.sum, "mean": of.mean, "max": of.max, "min": of.min, "prod": of.prod}[reduction]
    y = _np(op(x, axis=axis, keepdims=keepdims))
    g = rand(y.shape)
    want = numeric_grad(forward(op, axis=axis, keepdims=keepdims), x, g)
    got = G.reduce_grad(x, y, g, reduction=reduction, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(_np(got), want, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("dtype", FLOATS)
def test_reduce_grad_prod_with_zeros_is_exact(dtype):
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 5.0], [1.5, 2.0, 4.0]], dtype)
    y = np.prod(x, axis=1)
    got = _np(G.reduce_grad(x, y, np.ones(3, dtype), reduction="prod", axis=[1]))
    np.testing.assert_array_equal(got, np.array([[6, 0, 0], [0, 0, 0], [8, 6, 3]], dtype))
    assert np.isfinite(got).all()


def test_reduce_grad_max_splits_ties_and_nan():
    x = np.array([[1.0, 3.0, 3.0, 3.0], [np.nan, 2.0, np.nan, 1.0]])
    y = np.max(x, axis=1)
    got = _np(G.reduce_grad(x, y, np.array([6.0, 4.0]), reduction="max", axis=[-1]))
    np.testing.assert_array_equal(got, [[0, 2, 2, 2], [2, 0, 2, 0]])


def test_reduce_grad_large_matches_formula():
    x = RNG.integers(0, 5, (300, 200, 3)).astype(np.float32)
    for reduction, axis in [("sum", [0]), ("mean", [1, 2]), ("max", [0, 2]), ("min", [1])]:
        y = np.asarray(FORWARD[reduction](x, axis=tuple(axis)), np.float32)
        g = rand(y.shape, np.float32)
        got = G.reduce_grad(x, y, g, reduction=reduction, axis=axis)
        _close(got, reduce_grad_np(x, y, g, reduction, axis, False), np.float32)


# --------------------------------------------------------------- SliceGrad

SLICE_CASES = [((5,), [1], [3]), ((4, 5), [1, 2], [2, -1]), ((2, 3, 4), [0, 1, 0], [-1, 2, 4]), ((), [], []),
               ((3, 4), [3, 0], [0, -1]), ((0, 4), [0, 1], [0, 2]), ((300, 500), [10, 7], [200, 300])]


@pytest.mark.parametrize("shape,begin,size", SLICE_CASES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_slice_grad_matches_numpy(dtype, shape, begin, size):
    x = np.full(shape, np.nan, dtype)  # only x's shape may be used
    index = tuple(slice(b, d if s == -1 else b + s) for b, s, d in zip(begin, size, shape))
    g = rand(np.empty(shape)[index].shape, dtype)
    want = np.zeros(shape, dtype)
    want[index] = g
    got = G.slice_grad(x, g, begin=begin, size=size)
    np.testing.assert_array_equal(_np(got), want)
    assert _np(got).dtype == dtype


def test_slice_grad_matches_finite_differences():
    x, g = rand((3, 4, 2)), rand((2, 2, 1))
    want = numeric_grad(forward(of.slice, begin=[1, 2, 1], size=[2, -1, 1]), x, g, h=1e-2)
    np.testing.assert_allclose(_np(G.slice_grad(x, g, begin=[1, 2, 1], size=[2, -1, 1])), want, atol=1e-9)


# -------------------------------------------------------------- ConcatGrad

CONCAT_CASES = [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 0), (2, 5)], 1), ([(2, 3, 4)] * 3, -2),
                ([(5,)], 0), ([(0, 2), (3, 2)], 0), ([(100, 70), (100, 900)], -1)]


@pytest.mark.parametrize("shapes,axis", CONCAT_CASES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_concat_grad_matches_numpy(dtype, shapes, axis):
    values = [np.full(s, np.nan, dtype) for s in shapes]  # only their shapes may be used
    g = rand(np.concatenate(values, axis).shape, dtype)
    sizes = [s[axis] for s in shapes]
    pieces = np.split(g, np.cumsum(sizes)[:-1], axis)
    for i in range(len(shapes)):
        got = G.concat_grad(g, values, index=i, axis=axis)
        np.testing.assert_array_equal(_np(got), pieces[i])


def test_concat_grad_matches_finite_differences():
    a, b, c = rand((2, 1)), rand((2, 3)), rand((2, 2))
    g = rand((2, 6))
    for i, v in enumerate((a, b, c)):
        def f(u, i=i):
            vals = [a, b, c]
            vals[i] = u
            return _np(of.concat(vals, axis=1))
        want = numeric_grad(f, v, g, h=1e-2)
        np.testing.assert_allclose(_np(G.concat_grad(g, [a, b, c], index=i, axis=1)), want, atol=1e-9)


# --------------------------------------------------------------- bad input

x23, x34 = np.zeros((2, 3)), np.zeros((3, 4))
BAD = [
    ("SoftmaxGrad", lambda: G.softmax_grad(x23, x34), "grad"),
    ("SoftmaxGrad", lambda: G.softmax_grad(np.float64(1.0), np.float64(1.0)), "softmax"),
    ("SoftmaxGrad", lambda: G.softmax_grad(x23, x23, axis=2), "axis"),
    ("RmsNormGrad", lambda: G.rms_norm_grad(x23, np.zeros(2), x23), "weight"),
    ("RmsNormGrad", lambda: G.rms_norm_grad(x23, np.zeros(3), x34), "grad"),
    ("RmsNormGrad", lambda: G.rms_norm_grad(x23, np.zeros(3), x23, epsilon=-1.0), "epsilon"),
    ("RmsNormGrad", lambda: G.rms_norm_grad(np.float64(1), np.zeros(1), np.float64(1)), "x"),
    ("MatMulGrad", lambda: G.mat_mul_grad(x23, x23, np.zeros((2, 2))), "a"),
    ("MatMulGrad", lambda: G.mat_mul_grad(x23, x34, np.zeros((2, 3))), "grad"),
    ("MatMulGrad", lambda: G.mat_mul_grad(x23, x34, np.zeros((1, 2, 4))), "grad"),
    ("MatMulGrad", lambda: G.mat_mul_grad(np.zeros((2, 2, 3)), np.zeros((3, 3, 4)), np.zeros((2, 2, 4))), "b"),
    ("MatMulGrad", lambda: G.mat_mul_grad(np.float64(1), x34, x34), "a"),
    ("ReduceGrad", lambda: G.reduce_grad(x23, np.zeros(2), np.zeros(2), reduction="median", axis=[1]),
     "reduction"),
    ("ReduceGrad", lambda: G.reduce_grad(x23, np.zeros(2), np.zeros(2), reduction="sum", axis=[2]), "axis"),
    ("ReduceGrad", lambda: G.reduce_grad(x23, np.zeros(2), np.zeros(2), reduction="sum", axis=[1, -1]), "axis"),
    ("ReduceGrad", lambda: G.reduce_grad(x23, np.zeros(3), np.zeros(2), reduction="sum", axis=[1]), "y"),
    ("ReduceGrad", lambda: G.reduce_grad(x23, np.zeros(2), np.zeros((2, 1)), reduction="max", axis=[1]), "grad"),
    ("ReduceGrad", lambda: G.reduce_grad(np.zeros((2, 0)), np.zeros(2), np.zeros(2), reduction="max", axis=[1]),
     "x"),
    ("SliceGrad", lambda: G.slice_grad(x23, np.zeros((1, 1)), begin=[0], size=[1]), "begin"),
    ("SliceGrad", lambda: G.slice_grad(x23, np.zeros((1, 1)), begin=[-1, 0], size=[1, 1]), "begin"),
    ("SliceGrad", lambda: G.slice_grad(x23, np.zeros((1, 1)), begin=[1, 0], size=[2, 1]), "size"),
    ("SliceGrad", lambda: G.slice_grad(x23, np.zeros((1, 2)), begin=[1, 0], size=[1, 1]), "grad"),
    ("ConcatGrad", lambda: G.concat_grad(np.zeros((5, 3)), [x23, x34], index=0), "values"),
    ("ConcatGrad", lambda: G.concat_grad(np.zeros((5, 3)), [x23, np.zeros((3, 3))], index=2), "index"),
    ("ConcatGrad", lambda: G.concat_grad(np.zeros((5, 3)), [x23, np.zeros((3, 3))], index=-1), "index"),
    ("ConcatGrad", lambda: G.concat_grad(np.zeros((4, 3)), [x23, np.zeros((3, 3))], index=0), "grad"),
    ("ConcatGrad", lambda: G.concat_grad(np.zeros((5, 3)), [x23, np.zeros((3, 3))], index=0, axis=2), "axis"),
]


@pytest.mark.parametrize("op,call,arg", BAD, ids=[f"{b[0]}-{b[2]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_raises_named_error(op, call, arg):
    with pytest.raises(errors.InvalidArgumentError) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(op + ":") and f"'{arg}'" in msg, msg


@pytest.mark.parametrize("call", [
    lambda: G.softmax_grad(np.zeros(3, np.int32), np.zeros(3, np.int32)),
    lambda: G.slice_grad(np.zeros(3), np.zeros(1, np.float32), begin=[0], size=[1]),
    lambda: G.concat_grad(np.zeros(3), [np.zeros(3, np.float32)], index=0),
])
def test_wrong_dtypes_raise(call):
    with pytest.raises(errors.OpError):
        call()


def test_ops_are_exported_with_docs():
    for name in ["softmax_grad", "rms_norm_grad", "mat_mul_grad", "reduce_grad", "slice_grad", "concat_grad"]:
        fn = getattr(of.raw_ops, name)   # backward ops: of.raw_ops, not of.*
        assert fn is getattr(G, name) and len(fn.__doc__) > 100
        assert not hasattr(of, name)


# ------------------------------------- through the tape: forward ops' gradients

from opforge.testing import check_gradients  # noqa: E402

TAPE_CASES = [
    ("softmax", lambda x: of.softmax(x, axis=0), [(3, 4)]),
    ("softmax_last", lambda x: of.softmax(x), [(2, 3, 4)]),
    ("rms_norm", lambda x, w: of.rms_norm(x, w, epsilon=1e-3), [(3, 4), (4,)]),
    ("matmul", lambda a, b: of.matmul(a, b), [(2, 1, 3, 4), (2, 4, 2)]),
    ("matmul_t", lambda a, b: of.matmul(a, b, transpose_a=True, transpose_b=True), [(4, 3), (2, 2, 4)]),
    ("matmul_1d", lambda a, b: of.matmul(a, b), [(4,), (3, 4, 2)]),
    ("sum", lambda x: of.sum(x, axis=[0, 2], keepdims=True), [(2, 3, 2)]),
    ("mean", lambda x: of.mean(x, axis=[-1]), [(3, 4)]),
    ("max", lambda x: of.max(x, axis=[1]), [(3, 4)]),
    ("min", lambda x: of.min(x), [(3, 4)]),
    ("prod", lambda x: of.prod(x, axis=[0]), [(3, 2)]),
    ("slice", lambda x: of.slice(x, begin=[1, 0], size=[-1, 2]), [(3, 4)]),
    ("concat", lambda a, b: of.concat([a, b], axis=-1), [(2, 1), (2, 3)]),
]


@pytest.mark.parametrize("name,fn,shapes", TAPE_CASES, ids=[c[0] for c in TAPE_CASES])
def test_forward_op_gradients_use_the_backward_ops(name, fn, shapes):
    inputs = [rand(s) for s in shapes]
    check_gradients(fn, inputs, atol=1e-6, rtol=1e-5, delta=1e-5)


def test_backward_through_mlp_with_softmax_matches_numpy():
    x, w, t = rand((5, 4)), rand((4, 3)), np.eye(3)[[0, 2, 1, 1, 0]]
    wt = of.tensor(w, requires_grad=True)
    loss = of.sum(of.mul(of.log(of.softmax(of.matmul(x, wt))), -t))
    loss.backward()
    z = x @ w
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(_np(wt.grad), x.T @ (p - t), rtol=1e-12, atol=1e-12)


def test_second_derivative_through_slice():
    # d/dx sum(d/dx sum(tanh(x[1:3])**2)): SliceGrad's own gradient is Slice.
    x = rand((4,))
    f = lambda v: of.sum(of.square(of.tanh(of.slice(v, begin=[1], size=[2]))))
    got = _np(of.grad(lambda v: of.sum(of.grad(f)(v)))(x))
    t = np.tanh(x)
    want = 2 * (1 - t**2) ** 2 - 4 * t**2 * (1 - t**2)  # d2/dx2 tanh(x)**2
    want[[0, 3]] = 0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reduction", list(FORWARD))
@pytest.mark.parametrize("shape,axis,keepdims", [((3, 4), [1], False), ((2, 3, 2), [0, 2], True), ((4,), None, False),
                                                 ((2, 3), [], False)])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("directions", [1, 2, 3])
def test_reduce_grad_grad_matches_definition(dtype, reduction, shape, axis, keepdims, directions):
    from robustness_oracles import reduce_grad_grad as definition
    x = RNG.integers(-2, 3, shape).astype(dtype)  # zeros included
    ax = None if axis is None else tuple(axis)
    y = np.asarray(FORWARD[reduction](x, axis=ax, keepdims=keepdims), dtype)
    g, ds = rand(y.shape, dtype), [rand(shape, dtype) for _ in range(directions)]
    got = G.reduce_grad_grad(x, y, g, ds, reduction=reduction, axis=axis, keepdims=keepdims)
    _close(got, definition(x, y, g, ds, reduction, axis, keepdims).astype(np.float64), dtype)


@pytest.mark.parametrize("reduction", list(FORWARD))
def test_second_derivatives_of_reductions(reduction):
    op = {"sum": of.sum, "mean": of.mean, "max": of.max, "min": of.min, "prod": of.prod}[reduction]
    c = rand((3,))
    first = lambda x: of.grad(lambda v: of.sum(of.mul(of.tanh(op(of.mul(v, 0.5), axis=[1])), c)))(x)
    check_gradients(first, [rand((3, 4))], atol=1e-6, rtol=1e-5, delta=1e-5)


def test_shapes_infer_without_data():
    # Graph mode needs static shapes from (dtype, shape) pairs alone.
    from opforge import _pywrap_internal as pw
    f32 = of.float32
    assert pw.infer("ConcatGrad", ((f32, (5, 3)), [(f32, (2, 3)), (f32, (3, 3))]), {"index": 1})[1] == ((3, 3),)
    assert pw.infer("MatMulGrad", ((f32, (4,)), (f32, (2, 4, 3)), (f32, (2, 3))), {})[1] == ((4,), (2, 4, 3))
    assert pw.infer("ReduceGrad", ((f32, (2, 3)), (f32, (2,)), (f32, (2,))),
                    {"reduction": "max", "axis": [1]})[1] == ((2, 3),)
    with pytest.raises(errors.InvalidArgumentError, match="SliceGrad: argument 'grad'"):
        pw.infer("SliceGrad", ((f32, (2, 3)), (f32, (1, 1))), {"begin": [1, 0], "size": [1, 2]})


def test_reduce_grad_grad_refuses_too_many_directions_or_too_much_memory():
    x = np.ones(300_000)
    y, g = np.prod(x, keepdims=True), np.ones(1)
    with pytest.raises(of.errors.InvalidArgumentError, match=r"'directions' has 9 tensors; at most 8"):
        G.reduce_grad_grad(x[:3], y, g, [x[:3]] * 9, reduction="prod", keepdims=True)
    with pytest.raises(of.errors.ResourceExhaustedError, match=r"ReduceGradGrad: 8 directions over groups of 300000"):
        G.reduce_grad_grad(x, y, g, [x] * 8, reduction="prod", keepdims=True)
    assert G.reduce_grad_grad(x, y, g, [x] * 8, reduction="sum", keepdims=True).shape == x.shape  # zeros, no sums
