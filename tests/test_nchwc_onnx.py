"""The importer's NCHWc layout pass (_layout_nchwc.py: OPFORGE_NCHWC=1, the default and 0) on a MobileNet-V3-like net against onnxruntime."""
import collections
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opforge as of  # noqa: E402
import opforge.onnx  # noqa: E402
from opforge.onnx import _importer  # noqa: E402


def _net(rng, c_in=3):
    """stem 3x3/2 + HardSwish; depthwise 3x3 + Relu; SE (pool, 1x1, Relu, 1x1, HardSigmoid, Mul); projection 1x1 +
    residual Add; 5x5/2 depthwise (SAME_UPPER); expansion 1x1 + HardSwish; pool, Flatten, Gemm. Channel counts
    (16, 24, 8, 40) are not all multiples of a block; one weight and one bias go through Identity like exporters'."""
    def w(*s):
        return (rng.standard_normal(s) * (2.0 / np.prod(s[1:])) ** 0.5).astype(np.float32)

    inits = {"w0": w(24, c_in, 3, 3), "b0": w(24), "w1": w(24, 1, 3, 3), "b1": w(24), "se1": w(8, 24, 1, 1),
             "sb1": w(8), "se2": w(24, 8, 1, 1), "sb2": w(24), "w2": w(24, 24, 1, 1), "b2": w(24),
             "w3": w(24, 1, 5, 5), "b3": w(24), "w4": w(40, 24, 1, 1), "b4": w(40), "fc": w(10, 40), "fb": w(10)}
    N = helper.make_node
    nodes = [
        N("Identity", ["b2"], ["b2c"]),
        N("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        N("HardSwish", ["c0"], ["h0"]),
        N("Conv", ["h0", "w1", "b1"], ["c1"], group=24, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("Relu", ["c1"], ["r1"]),
        N("GlobalAveragePool", ["r1"], ["p1"]),
        N("Conv", ["p1", "se1", "sb1"], ["s1"]),
        N("Relu", ["s1"], ["s1r"]),
        N("Conv", ["s1r", "se2", "sb2"], ["s2"]),
        N("HardSigmoid", ["s2"], ["s2h"], alpha=1 / 6, beta=0.5),
        N("Mul", ["r1", "s2h"], ["m1"]),
        N("Conv", ["m1", "w2", "b2c"], ["c2"]),
        N("Add", ["h0", "c2"], ["a2"]),
        N("Conv", ["a2", "w3", "b3"], ["c3"], group=24, kernel_shape=[5, 5], strides=[2, 2], auto_pad="SAME_UPPER"),
        N("Conv", ["c3", "w4", "b4"], ["c4"]),
        N("HardSwish", ["c4"], ["h4"]),
        N("GlobalAveragePool", ["h4"], ["p4"]),
        N("Flatten", ["p4"], ["f"]),
        N("Gemm", ["f", "fc", "fb"], ["y"], transB=1),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, c_in, 23, 21])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 10])],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 18)])


def _ort(model, x):
    if os.environ.get("OPFORGE_SANITIZED"):
        pytest.skip("onnxruntime is not run under the sanitizer preload")
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("block", ["8", "16"])
@pytest.mark.parametrize("c_in", [3, 20])
def test_layout_pass_matches_onnxruntime(monkeypatch, block, c_in):
    monkeypatch.setenv("OPFORGE_NCHWC", "1")
    monkeypatch.setenv("OPFORGE_NCHWC_BLOCK", block)
    rng = np.random.default_rng(int(block) + c_in)
    model = _net(rng, c_in)
    prog = _importer.Program(model)
    kinds = collections.Counter(ctx.node.op_type for ctx, _, _ in prog.steps)
    # Every conv runs blocked; the residual Add is in the projection conv; one reorder (the pooled tail) leaves.
    # The SE block's Mul is the projection conv's scale input.
    assert kinds["Conv2DNchwc"] == 7 and kinds["Conv"] == 0 and kinds["Add"] == 0 and kinds["Mul"] == 0, kinds
    assert kinds["ReorderFromNchwc"] == 1 and kinds["ReorderToNchwc"] == (0 if c_in < int(block) else 1), kinds
    assert not any(k.startswith(("w", "se")) for k in prog.initializers)  # the plain filters are dropped
    for batch in (1, 3):
        x = rng.standard_normal((batch, c_in, 23, 21)).astype(np.float32)
        want = _ort(model, x)
        for _ in range(2):  # eager, then the compiled graph
            np.testing.assert_allclose(prog.run({"x": x})[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        imported = opforge.onnx.import_model(model)
        with of.Session(imported.graph) as sess:
            out = sess.run(imported.outputs["y"], {imported.inputs["x"]: x})
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_auto_mode_covers_depthwise_graphs_only(monkeypatch):
    rng = np.random.default_rng(7)
    monkeypatch.setenv("OPFORGE_NCHWC", "0")
    assert not any(ctx.node.op_type == "Conv2DNchwc" for ctx, _, _ in _importer.Program(_net(rng)).steps)
    monkeypatch.delenv("OPFORGE_NCHWC")  # the default: graphs with a depthwise conv
    monkeypatch.setenv("OPFORGE_NCHWC_BLOCK", "16")
    for c_in, plain in ((3, 0), (20, 1)):  # a stem over 20 channels (>= the block) stays an NCHW Conv
        model = _net(rng, c_in)
        prog = _importer.Program(model)
        kinds = collections.Counter(ctx.node.op_type for ctx, _, _ in prog.steps)
        assert kinds["Conv"] == plain and kinds["Conv2DNchwc"] == 7 - plain, kinds
        x = rng.standard_normal((2, c_in, 23, 21)).astype(np.float32)
        want = _ort(model, x)
        np.testing.assert_allclose(prog.run({"x": x})[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    model = _net(rng)
    for node in model.graph.node:  # no depthwise conv: nothing changes
        for a in node.attribute:
            if a.name == "group":
                a.i = 1
    for init in model.graph.initializer:
        if init.name in ("w1", "w3"):
            init.CopyFrom(numpy_helper.from_array(rng.standard_normal((24, 24) + tuple(init.dims[2:])).astype(
                np.float32), init.name))
    assert not any(ctx.node.op_type == "Conv2DNchwc" for ctx, _, _ in _importer.Program(model).steps)


def test_values_read_outside_the_region_are_reordered(monkeypatch):
    monkeypatch.setenv("OPFORGE_NCHWC", "1")
    rng = np.random.default_rng(5)
    model = _net(rng)
    # A graph output inside the region (the depthwise conv's Relu) and a reader outside it (Softmax).
    model.graph.output.append(helper.make_tensor_value_info("r1", TensorProto.FLOAT, None))
    model.graph.node.append(helper.make_node("Softmax", ["c3"], ["sm"], axis=1))
    model.graph.output.append(helper.make_tensor_value_info("sm", TensorProto.FLOAT, None))
    prog = _importer.Program(model)
    assert sum(ctx.node.op_type == "ReorderFromNchwc" for ctx, _, _ in prog.steps) == 3
    x = rng.standard_normal((2, 3, 23, 21)).astype(np.float32)
    if os.environ.get("OPFORGE_SANITIZED"):
        pytest.skip("onnxruntime is not run under the sanitizer preload")
    ort = pytest.importorskip("onnxruntime")
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for _ in range(2):
        for g, w in zip(prog.run({"x": x}), want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())
