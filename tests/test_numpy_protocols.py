"""numpy functions on Tensors: __array_ufunc__, __array_function__, __array__.

A mapped call must run the opforge op and give numpy's answer; anything
else must give numpy's answer (or numpy's exception) through the fallback.
"""

import re

import numpy as np
import pytest

import opforge as of
from opforge import _numpy_protocols
from opforge.ops.numpy_map import NUMPY_EQUIVALENTS

RNG = np.random.default_rng(0)
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]


def _values(dtype, shape=(3, 4)):
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-5, 6, shape).astype(dtype)
    a = RNG.standard_normal(shape).astype(dtype)
    a.flat[0] = np.nan  # NaN handling must match too
    a.flat[1] = 0.0
    return a


def _ufuncs():
    seen = {}
    for name in NUMPY_EQUIVALENTS:
        u = getattr(np, name)
        if isinstance(u, np.ufunc):
            seen[u.__name__] = u
    return sorted(seen.values(), key=lambda u: u.__name__)


def test_map_is_derived_from_the_declarations():
    assert NUMPY_EQUIVALENTS["add"] == "add" and NUMPY_EQUIVALENTS["subtract"] == "sub"
    assert NUMPY_EQUIVALENTS["where"] == "select"
    assert "relu" not in NUMPY_EQUIVALENTS.values()  # "np.maximum(x, 0)" is not its inputs
    for op_name in NUMPY_EQUIVALENTS.values():
        assert callable(getattr(of.ops, op_name))


@pytest.mark.parametrize("ufunc", _ufuncs(), ids=lambda u: u.__name__)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_ufunc_on_tensors_matches_numpy(ufunc, dtype, monkeypatch):
    arrays = [_values(dtype) for _ in range(ufunc.nin)]
    if ufunc is np.power and np.issubdtype(dtype, np.integer):
        arrays[1] = np.abs(arrays[1])
    tensors = [of.tensor(a) for a in arrays]
    ran = []
    real = _numpy_protocols._ufunc_via_op

    def spy(u, inputs):
        result = real(u, inputs)
        ran.append(u)
        return result

    monkeypatch.setattr(_numpy_protocols, "_ufunc_via_op", spy)
    with np.errstate(all="ignore"):
        try:
            expected = ufunc(*arrays)
        except TypeError as e:  # e.g. negative of bool: the same error from Tensors
            with pytest.raises(TypeError, match=re.escape(str(e)[:30])):
                ufunc(*tensors)
            return
        got = ufunc(*tensors)
    if expected.dtype in (np.float32, np.float64, np.int32, np.int64, np.bool_):
        assert isinstance(got, of.Tensor)
        assert got.dtype == expected.dtype
        got = got.numpy()
    else:  # numpy's answer in a dtype opforge lacks (float16 for cos(bool)) stays an ndarray
        assert isinstance(got, np.ndarray)
        assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=2e-6 if dtype == np.float32 else 1e-12)
    if dtype in (np.float32, np.float64) and not ufunc.__name__.startswith("logical_"):
        # same-dtype floats go through the op (logical ops are bool-only in opforge)
        assert ran == [ufunc]


def test_ufunc_runs_the_op_and_returns_a_tensor():
    t = of.tensor(np.array([0.0, 1.0], np.float32))
    r = np.exp(t)
    assert isinstance(r, of.Tensor) and r.dtype == of.float32
    np.testing.assert_allclose(r.numpy(), np.exp([0.0, 1.0]), rtol=1e-6)
    # mixing with arrays and weak Python scalars, as numpy 2 promotes them
    assert np.add(t, 1.0).dtype == of.float32
    assert np.add(np.ones(2, np.float32), t).dtype == of.float32
    m = np.matmul(of.tensor(np.eye(2)), np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert isinstance(m, of.Tensor)
    np.testing.assert_array_equal(m.numpy(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal((np.eye(2) @ of.tensor(np.ones((2, 2)))).numpy(), np.ones((2, 2)))


@pytest.mark.parametrize("call, expected", [
    # promotions opforge refuses: numpy's answer, numpy's dtype
    (lambda t, i: np.add(t, i), lambda a, b: np.add(a, b)),
    (lambda t, i: np.divide(i, i), lambda a, b: np.divide(b, b)),
    (lambda t, i: np.sqrt(i), lambda a, b: np.sqrt(b)),
    # unmapped ufuncs and methods
    (lambda t, i: np.arctan2(t, t), lambda a, b: np.arctan2(a, a)),
    (lambda t, i: np.isnan(t), lambda a, b: np.isnan(a)),
    (lambda t, i: np.add.reduce(t, axis=0), lambda a, b: np.add.reduce(a, axis=0)),
    (lambda t, i: np.multiply.outer(i, i), lambda a, b: np.multiply.outer(b, b)),
    (lambda t, i: np.add(t, t, dtype=np.float64), lambda a, b: np.add(a, a, dtype=np.float64)),
    (lambda t, i: np.add(t, t, where=t > 0, out=np.zeros(3, np.float32)),
     lambda a, b: np.add(a, a, where=a > 0, out=np.zeros(3, np.float32))),
    (lambda t, i: np.divmod(i, 2), lambda a, b: np.divmod(b, 2)),
])
def test_ufunc_fallback_gives_numpys_answer(call, expected):
    a = np.array([1.5, -2.0, 3.0], np.float32)
    b = np.array([4, 5, 6], np.int32)
    with np.errstate(all="ignore"):
        got = call(of.tensor(a), of.tensor(b))
        want = expected(a, b)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        g = g.numpy() if isinstance(g, of.Tensor) else g
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w)


def test_ufunc_out_and_errors_are_numpys():
    t = of.add(np.zeros(3), 0.0)
    r = np.add(np.ones(3), 2.0, out=t)
    assert r is t
    np.testing.assert_array_equal(t.numpy(), [3, 3, 3])
    x = np.ones(3)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        np.add(t, t, out=of.tensor(x))
    with pytest.raises(ValueError, match="negative integer powers"):
        np.power(of.tensor(np.array([2])), of.tensor(np.array([-1])))
    with pytest.raises(ValueError):  # shapes that do not broadcast: numpy's error class
        np.add(of.tensor(np.ones(3)), of.tensor(np.ones(4)))
    with pytest.raises(TypeError):
        np.add(of.tensor(np.ones(3)), "a")
    with pytest.raises(OverflowError):  # NEP 50: the Python int does not fit int32
        np.add(of.tensor(np.ones(3, np.int32)), 2**40)


def test_defers_to_other_array_types():
    class Other:
        def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
            return "other"

    assert np.add(of.tensor(np.ones(2)), Other()) == "other"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name, kwargs", [
    ("sum", {}), ("sum", {"axis": 1}), ("sum", {"axis": (0, 1), "keepdims": True}), ("sum", {"axis": -1}),
    ("sum", {"dtype": np.float64}), ("sum", {"initial": 5}),
    ("prod", {"axis": 0}), ("mean", {}), ("mean", {"axis": 0, "keepdims": True}),
    ("max", {}), ("max", {"axis": 1}), ("min", {"axis": 0, "keepdims": True}), ("max", {"initial": 100}),
    ("argmax", {}), ("argmax", {"axis": 1}), ("argmin", {"axis": 0, "keepdims": True}),
    ("transpose", {}), ("transpose", {"axes": (1, 0)}), ("reshape", {"shape": (4, 3)}),
    ("reshape", {"shape": -1}), ("reshape", {"shape": (2, 6), "order": "F"}),
])
def test_array_functions_match_numpy(dtype, name, kwargs):
    a = _values(dtype)
    if np.issubdtype(dtype, np.floating):
        a.flat[0] = 0.5  # argmax of NaN is fine, but keep mean/sum comparisons clean
    fn = getattr(np, name)
    got = fn(of.tensor(a), **kwargs)
    want = fn(a, **kwargs)
    assert isinstance(got, of.Tensor)
    assert got.dtype == np.asarray(want).dtype
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_array_functions_run_opforge_ops(monkeypatch):
    called = []
    for name in ("sum", "mean", "max", "concat", "select", "arg_max"):
        real = getattr(of.ops, name)
        monkeypatch.setattr(of.ops, name, lambda *a, _real=real, _n=name, **k: called.append(_n) or _real(*a, **k))
    t = of.tensor(np.arange(6.0).reshape(2, 3))
    np.sum(t), np.mean(t, axis=0), np.max(t), np.argmax(t)
    np.concatenate([t, t], axis=1)
    np.where(t > 2.0, t, 0.0)
    assert called == ["sum", "mean", "max", "arg_max", "concat", "select"]


def test_concatenate_and_where():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = of.tensor(a)
    for kw in ({}, {"axis": 1}, {"axis": -1}, {"axis": None}):
        np.testing.assert_array_equal(np.concatenate([t, t], **kw).numpy(), np.concatenate([a, a], **kw))
    mixed = np.concatenate([t, np.ones((1, 3), np.float64)])  # numpy promotes
    assert mixed.dtype == of.float64
    np.testing.assert_array_equal(np.where(t > 2, t, -1.0).numpy(), np.where(a > 2, a, -1.0))
    assert np.where(t > 2, t, -1.0).dtype == of.float32
    assert np.where(t > 2, 1, 2.5).dtype == of.float64
    np.testing.assert_array_equal(np.where(t > 2, t, np.int64(1)).numpy(), np.where(a > 2, a, np.int64(1)))
    nz = np.where(t > 2)  # the one-argument form is nonzero
    assert isinstance(nz, tuple)
    np.testing.assert_array_equal(nz[0].numpy(), np.where(a > 2)[0])


def test_other_functions_fall_back_to_numpy():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = of.tensor(a)
    st = np.stack([t, t])
    assert isinstance(st, of.Tensor)
    np.testing.assert_array_equal(st.numpy(), np.stack([a, a]))
    assert np.allclose(t, a) is True
    assert np.shape(t) == (2, 3)
    np.testing.assert_allclose(np.linalg.norm(t), np.linalg.norm(a))
    np.testing.assert_array_equal(np.cumsum(t, axis=1).numpy(), np.cumsum(a, axis=1))
    out = of.add(np.zeros(3), 0.0)
    assert np.sum(t, axis=0, out=out) is out
    np.testing.assert_array_equal(out.numpy(), a.sum(axis=0))
    with pytest.raises(np.exceptions.AxisError):
        np.sum(t, axis=5)
    with pytest.raises(ValueError):
        np.max(of.tensor(np.zeros((0,))))
    with pytest.raises(TypeError):
        np.sum(t, bogus=1)


def test_array_copy_contract():
    t = of.add(np.zeros(3, np.float32), 1.0)
    assert np.shares_memory(np.asarray(t), t.numpy())
    assert np.shares_memory(np.array(t, copy=False), t.numpy())
    assert not np.shares_memory(np.array(t), t.numpy())
    assert not np.shares_memory(np.array(t, copy=True), t.numpy())
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="copy"):
        np.array(t, dtype=np.float64, copy=False)
