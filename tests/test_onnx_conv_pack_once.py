"""ONNX Conv filters packed once per imported Program (issue 23, _pack_conv.py): the eager path and every compiled
graph reuse the pack, a weight only packed convs read leaves Program.initializers, and the Winograd transform is
stored only where the static shapes allow that route. Results checked against onnxruntime."""
import numpy as np
import pytest

from opforge import ops as P

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from opforge.onnx import _importer  # noqa: E402


def _model(hw, batch=2):
    rng = np.random.default_rng(5)
    w1 = (rng.standard_normal((24, 16, 3, 3)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((24, 24, 3, 3)) * 0.1).astype(np.float32)
    b1 = rng.standard_normal(24).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1]),
             # w2 read by something other than a conv too: it must stay an initializer
             helper.make_node("ReduceSum", ["w2"], ["s"], keepdims=0)]
    g = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                           numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(g, opset_imports=[helper.make_operatorsetid("", 13)])
    x = rng.standard_normal((2 if batch == "N" else batch, 16, hw, hw)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    return model, x, want, w1


def _check(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


def test_packed_once_reused_by_eager_and_graph_runs_and_weight_dropped(monkeypatch):
    model, x, want, w1 = _model(18)
    prog = _importer.Program(model)
    assert "w1" not in prog.initializers and "w2" in prog.initializers and "b1" in prog.initializers
    calls = []
    real = P.pack_conv2d_filter
    monkeypatch.setattr(P, "pack_conv2d_filter", lambda *a, **k: calls.append(1) or real(*a, **k))
    prog.use_graph = False
    for _ in range(2):
        _check(prog.run({"x": x}), want)
    prog.use_graph = True
    for _ in range(3):  # eager first run of the signature, then the compiled graph
        _check(prog.run({"x": x}), want)
    assert prog.compiled_reasons() == {((2, 16, 18, 18),): None}
    assert calls == []  # nothing packed after import
    # 18x18 outputs in 2 images, all static: every call takes the Winograd route, so its transform alone
    assert _blob(prog, "w1").nbytes == real(w1, winograd=True, panels=False).numpy().nbytes


def _blob(prog, weight):
    return next(fn.keywords["packed"][0] for ctx, fn, _ in prog.steps if ctx.node.input[1:2] == [weight]).numpy()


def test_unknown_batch_keeps_transform_and_panels():
    model, _, _, w1 = _model(18, batch="N")
    prog = _importer.Program(model)
    assert _blob(prog, "w1").nbytes == P.pack_conv2d_filter(w1, winograd=True).numpy().nbytes
    x = np.random.default_rng(6).standard_normal((1, 16, 18, 18)).astype(np.float32)  # 25 tiles: the GEMM route
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    prog.use_graph = False
    _check(prog.run({"x": x}), want)


def test_small_static_outputs_store_no_winograd_transform(monkeypatch):
    monkeypatch.setenv("OPFORGE_NCHWC", "0")  # the packed route (an Intel CPU runs convs this small blocked)
    model, x, want, w1 = _model(6)  # 6x6 outputs: below Winograd's 8x8, so the panels alone
    prog = _importer.Program(model)
    assert _blob(prog, "w1").nbytes == P.pack_conv2d_filter(w1, winograd=False).numpy().nbytes
    prog.use_graph = False
    _check(prog.run({"x": x}), want)


def test_pack_conv_off_keeps_the_weights(monkeypatch):
    monkeypatch.setenv("OPFORGE_ONNX_PACK_CONV", "0")
    monkeypatch.setenv("OPFORGE_NCHWC", "0")  # on Intel the mixed layout runs w1's conv (2 x 100 pixels) blocked
    model, x, want, _ = _model(10)
    prog = _importer.Program(model)
    assert {"w1", "w2", "b1"} <= set(prog.initializers)
    assert not any("packed" in getattr(fn, "keywords", {}) for _, fn, _ in prog.steps)
    _check(prog.run({"x": x}), want)
