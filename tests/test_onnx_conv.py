"""ONNX Conv, pooling, BatchNormalization and hard activations against onnxruntime, eager and as a graph."""
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opforge as of  # noqa: E402
import opforge.onnx  # noqa: E402


def _model(nodes, x_shape, y_shape, inits=(), opset=18):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", opset)])


def _ort(model, feeds):
    if os.environ.get("OPFORGE_SANITIZED"):
        pytest.skip("onnxruntime is not run under the sanitizer preload")
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _check(model, x, rtol=1e-4, atol=1e-5):
    (want,) = _ort(model, {"x": x})
    (got,) = opforge.onnx.run(model, {"x": x})
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    imported = opforge.onnx.import_model(model)
    with of.Session(imported.graph) as sess:
        out = sess.run(imported.outputs["y"], {imported.inputs["x"]: x})
    np.testing.assert_allclose(out, want, rtol=rtol, atol=atol)


RNG = np.random.default_rng(11)


def _f(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("attrs,wshape", [
    (dict(pads=[1, 1, 1, 1]), (6, 4, 3, 3)),
    (dict(strides=[2, 2], dilations=[1, 2], pads=[0, 1, 2, 1], group=2), (6, 2, 3, 2)),
    (dict(auto_pad="SAME_UPPER", strides=[2, 2]), (6, 4, 3, 3)),
    (dict(auto_pad="SAME_LOWER", strides=[2, 1]), (6, 4, 2, 2)),
    (dict(auto_pad="VALID", group=4), (8, 1, 3, 3)),
    (dict(), (5, 4, 1, 1)),
])
def test_conv_with_bias(attrs, wshape):
    x = _f(2, 4, 9, 8)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)]
    m = _model(nodes, [2, 4, 9, 8], None, [("w", _f(*wshape)), ("b", _f(wshape[0]))])
    _check(m, x)


def test_conv1d_and_pool1d():
    x = _f(2, 3, 17)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[2], pads=[1, 2]),
             helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 1])]
    _check(_model(nodes, [2, 3, 17], None, [("w", _f(4, 3, 3))]), x)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[2, 3], strides=[2, 2], ceil_mode=1, dilations=[2, 1])),
    ("MaxPool", dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER", strides=[2, 2])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2])),
])
def test_pooling(op, attrs):
    x = _f(2, 3, 9, 10)
    _check(_model([helper.make_node(op, ["x"], ["y"], **attrs)], [2, 3, 9, 10], None), x)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "HardSwish"])
def test_global_pool_and_hardswish(op):
    _check(_model([helper.make_node(op, ["x"], ["y"])], [2, 3, 5, 4], None), _f(2, 3, 5, 4) * 4)


def test_hardsigmoid_with_attrs():
    m = _model([helper.make_node("HardSigmoid", ["x"], ["y"], alpha=0.3, beta=0.4)], [2, 3, 5, 4], None)
    _check(m, _f(2, 3, 5, 4) * 4)


def test_batchnorm_after_conv_and_with_fed_statistics():
    c = 6
    stats = [("s", _f(c)), ("bb", _f(c)), ("mean", _f(c)), ("var", np.abs(_f(c)) + 0.5)]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "mean", "var"], ["y"], epsilon=1e-3)]
    _check(_model(nodes, [2, 4, 7, 7], None, [("w", _f(c, 4, 3, 3))] + stats), _f(2, 4, 7, 7))


def test_batchnorm_is_folded_into_the_conv_before_it():
    c = 5
    stats = [("s", _f(c)), ("bb", _f(c)), ("mean", _f(c)), ("var", np.abs(_f(c)) + 0.5)]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], group=1),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "mean", "var"], ["n"], epsilon=1e-3),
             helper.make_node("Relu", ["n"], ["y"])]
    m = _model(nodes, [2, 3, 6, 6], None, [("w", _f(c, 3, 3, 3)), ("b", _f(c))] + stats)
    prog = opforge.onnx.load(m)
    assert [ctx.node.op_type for ctx, _, _ in prog.steps] == ["Conv", "Relu"]
    # Only the folded copies stay (none at all where the folded filter was packed).
    assert not {"w", "b", "s", "bb", "mean", "var"} & set(prog.initializers)
    _check(m, _f(2, 3, 6, 6))
    # A conv output used twice (BN and a graph output) keeps its BatchNormalization.
    m2 = _model(nodes[:2] + [helper.make_node("Add", ["n", "c"], ["y"])], [2, 3, 6, 6], None,
                [("w", _f(c, 3, 3, 3)), ("b", _f(c))] + stats)
    assert [ctx.node.op_type for ctx, _, _ in opforge.onnx.load(m2).steps] == ["Conv", "BatchNormalization", "Add"]
    _check(m2, _f(2, 3, 6, 6))
    # A statistic another node also reads stays; the rest of the folded pair's go.
    m3 = _model(nodes + [helper.make_node("Identity", ["mean"], ["z"])], [2, 3, 6, 6], None,
                [("w", _f(c, 3, 3, 3)), ("b", _f(c))] + stats)
    m3.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    prog3 = opforge.onnx.load(m3)
    assert "mean" in prog3.initializers and not {"w", "b", "s", "bb", "var"} & set(prog3.initializers)
    x = _f(2, 3, 6, 6)
    for got, want in zip(opforge.onnx.run(m3, {"x": x}), _ort(m3, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_unsupported_attributes_are_refused_at_import():
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"])], [1, 2, 3, 3, 3], None, [("w", _f(1, 2, 1, 1, 1))])
    with pytest.raises(of.errors.UnimplementedError, match="Conv"):
        opforge.onnx.run(m, {"x": _f(1, 2, 3, 3, 3)})
    m = _model([helper.make_node("BatchNormalization", ["x", "s", "s", "s", "s"], ["y"], spatial=0)],
               [2, 3, 4, 4], None, [("s", _f(3))], opset=7)
    with pytest.raises(of.errors.UnimplementedError, match="spatial"):
        opforge.onnx.run(m, {"x": _f(2, 3, 4, 4)})


def test_small_cnn_matches_onnxruntime():
    """conv-BN-relu-maxpool, depthwise + pointwise conv, HardSwish, global pool, Flatten, Gemm."""
    inits = [("w1", _f(8, 3, 3, 3)), ("b1", _f(8)), ("s", _f(8)), ("bb", _f(8)), ("mu", _f(8)),
             ("var", np.abs(_f(8)) + 0.5), ("dw", _f(8, 1, 3, 3)), ("pw", _f(16, 8, 1, 1)),
             ("fc", _f(10, 16)), ("fcb", _f(10))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c1", "s", "bb", "mu", "var"], ["n1"]),
             helper.make_node("Relu", ["n1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["p1", "dw"], ["d1"], group=8, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["d1", "pw"], ["c2"]),
             helper.make_node("HardSwish", ["c2"], ["h"]),
             helper.make_node("GlobalAveragePool", ["h"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1)]
    _check(_model(nodes, [2, 3, 32, 32], None, inits), _f(2, 3, 32, 32))


@pytest.mark.parametrize("coord,near,scales", [("asymmetric", "floor", [1, 1, 2, 3]),
                                               ("half_pixel", "round_prefer_floor", [1, 1, 3, 2]),
                                               ("pytorch_half_pixel", "round_prefer_ceil", [1, 1, 2, 2]),
                                               ("asymmetric", "round_prefer_floor", [1, 1, 2, 2])])
def test_resize_nearest_integer_upscaling(coord, near, scales):
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                              coordinate_transformation_mode=coord, nearest_mode=near)]
    _check(_model(nodes, [2, 3, 4, 5], None, [("scales", np.array(scales, np.float32))]), _f(2, 3, 4, 5))


def test_resize_unsupported_modes_are_refused():
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="bicubic")]
    m = _model(nodes, [1, 1, 2, 2], None, [("scales", np.array([1, 1, 2, 2], np.float32))])
    with pytest.raises(of.errors.InvalidArgumentError, match="nearest, linear, cubic"):
        opforge.onnx.run(m, {"x": _f(1, 1, 2, 2)})


def test_conv_transpose_pad_resize_linear_match_onnxruntime():
    """A decoder-style chain: ConvTranspose (groups, output_padding, bias), reflect Pad, bilinear Resize."""
    inits = [("wt", _f(4, 3, 3, 3)), ("bt", _f(6)), ("pads", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)),
             ("scales", np.array([1, 1, 1.5, 2], np.float32))]
    nodes = [helper.make_node("ConvTranspose", ["x", "wt", "bt"], ["t"], strides=[2, 2], pads=[1, 0, 1, 1],
                              output_padding=[1, 0], group=2),
             helper.make_node("Pad", ["t", "pads"], ["p"], mode="reflect"),
             helper.make_node("Resize", ["p", "", "scales"], ["y"], mode="linear",
                              coordinate_transformation_mode="half_pixel")]
    _check(_model(nodes, [2, 4, 5, 6], None, inits), _f(2, 4, 5, 6))
    nodes[2] = helper.make_node("Resize", ["p", "", "scales"], ["y"], mode="linear",
                                coordinate_transformation_mode="align_corners")
    _check(_model(nodes, [2, 4, 5, 6], None, inits), _f(2, 4, 5, 6))
