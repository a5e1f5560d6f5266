"""Squeeze-and-excitation blocks imported from ONNX: the 1x1 convs over 1x1 planes run as FusedMatMul on rows
(pkg/opforge/onnx/_rewrite_pixel_conv.py), with Relu / Sigmoid / SiLU in the epilogue; against onnxruntime."""
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opforge as of  # noqa: E402
import opforge.onnx  # noqa: E402

RNG = np.random.default_rng(23)


def _f(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _se_model(c, r, act, gate, batch=2, pool="GlobalAveragePool", bias2=True, pads=None):
    """x -> pool -> Conv(c->r) -> act -> Conv(r->c) -> gate -> Mul(x, gate) (padded: the gate is the output)."""
    nodes = []
    if pool == "GlobalAveragePool":
        nodes.append(helper.make_node("GlobalAveragePool", ["x"], ["p"]))
    else:
        nodes.append(helper.make_node("ReduceMean", ["x", "axes"], ["p"], keepdims=1))
    extra = {} if pads is None else {"pads": pads}
    nodes.append(helper.make_node("Conv", ["p", "w1", "b1"], ["c1"], kernel_shape=[1, 1], **extra))
    if act == "silu":
        nodes += [helper.make_node("Sigmoid", ["c1"], ["s1"]), helper.make_node("Mul", ["c1", "s1"], ["a1"])]
    else:
        nodes.append(helper.make_node(act, ["c1"], ["a1"]))
    nodes.append(helper.make_node("Conv", ["a1", "w2"] + (["b2"] if bias2 else []), ["c2"], kernel_shape=[1, 1]))
    if pads is None:
        nodes += [helper.make_node(gate, ["c2"], ["g"]), helper.make_node("Mul", ["x", "g"], ["y"])]
    else:
        nodes.append(helper.make_node(gate, ["c2"], ["y"]))
    inits = [("w1", _f(r, c, 1, 1)), ("b1", _f(r)), ("w2", _f(c, r, 1, 1)), ("b2", _f(c)),
             ("axes", np.array([2, 3], np.int64))]
    graph = helper.make_graph(nodes, "se", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, 5, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 18)])


def _run_both(model, x):
    if os.environ.get("OPFORGE_SANITIZED"):
        pytest.skip("onnxruntime is not run under the sanitizer preload")
    ort = pytest.importorskip("onnxruntime")
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    imported = opforge.onnx.import_model(model)
    with of.Session(imported.graph) as sess:
        got = sess.run(imported.outputs["y"], {imported.inputs["x"]: x})
    ops = [op.type for op in imported.graph.get_operations()]
    return got, want, ops


@pytest.mark.parametrize("act,gate,pool,batch", [
    ("Relu", "HardSigmoid", "GlobalAveragePool", 1),   # mobilenet_v3
    ("silu", "Sigmoid", "GlobalAveragePool", 8),       # efficientnet
    ("Relu", "Sigmoid", "ReduceMean", 3),
    ("Sigmoid", "HardSigmoid", "GlobalAveragePool", 2),
])
def test_se_block_convs_run_as_row_products(act, gate, pool, batch):
    model = _se_model(12, 4, act, gate, batch=batch, pool=pool, bias2=act != "Sigmoid")
    x = _f(batch, 12, 5, 6)
    got, want, ops = _run_both(model, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert ops.count("FusedMatMul") == 2, ops
    assert not any(o.startswith(("Conv2D", "FusedConv2D")) for o in ops), ops


def test_a_padded_conv_is_left_a_conv():
    # Pads make the first conv's 1x1 input a 3x3 output (and the second conv's input 3x3): no product of rows.
    model = _se_model(6, 3, "Relu", "Sigmoid", pads=[1, 1, 1, 1])
    x = _f(2, 6, 5, 6)
    got, want, ops = _run_both(model, x)
    assert got.shape == (2, 6, 3, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert "FusedMatMul" not in ops, ops
    np.testing.assert_allclose(opforge.onnx.run(model, {"x": x})[0], want, rtol=1e-5, atol=1e-5)


def test_a_conv_over_larger_planes_is_left_a_conv():
    # The same 1x1 conv on the full 5x6 planes (no pooling before it) stays a convolution.
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 5, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(_f(4, 6, 1, 1), "w"),
                                           numpy_helper.from_array(_f(4), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 18)])
    got, want, ops = _run_both(model, _f(2, 6, 5, 6))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert "FusedMatMul" not in ops


def test_dynamic_batch():
    model = _se_model(8, 2, "silu", "Sigmoid")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    prog = opforge.onnx.import_model(model)
    if os.environ.get("OPFORGE_SANITIZED"):
        pytest.skip("onnxruntime is not run under the sanitizer preload")
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 5):
        x = _f(batch, 8, 5, 6)
        (want,) = sess.run(None, {"x": x})
        with of.Session(prog.graph) as s:
            got = s.run(prog.outputs["y"], {prog.inputs["x"]: x})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(opforge.onnx.run(model, {"x": x})[0], want, rtol=1e-5, atol=1e-5)
