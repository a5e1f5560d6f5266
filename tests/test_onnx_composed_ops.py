"""The ONNX operators of _ops_math and _ops_index against onnxruntime, on
shapes and attributes the backend suite's cases do not cover (broadcast
slopes, negative indices, batch_dims, exclusive/reverse scans), and a
gradient through a composed operator."""
import os

import numpy as np
import pytest

if os.environ.get("OPFORGE_SANITIZED"):
    pytest.skip("ONNX suites run in the plain build only", allow_module_level=True)

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opforge as of  # noqa: E402
import opforge.onnx  # noqa: E402

RNG = np.random.default_rng(5)
_ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
         np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64,
         np.dtype(np.bool_): TensorProto.BOOL}


def _check(op, feeds, consts=(), n_out=1, opset=18, rtol=1e-5, **attrs):
    """Runs one node in opforge and onnxruntime; feeds are inputs, consts initializers."""
    names = list(feeds) + [c for c in dict(consts)]
    node = helper.make_node(op, names, [f"y{i}" for i in range(n_out)], name="n", **attrs)
    ins = [helper.make_tensor_value_info(k, _ELEM[v.dtype], v.shape) for k, v in feeds.items()]
    outs = [onnx.ValueInfoProto(name=f"y{i}") for i in range(n_out)]
    inits = [numpy_helper.from_array(v, k) for k, v in dict(consts).items()]
    model = helper.make_model(helper.make_graph([node], "g", ins, outs, initializer=inits),
                              opset_imports=[helper.make_operatorsetid("", opset)])
    model.ir_version = 8
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = opforge.onnx.run(model, feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (op, g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6)


def x32(*shape):
    return RNG.standard_normal(shape).astype(np.float32) * 3


def test_activations():
    x = x32(3, 4)
    for op, attrs in [("Elu", {"alpha": 0.7}), ("Selu", {}), ("Softplus", {}), ("Mish", {})]:
        _check(op, {"x": x}, **attrs)
    _check("Softplus", {"x": np.array([-200, -30, 0, 30, 200], np.float32)})  # no overflow
    for op, attrs in [("Celu", {"alpha": 0.5}), ("Softsign", {}), ("ThresholdedRelu", {"alpha": 0.3}),
                      ("Shrink", {"lambd": 0.8, "bias": 0.2}), ("Sinh", {}), ("Cosh", {}), ("Tan", {})]:
        _check(op, {"x": x}, **attrs)
    _check("PRelu", {"x": x32(2, 3, 4)}, [("s", x32(3, 1))])


def test_mod_and_rounding():
    a = np.array([-7, -5, 5, 7, 9, -9], np.int32)
    b = np.array([3, -3, 3, -3, 4, 4], np.int32)
    for fmod in (0, 1):
        _check("Mod", {"a": a, "b": b}, fmod=fmod)
    _check("Mod", {"a": x32(5), "b": x32(5)}, fmod=1)
    _check("Round", {"x": np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49], np.float32)})
    _check("IsInf", {"x": np.array([np.inf, -np.inf, 1, np.nan], np.float32)}, detect_negative=0)


def test_reductions():
    x = x32(2, 3, 4)
    for op in ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp", "ReduceLogSum"):
        _check(op, {"x": x}, [("axes", np.array([1, -1], np.int64))], keepdims=0)
        _check(op, {"x": np.abs(x) if op == "ReduceLogSum" else x}, [("axes", np.array([0], np.int64))])
    _check("ReduceLogSumExp", {"x": x * 100}, [("axes", np.array([2], np.int64))], keepdims=0)


def test_layout_ops():
    x = x32(2, 1, 3)
    _check("Expand", {"x": x}, [("s", np.array([4, 1, 5, 1], np.int64))])
    _check("Tile", {"x": x}, [("r", np.array([2, 3, 1], np.int64))])
    _check("Range", {}, [("a", np.array(1, np.int64)), ("b", np.array(10, np.int64)), ("c", np.array(3, np.int64))])
    _check("Range", {}, [("a", np.array(1.0, np.float32)), ("b", np.array(-2, np.float32)),
                         ("c", np.array(-0.7, np.float32))])
    _check("EyeLike", {"x": x32(3, 5)}, k=-1, dtype=TensorProto.INT32)
    _check("ConstantOfShape", {}, [("s", np.array([2, 3], np.int64))],
           value=numpy_helper.from_array(np.array([7], np.int64)))
    _check("Size", {"x": x32(3, 5)})
    _check("Split", {"x": x32(7, 2)}, n_out=3, num_outputs=3)
    _check("Split", {"x": x32(2, 6)}, [("s", np.array([1, 5], np.int64))], n_out=2, axis=-1)
    _check("Trilu", {"x": x32(2, 4, 5)}, [("k", np.array(-1, np.int64))], upper=0)
    _check("Trilu", {"x": x32(4, 3)}, [("k", np.array(1, np.int64))])
    _check("OneHot", {"i": np.array([[0, -1], [2, 5]], np.int64)},
           [("d", np.array(4, np.int64)), ("v", np.array([-1, 2], np.float32))], axis=1)


def test_scans_and_gathers():
    x = x32(3, 4, 2)
    for exclusive in (0, 1):
        for reverse in (0, 1):
            _check("CumSum", {"x": x}, [("a", np.array(1, np.int32))], exclusive=exclusive, reverse=reverse)
    _check("GatherElements", {"x": x, "i": RNG.integers(-4, 4, (3, 5, 2))}, axis=1)
    _check("GatherND", {"x": x, "i": np.array([[0, 1], [-1, 2], [2, 3]], np.int64)})
    _check("GatherND", {"x": x, "i": np.array([[[1]], [[3]], [[0]]], np.int64)}, batch_dims=1)


def test_gradient_through_a_composed_operator():
    # Mish = x * tanh(softplus(x)): its derivative, in closed form.
    x = np.linspace(-3, 3, 9)
    t = of.tensor(x, requires_grad=True)
    from opforge.onnx import _ops_math
    of.ops.sum(of.ops.mul(t, of.ops.tanh(_ops_math._softplus(t)))).backward()
    sp = np.log1p(np.exp(x))
    want = np.tanh(sp) + x * (1 - np.tanh(sp) ** 2) / (1 + np.exp(-x))
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-10)
