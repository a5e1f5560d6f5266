"""bench/vision_profile.py counts every conv op the importer makes as a
convolution (a fused Concat of convs and a conv with its residual Add were
listed under "not conv"). A small model built with onnx.helper, no torch."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _fire_and_residual():
    rng = np.random.default_rng(0)
    inits = []

    def w(name, shape):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name))
        return name

    nodes = [
        helper.make_node("Conv", ["x", w("w0", (16, 8, 3, 3)), w("b0", (16,))], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        # A fire module: two expand convs of one input, concatenated.
        helper.make_node("Conv", ["r0", w("we1", (16, 16, 1, 1)), w("be1", (16,))], ["e1"]),
        helper.make_node("Relu", ["e1"], ["f1"]),
        helper.make_node("Conv", ["r0", w("we3", (16, 16, 3, 3)), w("be3", (16,))], ["e3"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["e3"], ["f3"]),
        helper.make_node("Concat", ["f1", "f3"], ["cat"], axis=1),
        # A residual block's last conv and its Add.
        helper.make_node("Conv", ["cat", w("wr", (32, 32, 3, 3)), w("br", (32,))], ["cr"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["cr", "cat"], ["sum"]),
        helper.make_node("Relu", ["sum"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "fire_residual", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return model, rng.standard_normal((1, 8, 16, 16)).astype(np.float32)


def test_fused_convs_are_counted_as_convolutions():
    from bench import vision_profile
    import opforge.onnx

    model, x = _fire_and_residual()
    ops = {op.type for op in opforge.onnx.import_model(model).graph.get_operations()}
    assert {"Conv2DPackedConcat", "Conv2DPackedAdd"} <= ops, ops  # what this test is about
    text = vision_profile.profile("fire_residual", 1, model, x, threads=1, runs=1)
    not_conv = text.split("not conv, by op type")[1].split("convolutions, layer by layer")[0]
    assert "Conv2DPacked" not in not_conv, not_conv
    layers = text.split("convolutions, layer by layer")[1]
    # One row per conv node of ours; the concat's row names both of its convs.
    assert "| 1x1+3x3 |" in layers and "Conv2DPackedConcat" in layers and "Conv2DPackedAdd" in layers, layers
    assert "| conv 1x1+3x3 | 1 |" in text, text
