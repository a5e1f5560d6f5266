"""The 'mixed' NCHWc layout (_layout_nchwc.py, mixed_wins): the dense convs the blocked kernel wins run
Conv2DNchwc, the rest stay NCHW, with reorders where the layout changes; against onnxruntime and the plain
NCHW import (OPFORGE_NCHWC=0)."""
import collections
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opforge as of  # noqa: E402
import opforge.onnx  # noqa: E402
from opforge.onnx import _importer, _layout_nchwc  # noqa: E402


def _net(rng, batch=1, side=32):
    """A ResNet-like net whose layout changes at a residual Add, a Concat, two pools and the graph outputs:
    c0 (3x3 s2) and d0 (1x1 s2) blocked; c1 (3x3 s1 at 16x16, more pixels than a blocked stride-1 conv gets)
    NCHW, its residual d0 reordered back; MaxPool (NCHW) beside c2 (3x3 s2, blocked) into a Concat of 32 + 48
    channels (not a multiple of 16); c4 (3x3 s2 to 4x4) and c5 blocked, c5 + c4 -> Relu fused; a MaxPool between
    c5 and c6 (both blocked); outputs y (c6's Relu, inside the region) and z (pooled, flattened)."""
    def w(*s):
        return (rng.standard_normal(s) * (2.0 / np.prod(s[1:])) ** 0.5).astype(np.float32)

    inits = {"w0": w(32, 16, 3, 3), "b0": w(32), "wd": w(32, 16, 1, 1), "w1": w(32, 32, 3, 3), "b1": w(32),
             "w2": w(48, 32, 3, 3), "b2": w(48), "w4": w(64, 80, 3, 3), "b4": w(64), "w5": w(64, 64, 3, 3),
             "w6": w(64, 64, 3, 3), "b6": w(64)}
    N = helper.make_node
    nodes = [
        N("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        N("Relu", ["c0"], ["r0"]),
        N("Conv", ["x", "wd"], ["d0"], kernel_shape=[1, 1], strides=[2, 2]),
        N("Conv", ["r0", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("Add", ["c1", "d0"], ["a1"]),
        N("Relu", ["a1"], ["r1"]),
        N("MaxPool", ["r1"], ["m1"], kernel_shape=[2, 2], strides=[2, 2]),
        N("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        N("Relu", ["c2"], ["r2"]),
        N("Concat", ["m1", "r2"], ["cat"], axis=1),
        N("Conv", ["cat", "w4", "b4"], ["c4"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        N("Conv", ["c4", "w5"], ["c5"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("Add", ["c5", "c4"], ["a5"]),
        N("Relu", ["a5"], ["r5"]),
        N("MaxPool", ["r5"], ["m5"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("Conv", ["m5", "w6", "b6"], ["c6"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("Relu", ["c6"], ["y"]),
        N("GlobalAveragePool", ["y"], ["p"]),
        N("Flatten", ["p"], ["z"]),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [batch, 16, side, side])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 18)])


@pytest.fixture
def small_196(monkeypatch):
    """_net's layer counts were drawn for a stride-1 limit of 196 pixels (c1 at 16x16 NCHW): these tests check
    where the layout changes, not the limit (test_mixed_rule_on_resnet18_layers does)."""
    monkeypatch.setattr(_layout_nchwc, "MIXED_SMALL_PIXELS", 196)


def _ort(model, x):
    if os.environ.get("OPFORGE_SANITIZED"):
        pytest.skip("onnxruntime is not run under the sanitizer preload")
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})


def _kinds(prog):
    return collections.Counter(ctx.node.op_type for ctx, _, _ in prog.steps)


def _close(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


@pytest.mark.parametrize("block", ["8", "16"])
@pytest.mark.usefixtures("small_196")
def test_mixed_layout_matches_onnxruntime_and_nchw(monkeypatch, block):
    monkeypatch.setenv("OPFORGE_NCHWC_BLOCK", block)
    rng = np.random.default_rng(int(block))
    model = _net(rng)
    x = rng.standard_normal((1, 16, 32, 32)).astype(np.float32)
    monkeypatch.setenv("OPFORGE_NCHWC", "0")
    plain = _importer.Program(model)
    assert _kinds(plain)["Conv2DNchwc"] == 0
    want_plain = plain.run({"x": x})
    monkeypatch.setenv("OPFORGE_NCHWC", "mixed")
    prog = _importer.Program(model)
    kinds = _kinds(prog)
    # c0, d0, c2, c4, c5 (+ a5's Add and Relu), c6 blocked; c1 NCHW (256 pixels at stride 1).
    assert kinds["Conv2DNchwc"] == 6 and kinds["Conv"] == 1, kinds
    # In: x, r1 (for c2), cat (for c4). Out: r0 and d0 (for c1 and its residual Add), r2 (for the Concat), p
    # (for Flatten), y (an output). The pool between c5 and c6 runs blocked (MaxPool2DNchwc); m1's reads NCHW.
    assert kinds["ReorderToNchwc"] == 3 and kinds["ReorderFromNchwc"] == 5, kinds
    assert kinds["MaxPool2DNchwc"] == 1 and kinds["MaxPool"] == 1, kinds
    fused = [ctx for ctx, fn, _ in prog.steps if ctx.node.op_type == "Conv2DNchwc" and len(ctx.node.input) > 1]
    assert len(fused) == 1 and fused[0].node.input[1] == "c4::nchwc"  # c5 + c4, then Relu, in one conv
    assert [fn.keywords["attrs"]["activation"] for ctx, fn, _ in prog.steps if ctx is fused[0]] == ["relu"]
    want = _ort(model, x)
    _close(want_plain, want)
    for _ in range(2):  # eager, then the compiled graph
        _close(prog.run({"x": x}), want)
    imported = opforge.onnx.import_model(model)
    with of.Session(imported.graph) as sess:
        _close(sess.run([imported.outputs["y"], imported.outputs["z"]], {imported.inputs["x"]: x}), want)
        with pytest.raises(of.errors.InvalidArgumentError):
            sess.run(imported.outputs["y"], {imported.inputs["x"]: x[:, :8]})
    with pytest.raises(of.errors.InvalidArgumentError, match="'x'"):
        prog.run({"x": x[:, :, :16]})


def test_mixed_layout_at_batch_two_keeps_the_larger_convs_nchw(monkeypatch):
    monkeypatch.setenv("OPFORGE_NCHWC_BLOCK", "16")
    monkeypatch.setenv("OPFORGE_NCHWC", "mixed")
    rng = np.random.default_rng(3)
    model = _net(rng, batch=2)
    prog = _importer.Program(model)
    # 2 images: c4 and c5 (2 x 16 pixels) and c6 stay blocked; c0 (2 x 256 at stride 2) too; c1 NCHW.
    assert _kinds(prog)["Conv2DNchwc"] == 6, _kinds(prog)
    x = rng.standard_normal((2, 16, 32, 32)).astype(np.float32)
    _close(prog.run({"x": x}), _ort(model, x))
    # Larger planes: c0 and d0 (2 x 1024 pixels at stride 2) go NCHW; c2, c4, c5 and c6 (2 x 64 pixels) stay
    # blocked.
    model = _net(rng, batch=2, side=64)
    prog = _importer.Program(model)
    kinds = _kinds(prog)
    assert kinds["Conv2DNchwc"] == 4 and kinds["Conv"] == 3, kinds
    x = rng.standard_normal((2, 16, 64, 64)).astype(np.float32)
    _close(prog.run({"x": x}), _ort(model, x))


@pytest.mark.usefixtures("small_196")
def test_auto_picks_mixed_on_intel_only(monkeypatch):
    monkeypatch.delenv("OPFORGE_NCHWC", raising=False)
    monkeypatch.setenv("OPFORGE_NCHWC_BLOCK", "16")
    rng = np.random.default_rng(4)
    model = _net(rng)
    monkeypatch.setenv("OPFORGE_CONV_TUNING", "amd")  # Zen 5's settings: the NCHW kernels, as before
    assert _kinds(_importer.Program(model))["Conv2DNchwc"] == 0
    monkeypatch.setenv("OPFORGE_CONV_TUNING", "intel")
    assert _kinds(_importer.Program(model))["Conv2DNchwc"] == 6
    # An unknown batch: no layer's pixel count is known, so nothing runs blocked.
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "n"
    assert _kinds(_importer.Program(model))["Conv2DNchwc"] == 0


def test_mixed_rule_on_resnet18_layers():
    wins = _layout_nchwc.mixed_wins

    def w(o, c, k):
        return np.zeros((o, c, k, k), np.float32)

    # Batch 1: the strided layers, the 14x14 and 7x7 stages blocked, 56x56 and 28x28 stride-1 layers NCHW
    # (Winograd).
    assert wins(w(128, 64, 3), [2, 2], 784, False, 16)
    assert wins(w(128, 64, 1), [2, 2], 784, True, 16)
    assert not wins(w(64, 64, 3), [1, 1], 3136, False, 16)
    assert not wins(w(128, 128, 3), [1, 1], 784, True, 16)
    assert wins(w(256, 256, 3), [1, 1], 196, True, 16) and wins(w(256, 256, 3), [1, 1], 196, False, 16)
    assert wins(w(64, 512, 1), [1, 1], 169, False, 16)  # SqueezeNet's last squeeze
    assert not wins(w(64, 384, 1), [1, 1], 729, False, 16)
    assert wins(w(512, 512, 3), [1, 1], 49, False, 16)
    assert not wins(w(64, 3, 7), [2, 2], 12544, False, 16)  # the stem
    # SqueezeNet's fire expands (C <= 64 to O >= 2C) at 54x54 and 27x27, blocked or not; not at batch 8.
    assert wins(w(64, 16, 3), [1, 1], 2916, False, 16) and wins(w(64, 16, 1), [1, 1], 2916, False, 16)
    assert wins(w(128, 32, 3), [1, 1], 2916, True, 16) and wins(w(256, 64, 3), [1, 1], 729, True, 16)
    assert not wins(w(128, 32, 3), [1, 1], 8 * 2916, True, 16, plane=2916)
    assert not wins(w(96, 64, 3), [1, 1], 729, True, 16)  # not an expand (O < 2C)
    # A stem blocked where its pool feeds a blocked conv (SqueezeNet), at batch 1 only.
    assert wins(w(96, 3, 7), [2, 2], 11881, False, 16, stem_feeds_blocked=True)
    assert not wins(w(96, 3, 7), [2, 2], 8 * 11881, False, 16, plane=11881, stem_feeds_blocked=True)
    # Batch 8: the convs to 7x7 (392 pixels) and the 1x1s beside them, SqueezeNet's 13x13 (1352); ResNet's
    # 14x14 stage (1568) stays NCHW.
    assert wins(w(256, 64, 3), [1, 1], 8 * 169, False, 16, plane=169)
    assert not wins(w(128, 64, 3), [2, 2], 8 * 784, False, 16, plane=784)
    assert wins(w(512, 256, 3), [2, 2], 8 * 49, False, 16, plane=49)
    assert wins(w(512, 512, 3), [1, 1], 8 * 49, True, 16, plane=49)
    assert not wins(w(256, 256, 3), [1, 1], 8 * 196, False, 16, plane=196)
    assert not wins(w(64, 64, 3), [1, 1], 2 * 400, False, 16, plane=400)  # a plane over 196: NCHW at any batch
    assert not wins(w(512, 512, 3), [1, 1], None, True, 16)


def test_reorder_checks_the_channels_the_blocks_hide():
    x = np.ones((1, 8, 4, 4), np.float32)  # 8 channels fill one block of 16 as 16 would
    assert of.ops.reorder_to_nchwc(x, block=16, channels=8).shape == (1, 1, 4, 4, 16)
    assert of.ops.reorder_to_nchwc(x, block=16).shape == (1, 1, 4, 4, 16)  # 0: unchecked
    with pytest.raises(of.errors.InvalidArgumentError, match="ReorderToNchwc.*'x' has 8 channels.*'channels' is 16"):
        of.ops.reorder_to_nchwc(x, block=16, channels=16)
    with pytest.raises(of.errors.InvalidArgumentError, match="'channels' must be >= 0"):
        of.ops.reorder_to_nchwc(x, block=16, channels=-1)


def _fire(rng, first, second):
    """A SqueezeNet fire module at 13x13: squeeze 1x1, expand 1x1 (`first` channels) and 3x3 (`second`),
    Concat, classifier 1x1, pool."""
    def w(*s):
        return (rng.standard_normal(s) * (2.0 / np.prod(s[1:])) ** 0.5).astype(np.float32)

    inits = {"ws": w(16, 64, 1, 1), "w1": w(first, 16, 1, 1), "b1": w(first), "w3": w(second, 16, 3, 3),
             "b3": w(second), "wc": w(10, first + second, 1, 1)}
    N = helper.make_node
    nodes = [N("Conv", ["x", "ws"], ["s"]), N("Relu", ["s"], ["sr"]),
             N("Conv", ["sr", "w1", "b1"], ["e1"]), N("Relu", ["e1"], ["r1"]),
             N("Conv", ["sr", "w3", "b3"], ["e3"], pads=[1, 1, 1, 1]), N("Relu", ["e3"], ["r3"]),
             N("Concat", ["r1", "r3"], ["cat"], axis=1), N("Conv", ["cat", "wc"], ["c"]),
             N("GlobalAveragePool", ["c"], ["p"]), N("Flatten", ["p"], ["z"])]
    graph = helper.make_graph(nodes, "fire", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 13, 13])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 18)])


@pytest.mark.parametrize("first, second, blocked_concat", [(32, 24, True), (24, 32, False)])
def test_concat_of_blocked_values_stays_blocked_when_whole_blocks(monkeypatch, first, second, blocked_concat):
    monkeypatch.setenv("OPFORGE_NCHWC_BLOCK", "16")
    monkeypatch.setenv("OPFORGE_NCHWC", "mixed")
    rng = np.random.default_rng(first)
    model = _fire(rng, first, second)
    prog = _importer.Program(model)
    kinds = _kinds(prog)
    # 32 + 24: two whole blocks then a padded one: the two expands as one Conv2DNchwcConcat, each writing its
    # blocks of the result. 24 + 32: the padding of the first would sit mid-result, so both are reordered back
    # and concatenated in NCHW (the classifier's input goes in again).
    assert (kinds["Conv2DNchwc"], kinds["Conv2DNchwcConcat"]) == ((2, 1) if blocked_concat else (4, 0)), kinds
    assert kinds["Concat"] == (0 if blocked_concat else 1), kinds
    assert (kinds["ReorderToNchwc"], kinds["ReorderFromNchwc"]) == ((1, 1) if blocked_concat else (2, 3)), kinds
    x = rng.standard_normal((1, 64, 13, 13)).astype(np.float32)
    want = _ort(model, x)
    for _ in range(2):
        _close(prog.run({"x": x}), want)


@pytest.mark.usefixtures("small_196")
def test_packing_after_the_blocked_convs_sees_the_static_shapes(monkeypatch):
    # c1 (NCHW) reads c0's output; the pass drops c0's weight, and shape inference without it lost c1's input
    # size: its filter was packed for any size (a Winograd transform beside the panels; ResNet-18 b8 +150 MiB).
    from opforge import ops as P
    monkeypatch.setenv("OPFORGE_NCHWC_BLOCK", "16")
    monkeypatch.setenv("OPFORGE_NCHWC", "mixed")
    packs, pack = [], P.pack_conv2d_filter
    monkeypatch.setattr(P, "pack_conv2d_filter", lambda w, **kw: packs.append((w.shape, kw)) or pack(w, **kw))
    rng = np.random.default_rng(6)
    model = _net(rng)
    prog = _importer.Program(model)
    assert prog.static_shapes["r0"] == (1, 32, 16, 16)
    # 16 tiles of 4x4 at batch 1: Winograd in the column layout, as for the same conv without the pass.
    assert [kw for shape, kw in packs if shape == (32, 32, 3, 3)] == [
        {"winograd": True, "panels": True, "columns": True}], packs
    x = rng.standard_normal((1, 16, 32, 32)).astype(np.float32)
    _close(prog.run({"x": x}), _ort(model, x))
