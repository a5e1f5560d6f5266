"""ONNX MatMul -> Add(bias) [-> activation] chains imported as one FusedMatMul,
checked against onnxruntime; chains that must not fuse stay unfused."""
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


def _chain(act, x_shape, bias_first=False, extra_reader=None, dtype=np.float32, opset=20):
    rng = np.random.default_rng(5)
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    k, n = x_shape[-1], 6
    inits = [numpy_helper.from_array(rng.standard_normal((k, n)).astype(dtype), "w"),
             numpy_helper.from_array(rng.standard_normal(n).astype(dtype), "b")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]),
             helper.make_node("Add", ["b", "mm"] if bias_first else ["mm", "b"], ["z"])]
    out, outputs = "z", []
    if act:
        nodes.append(helper.make_node(act, ["z"], ["y"]))
        out = "y"
    if extra_reader:  # a second reader of an intermediate: that link must not fuse
        nodes.append(helper.make_node("Neg", [extra_reader], ["extra"]))
        outputs.append(helper.make_tensor_value_info("extra", elem, None))
    outputs.insert(0, helper.make_tensor_value_info(out, elem, None))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, list(x_shape))], outputs,
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", opset)])
    x = rng.standard_normal(x_shape).astype(dtype)
    return model, x


def _op_types(imported, name):
    seen, stack, out = set(), [imported.outputs[name]], []
    while stack:
        t = stack.pop()
        op = t.op
        if op is None or id(op) in seen:
            continue
        seen.add(id(op))
        out.append(op.type)
        stack.extend(op.inputs)
    return out


@pytest.mark.parametrize("act", [None, "Relu", "Sigmoid", "Gelu"])
@pytest.mark.parametrize("x_shape", [(5, 7), (2, 3, 7), (7,)])
@pytest.mark.parametrize("bias_first", [False, True])
@pytest.mark.parametrize("pack", ["1", "0"])
def test_chain_fuses_and_matches_onnxruntime(act, x_shape, bias_first, pack, monkeypatch):
    # pack "1": the constant weight packed once (FusedMatMulPacked, _pack_matmul.py); "0": FusedMatMul.
    monkeypatch.setenv("OPFORGE_ONNX_PACK_MATMUL", pack)
    fused = "FusedMatMulPacked" if pack == "1" else "FusedMatMul"
    model, x = _chain(act, x_shape, bias_first)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = opforge.onnx.run(model, [x])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    imported = opforge.onnx.import_model(model)
    types = _op_types(imported, "y" if act else "z")
    assert fused in types and "MatMul" not in types and "Add" not in types, types
    with of.Session(imported.graph) as sess:
        np.testing.assert_allclose(sess.run(imported.outputs["y" if act else "z"], {imported.inputs["x"]: x}),
                                   want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("extra", ["mm", "z"])
def test_shared_intermediate_is_not_fused_away(extra):
    model, x = _chain("Relu", (5, 7), extra_reader=extra)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = opforge.onnx.run(model, [x])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    types = _op_types(opforge.onnx.import_model(model), "y")
    if extra == "mm":  # the MatMul alone (its constant weight packed), then Add and Relu
        assert "FusedMatMulPacked" in types and "Add" in types and "Relu" in types, types
    else:  # MatMul + Add fuse, the Relu reads the shared z
        assert "FusedMatMulPacked" in types and "Relu" in types and "Add" not in types, types


def test_float64_chain_runs_unfused():
    model, x = _chain("Relu", (5, 7), dtype=np.float64)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(opforge.onnx.run(model, [x])[0], want[0], rtol=1e-12, atol=1e-12)
