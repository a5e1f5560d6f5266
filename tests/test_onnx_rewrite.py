"""Import-time rewrites (pkg/opforge/onnx/_rewrite.py): decomposed GELU,
RMSNorm and LayerNorm become one operator; onnxruntime runs the unfused model
as the oracle, and a pattern that does not qualify is left alone."""

import os

import numpy as np
import pytest

if os.environ.get("OPFORGE_SANITIZED"):
    pytest.skip("ONNX suites run in the plain build only", allow_module_level=True)

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opforge.onnx  # noqa: E402
from test_onnx_import import _model, _ort, _vi  # noqa: E402

RNG = np.random.default_rng(0)


def _c(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value)))


def _types(prog):
    return [ctx.node.op_type for ctx, _, _ in prog.steps]


def _check(model, feeds, fused, unfused_op):
    prog = opforge.onnx.load(model)
    assert fused in _types(prog) and unfused_op not in _types(prog), _types(prog)
    want = _ort(model, feeds)
    for got, w in zip(prog.run(feeds), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)
    return prog


def _gelu_nodes(x="h", y="y", grouping=0, div=np.sqrt(2.0)):
    nodes = [_c("c2", np.float32(div)), _c("one", np.float32(1)), _c("half", np.float32(0.5)),
             helper.make_node("Div", [x, "c2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"])]
    if grouping == 0:  # (x * a) * 0.5, as BERT exports it
        nodes += [helper.make_node("Mul", [x, "a"], ["m"]), helper.make_node("Mul", ["m", "half"], [y])]
    elif grouping == 1:  # x * (a * 0.5)
        nodes += [helper.make_node("Mul", ["a", "half"], ["m"]), helper.make_node("Mul", [x, "m"], [y])]
    else:  # (x * 0.5) * a
        nodes += [helper.make_node("Mul", [x, "half"], ["m"]), helper.make_node("Mul", ["m", "a"], [y])]
    return nodes


@pytest.mark.parametrize("grouping", [0, 1, 2])
def test_erf_gelu_becomes_gelu(grouping):
    w = RNG.standard_normal((8, 6)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["h"])]
    nodes += _gelu_nodes(grouping=grouping)
    model = _model(nodes, [_vi("x", [3, 8])], [_vi("y", None)],
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    _check(model, {"x": RNG.standard_normal((3, 8)).astype(np.float32)}, "Gelu", "Erf")


def test_gelu_with_a_wrong_constant_or_a_shared_intermediate_is_left_alone():
    x = {"h": RNG.standard_normal((2, 5)).astype(np.float32)}
    model = _model(_gelu_nodes(div=1.5), [_vi("h", [2, 5])], [_vi("y", None)])
    _check(model, x, "Erf", "Gelu")
    # The Erf's output is a graph output too: it must still exist.
    model = _model(_gelu_nodes(), [_vi("h", [2, 5])], [_vi("y", None), _vi("e", None)])
    _check(model, x, "Erf", "Gelu")


def _rms_nodes(cast):
    nodes = [_c("two", np.float32(2)), _c("ax", np.array([-1], np.int64)), _c("eps", np.float32(1e-6)),
             _c("one", np.float32(1)),
             helper.make_node("Cast", ["x0"], ["x"], to=TensorProto.FLOAT),
             helper.make_node("Pow", ["x", "two"], ["p"]),
             helper.make_node("ReduceMean", ["p", "ax"], ["ms"], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["ae"]), helper.make_node("Sqrt", ["ae"], ["s"]),
             helper.make_node("Div", ["one", "s"], ["inv"]), helper.make_node("Mul", ["x", "inv"], ["n"])]
    if cast:
        nodes += [helper.make_node("Cast", ["n"], ["nc"], to=TensorProto.FLOAT),
                  helper.make_node("Identity", ["w0"], ["w"]), helper.make_node("Mul", ["w", "nc"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["n", "w0"], ["y"])]
    return nodes


@pytest.mark.parametrize("cast", [False, True])
def test_decomposed_rms_norm_becomes_rms_normalization(cast):
    w = RNG.standard_normal(16).astype(np.float32)
    model = _model(_rms_nodes(cast), [_vi("x0", [2, 3, 16])], [_vi("y", None)], [numpy_helper.from_array(w, "w0")],
                   opset=18)
    _check(model, {"x0": RNG.standard_normal((2, 3, 16)).astype(np.float32)}, "RMSNormalization", "ReduceMean")


def test_rms_norm_over_another_axis_is_left_alone():
    nodes = _rms_nodes(False)
    nodes[1] = _c("ax", np.array([1], np.int64))
    w = RNG.standard_normal(16).astype(np.float32)
    model = _model(nodes, [_vi("x0", [2, 16, 16])], [_vi("y", None)], [numpy_helper.from_array(w, "w0")], opset=18)
    _check(model, {"x0": RNG.standard_normal((2, 16, 16)).astype(np.float32)}, "ReduceMean", "RMSNormalization")


def test_decomposed_layer_norm_becomes_layer_normalization():
    w = RNG.standard_normal(12).astype(np.float32)
    b = RNG.standard_normal(12).astype(np.float32)
    nodes = [_c("two", np.float32(2)), _c("eps", np.float32(1e-5)),
             helper.make_node("ReduceMean", ["x"], ["mu"], axes=[-1]),
             helper.make_node("Sub", ["x", "mu"], ["d"]), helper.make_node("Pow", ["d", "two"], ["p"]),
             helper.make_node("ReduceMean", ["p"], ["var"], axes=[-1]),
             helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["s"]),
             helper.make_node("Div", ["d", "s"], ["n"]), helper.make_node("Mul", ["n", "w"], ["nw"]),
             helper.make_node("Add", ["nw", "b"], ["y"])]
    model = _model(nodes, [_vi("x", [4, 12])], [_vi("y", None)],
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    _check(model, {"x": RNG.standard_normal((4, 12)).astype(np.float32) * 3 + 1}, "LayerNormalization", "Sqrt")
