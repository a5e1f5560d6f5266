"""Shape-only inference: _pywrap_internal.infer against eager execution.

infer() runs what eager execution runs before the kernel (type-attr
inference, attr completion and validation, the C++ shape function) on
(dtype, shape) pairs; every registered op must agree with its eager result,
and bad input must raise the op's usual opforge.errors class.
"""

import json
import pathlib
import sys

import numpy as np
import pytest

import opforge as of
from opforge import _pywrap_internal as pw

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from codegen import naming  # noqa: E402

REGISTRY = {op["name"]: op for op in json.loads(pw.registry_json())["ops"]}
BUILTIN = sorted(n for n, op in REGISTRY.items() if hasattr(of.ops, f"gen_{op['group']}_ops"))

rng = np.random.default_rng(0)


def arr(shape, dtype=np.float32):
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) > 0.5
    return (rng.random(shape) * 4 + 1).astype(dtype)


F, D, I, L = np.float32, np.float64, np.int32, np.int64
UNARY_FLOAT = ["Exp", "Log", "Sqrt", "Sin", "Cos", "Tanh", "Sigmoid"]
UNARY_NUMBER = ["Neg", "Abs", "Square", "Relu", "Identity", "ZerosLike", "OnesLike"]
UNARY_FLOAT += ["Erf", "Floor", "Ceil", "Round", "IsNan", "IsInf"]  # special_ops
UNARY_NUMBER += ["Sign"]  # special_ops
BINARY = ["Add", "Sub", "Mul", "Div", "Maximum", "Minimum", "Pow", "Equal", "NotEqual", "Less",
          "LessEqual", "Greater", "GreaterEqual"]
REDUCE = ["Sum", "Mean", "Max", "Min", "Prod"]

# op -> list of (inputs, attrs): inputs one per input arg (a list for a list arg).
CASES = {}
for op in UNARY_FLOAT:
    CASES[op] = [((arr((2, 3)),), {}), ((arr((), D),), {}), ((arr((0, 4)),), {})]
for op in UNARY_NUMBER:
    CASES[op] = [((arr((2, 3), I),), {}), ((arr((5,), D),), {})]
for op in BINARY:
    dt = F if op in ("Div", "Pow") else L
    CASES[op] = [((arr((2, 1, 3), dt), arr((4, 3), dt)), {}), ((arr((3,), D), arr((), D)), {})]
for op in REDUCE:
    CASES[op] = [((arr((2, 3, 4)),), {}), ((arr((2, 3, 4), D),), {"axis": [0, -1]}),
                 ((arr((2, 3)),), {"axis": 1, "keepdims": True})]
CASES.update({
    "LogicalAnd": [((arr((2, 3), bool), arr((3,), bool)), {})],
    "LogicalOr": [((arr((1, 3), bool), arr((2, 1), bool)), {})],
    "LogicalNot": [((arr((4,), bool),), {})],
    "Select": [((arr((2, 3), bool), arr((2, 3), I), arr((3,), I)), {})],
    "ArgMax": [((arr((2, 5)),), {}), ((arr((2, 5)),), {"axis": 1, "keepdims": True})],
    "ArgMin": [((arr((2, 5), I),), {"axis": 0})],
    "Cast": [((arr((2, 3)),), {"dtype": of.int64}), ((arr((4,), bool),), {"dtype": "float64"})],
    "Concat": [(([arr((2, 3)), arr((1, 3)), arr((4, 3))],), {}), (([arr((2, 3), I)] * 2,), {"axis": -1})],
    "Fill": [((np.float64(2.5),), {"shape": [2, 0, 3]}), ((np.int32(1),), {"shape": []})],
    "FusedElementwise": [(([arr((2, 3)), arr((3,))],), {"program": [0, 0, 0, 0, 0, 1, 1, 0, 16, 2, 0, 1, 10, 0, 2, 0],
                                                        "constants": []})],
    "FusedMatMul": [((arr((2, 3)), arr((3, 4)), arr((4,))), {"activation": "relu"}),
                    ((arr((3, 2)), arr((4, 3)), arr((4,))), {"transpose_a": True, "transpose_b": True})],
    "FusedMatMulActivationGrad": [((arr((2, 4)), arr((2, 4)), arr((2, 3)), arr((3, 4)), arr((4,))),
                                   {"activation": "gelu"}),
                                  ((arr((2, 4)), arr((2, 4)), arr((3, 2)), arr((4, 3)), arr((4,))),
                                   {"transpose_a": True, "transpose_b": True, "activation": "relu"})],
    "FusedMatMulActivationGradGrad": [((arr((2, 4)), arr((2, 4)), arr((2, 4)), arr((3, 2)), arr((4, 3)), arr((4,))),
                                       {"transpose_a": True, "transpose_b": True, "activation": "relu"})],
    "MatMul": [((arr((2, 3)), arr((3, 4))), {}),
               ((arr((3, 2), D), arr((4, 3), D)), {"transpose_a": True, "transpose_b": True})],
    "Reshape": [((arr((2, 6)),), {"shape": [3, -1]}), ((arr((4,), I),), {"shape": [2, 2, 1]})],
    "RmsNorm": [((arr((2, 8)), arr((8,))), {}), ((arr((3, 4), D), arr((4,), D)), {"epsilon": 0.1})],
    "SoftmaxGrad": [((arr((2, 3)), arr((2, 3))), {}), ((arr((2, 3, 4), D), arr((2, 3, 4), D)), {"axis": 1})],
    "RmsNormGrad": [((arr((2, 8)), arr((8,)), arr((2, 8))), {})],
    "MatMulGrad": [((arr((2, 3)), arr((3, 4)), arr((2, 4))), {}),
                   ((arr((2, 3, 4), D), arr((5, 4), D), arr((2, 3, 5), D)), {"transpose_b": True})],
    "ReduceGrad": [((arr((2, 3)), arr((2,)), arr((2,))), {"reduction": "max", "axis": [1]}),
                   ((arr((2, 3), D), arr((), D), arr((), D)), {"reduction": "sum"})],
    "ReduceGradGrad": [((arr((2, 3)), arr((2,)), arr((2,)), [arr((2, 3))]), {"reduction": "prod", "axis": [-1]}),
                       ((arr((2, 3), D), arr((), D), arr((), D), [arr((2, 3), D)] * 2), {"reduction": "prod"})],
    "SliceGrad": [((arr((4, 5)), arr((2, 3))), {"begin": [1, 2], "size": [2, -1]})],
    "ConcatGrad": [((arr((5, 3)), [arr((2, 3)), arr((3, 3))]), {"index": 1})],
    "ConcatGradGrad": [((arr((3, 3)), [arr((2, 3)), arr((3, 3))]), {"index": 1})],
    "Slice": [((arr((4, 5)),), {"begin": [1, 0], "size": [2, -1]})],
    "Softmax": [((arr((2, 7)),), {}), ((arr((3, 2), D),), {"axis": 0})],
    "LogSoftmax": [((arr((2, 7)),), {}), ((arr((3, 2), D),), {"axis": 0})],
    "Transpose": [((arr((2, 3, 4)),), {}), ((arr((2, 3, 4), I),), {"perm": [1, 0, 2]})],
})

# Training ops (issue 12).
IDX = np.array([[0, 2], [1, 1]], np.int64)
CASES.update({
    "Gelu": [((arr((2, 3)),), {})],
    "GeluTanh": [((arr((2, 3)),), {}), ((arr((5,), D),), {})],
    "GeluGrad": [((arr((2, 3)), arr((2, 3))), {})],
    "LayerNorm": [((arr((2, 4)), arr((4,)), arr((4,))), {}), ((arr((3, 2), D), arr((2,), D), arr((2,), D)), {"epsilon": 0.1})],
    "LayerNormGrad": [((arr((2, 4)), arr((2, 4)), arr((4,))), {})],
    "Gather": [((arr((3, 5)), IDX), {}), ((arr((4,), I), IDX.astype(np.int32)), {})],
    "GatherGrad": [((arr((3, 5)), IDX, arr((2, 2, 5))), {})],
    "SparseSoftmaxCrossEntropyWithLogits": [((arr((3, 4)), np.array([0, 3, 1])), {})],
    "DropoutMask": [((arr((2, 3)),), {"rate": 0.5, "seed": 1})],
    "ApplyGradientDescent": [((arr((2, 3)), arr((2, 3))), {"lr": 0.1})],
    "ApplyMomentum": [((arr((3,)), arr((3,)), arr((3,))), {"lr": 0.1, "momentum": 0.9})],
    "ApplyAdam": [((arr((3,), D), arr((3,), D), arr((3,), D), arr((3,), D)), {"lr": 0.1, "step": 2})],
})

# Vision ops (issue 23): conv / pool and their backward ops.
_X, _W = arr((2, 4, 7, 6)), arr((6, 2, 3, 3))
CASES.update({
    "Conv2D": [((_X, _W), {"strides": [2, 1], "pads": [1, 1, 1, 1], "groups": 2}), ((arr((1, 3, 5, 5), D), arr((4, 3, 1, 1), D)), {})],
    "Conv2DBackpropInput": [((_X, _W, arr((2, 6, 5, 4))), {"groups": 2})],
    "Conv2DBackpropFilter": [((_X, _W, arr((2, 6, 5, 4))), {"groups": 2})],
    "MaxPool2D": [((_X,), {"ksize": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": True})],
    "MaxPool2DGrad": [((_X, arr((2, 4, 3, 3))), {"ksize": [2, 2], "strides": [2, 2]})],
    "AvgPool2D": [((_X,), {"ksize": [2, 3], "strides": [1, 2], "count_include_pad": True})],
    "AvgPool2DGrad": [((_X, arr((2, 4, 3, 3))), {"ksize": [2, 2], "strides": [2, 2]})],
    "AdaptiveAvgPool2D": [((_X,), {"output_size": [3, 2]})],
    "AdaptiveAvgPool2DGrad": [((_X, arr((2, 4, 3, 2))), {"output_size": [3, 2]})],
    "FusedConv2D": [((_X, _W, arr((6,))), {"pads": [1, 1, 1, 1], "groups": 2, "activation": "silu"})],
    "ConvTranspose2D": [((_X, arr((4, 3, 3, 2))), {"strides": [2, 2], "output_padding": [1, 0], "groups": 2})],
    "Pad": [((_X,), {"pads": [0, 1, 2, 0, 0, 0, 1, 3], "mode": "reflect"}), ((arr((3,), I),), {"pads": [1, 2]})],
    "PadGrad": [((_X, arr((2, 5, 10, 9))), {"pads": [0, 1, 2, 0, 0, 0, 1, 3], "mode": "edge"})],
    "BatchNorm": [((_X, arr((4,)), arr((4,)), arr((4,)), arr((4,))), {"training": True}),
                  ((arr((3, 2), D), arr((2,), D), arr((2,), D), arr((2,), D), arr((2,), D)), {})],
    "BatchNormGrad": [((_X, _X, arr((4,)), arr((4,)), arr((4,)), arr((4,)), arr((4,))), {"training": True})],
    "ResizeBilinear": [((_X,), {"size": [9, 4], "coordinate_mode": "align_corners"})],
    "ResizeBilinearGrad": [((_X, arr((2, 4, 9, 4))), {"size": [9, 4]})],
})

# Random ops and autograd.Function's node (issues 26, 28).
CASES.update({
    "RandomUniform": [((), {"shape": [2, 3]}), ((), {"shape": [], "dtype": "float64", "seed": 3})],
    "RandomStandardNormal": [((), {"shape": [4, 0], "dtype": "float64"})],
    "TruncatedNormal": [((), {"shape": [5]})],
    "RandomUniformInt": [((), {"shape": [2, 2], "minval": -3, "maxval": 9}),
                         ((), {"shape": [3], "minval": 0, "maxval": 2, "dtype": "int32"})],
    "RandomShuffle": [((arr((4, 2)),), {"seed": 1}), ((arr((3,), I),), {})],
    "PythonFunction": [(([arr((2,)), arr((3,))], arr((2, 5), I)), {"key": 1}), (([arr((2,), D)], arr((), D)), {"key": 2, "index": 1})],
})
# State ops (eager: the process's variables), on variables made here first.
for _name in ("infer_v", "infer_m", "infer_s"):
    of.raw_ops.assign_variable(var=_name, value=arr((2, 3)))
CASES.update({
    "AssignVariable": [((arr((2, 3)),), {"var": "infer_fresh"}), ((arr((4,), I),), {"var": "infer_fresh_int"})],
    "AssignAddVariable": [((arr((2, 3)),), {"var": "infer_v"})],
    "AssignSubVariable": [((arr((2, 3)),), {"var": "infer_v"})],
    "ReadVariable": [((), {"var": "infer_v", "dtype": "float32", "shape": [2, 3]})],
    "VariableIsInitialized": [((), {"var": "infer_v"}), ((), {"var": "infer_never_assigned"})],
    "Group": [((), {})],
    "ResourceApplyGradientDescent": [((arr((2, 3)),), {"var": "infer_v", "lr": 0.1})],
    "ResourceApplyMomentum": [((arr((2, 3)),), {"var": "infer_v", "accum": "infer_m", "lr": 0.1, "momentum": 0.9})],
    "ResourceApplyAdam": [((arr((2, 3)), np.int64(1)), {"var": "infer_v", "m": "infer_m", "v": "infer_s", "lr": 0.1})],
})

# Quantization ops (issue 25): 8-bit operands, float32 scales.
U8, S8 = np.uint8, np.int8
_S, _QX, _QW = np.float32(0.5), arr((1, 4, 5, 5), U8), arr((6, 2, 3, 3), S8)
CASES.update({
    "QuantizeLinear": [((arr((2, 3)), _S, U8(3)), {}), ((arr((2, 3)), arr((3,)), arr((3,), S8)), {"axis": -1})],
    "DequantizeLinear": [((arr((2, 3), U8), _S, U8(1)), {}), ((arr((3, 2), S8), arr((3,)), arr((3,), S8)), {"axis": 0})],
    "DynamicQuantizeLinear": [((arr((2, 5)),), {})],
    "MatMulInteger": [((arr((2, 3), U8), arr((3, 4), S8), U8(1), S8(0)), {}),
                      ((arr((2, 2, 3), S8), arr((3, 4), U8), arr((), S8), arr((4,), U8)), {})],
    "QLinearMatMul": [((arr((2, 3), U8), _S, U8(1), arr((3, 4), S8), _S, S8(0), _S, U8(2)), {})],
    "ConvInteger": [((_QX, _QW, U8(1), S8(0)), {"groups": 2, "pads": [1, 1, 1, 1]})],
    "QLinearConv": [((_QX, _S, U8(1), arr((6, 4, 3, 3), S8), _S, S8(0), _S, S8(0), arr((6,), I)), {"strides": [2, 2]})],
})


# Packed-weight ops (issue 25): blobs packed here, once, at import of this module.
_QB = of.ops.pack_mat_mul_integer_weight(arr((3, 4), S8), S8(0)).numpy()
_HB = of.ops.pack_half_mat_mul_weight(arr((4, 3), np.float16), transpose_b=True).numpy()
_CB = of.ops.pack_conv2d_filter(arr((4, 3, 3, 3), np.float32)).numpy()
_FB = of.ops.pack_mat_mul_weight(arr((4, 3), np.float32), transpose_b=True).numpy()
CASES.update({
    "PackMatMulIntegerWeight": [((arr((3, 4), S8), arr((4,), S8)), {})],
    "MatMulIntegerPacked": [((arr((2, 5, 3), U8), U8(1), _QB), {"n": 4})],
    "DynamicQuantizeMatMul": [((arr((2, 3)), _QB, _S, arr((4,))), {"n": 4, "activation": "relu"})],
    "PackHalfMatMulWeight": [((arr((4, 3), np.float16),), {"transpose_b": True})],
    "HalfMatMulPacked": [((arr((2, 3), np.float16), _HB, arr((4,), np.float16)), {"n": 4})],
    "PackMatMulWeight": [((arr((4, 3), np.float32),), {"transpose_b": True})],
    "FusedMatMulPacked": [((arr((2, 3), np.float32), _FB, arr((4,), np.float32)), {"n": 4, "activation": "relu"})],
    "PackConv2DFilter": [((arr((4, 3, 3, 3), np.float32),), {"winograd": False})],
    "Conv2DPacked": [((arr((2, 3, 5, 5), np.float32), _CB, arr((4,), np.float32)),
                      {"filter_shape": [4, 3, 3, 3], "pads": [1, 1, 1, 1], "activation": "relu"})],
    "Conv2DPackedAdd": [((arr((2, 3, 5, 5), np.float32), _CB, arr((4,), np.float32), arr((2, 4, 5, 5), np.float32)),
                         {"filter_shape": [4, 3, 3, 3], "pads": [1, 1, 1, 1], "activation": "relu"})],
    "Conv2DPackedConcat": [((arr((2, 3, 5, 5), np.float32), [_CB, _CB], arr((8,), np.float32)),
                            {"filter_shapes": [4, 3, 3, 3] * 2, "strides": [1, 1] * 2, "pads": [1, 1, 1, 1] * 2,
                             "dilations": [1, 1] * 2, "activation": "relu"})],
    "ReorderToNchwc": [((arr((2, 3, 4, 4), np.float32),), {"block": 8})],
    "ReorderFromNchwc": [((arr((2, 1, 4, 4, 8), np.float32),), {"channels": 3, "block": 8})],
    "GlobalAveragePoolNchwc": [((arr((2, 1, 4, 4, 8), np.float32),), {"block": 8})],
    "Conv2DNchwc": [((arr((2, 1, 5, 5, 8), np.float32), arr((72,), np.float32), arr((8,), np.float32),
                      arr((0,), np.float32), arr((0,), np.float32)),
                     {"filter_shape": [8, 1, 3, 3], "block": 8, "groups": 8, "pads": [1, 1, 1, 1]})],
    "NchwcBlockSize": [((), {})],
    "MaxPool2DNchwc": [((arr((2, 1, 5, 5, 8), np.float32),), {"ksize": [3, 3], "block": 8, "strides": [2, 2],
                                                             "ceil_mode": True})],
    "Conv2DNchwcConcat": [((arr((2, 1, 5, 5, 8), np.float32), [arr((64,), np.float32), arr((576,), np.float32)],
                            arr((16,), np.float32)),
                           {"filter_shapes": [8, 8, 1, 1, 8, 8, 3, 3], "strides": [1, 1] * 2,
                            "pads": [0, 0, 0, 0, 1, 1, 1, 1], "dilations": [1, 1] * 2, "block": 8,
                            "activation": "relu"})],
})


# Index and attention ops (issue 24).
_ND = np.array([[2, 1], [0, -1]], np.int64)
CASES.update({
    "GatherND": [((arr((3, 4)), _ND), {}), ((arr((3, 4), I), _ND[:, :1].astype(np.int32)), {})],
    "ScatterND": [((arr((3, 4)), _ND, arr((2,))), {"reduction": "add"})],
    "GatherElements": [((arr((3, 4)), np.array([[0, 3], [2, 2]])), {"axis": 1})],
    "ScatterElements": [((arr((3, 4)), np.array([[0, 3], [2, 2]]), arr((2, 2))), {"axis": 1, "reduction": "max"})],
    "TopK": [((arr((3, 5)),), {"k": 2}), ((arr((4, 3), I),), {"k": 3, "axis": 0, "largest": False})],
    "NonZero": [((np.array([[1, 0], [0, 3]], np.int32),), {"count": 2})],
    "ScaledDotProductAttention": [((arr((1, 4, 3, 8)), arr((1, 2, 5, 8)), arr((1, 2, 5, 6)), arr((3, 5))),
                                   {"causal": True})],
    "ScaledDotProductAttentionGrad": [((arr((1, 2, 3, 4)), arr((1, 1, 3, 4)), arr((1, 1, 3, 2)), arr((1,)),
                                        arr((1, 2, 3, 2)), arr((1, 2, 3, 2))), {"scale": 0.5})],
    "ApplyRotaryEmbedding": [((arr((2, 3, 4, 6)), arr((4, 6)), arr((2, 1, 4, 6))), {})],
})

# Bitwise, trig, detection and unique ops (issue 24).
_U8 = np.uint8
CASES.update({
    **{op: [((arr((2, 3)),), {}), ((arr((), D),), {}), ((arr((0, 4)),), {})]
       for op in ("Asin", "Acos", "Atan", "Asinh", "Acosh", "Atanh")},
    **{op: [((arr((2, 1, 3), I), arr((4, 3), I)), {}), ((arr((3,), bool), arr((), bool)), {})]
       for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")},
    "BitwiseNot": [((arr((2, 3), _U8),), {})],
    "BitShift": [((arr((2, 3), _U8), arr((3,), _U8)), {"direction": "LEFT"})],
    "BitCast": [((arr((2, 3)),), {"dtype": of.int32}), ((arr((4,), D),), {"dtype": "uint64"})],
    "NonMaxSuppression": [((arr((2, 5, 4)), arr((2, 3, 5))), {"max_output_boxes_per_class": 2})],
    "Unique": [((arr((6, 2), I),), {}), ((arr((0, 3)),), {"sorted": False})],
})


# Shape-tensor ops (issue 24, one graph for every size): infer() sees no
# values, so the dims a shape tensor sets are unknown (None) there.
_V = lambda *v: np.array(v, np.int64)  # noqa: E731
VALUE_DEPENDENT = {"ReshapeTo", "Expand", "StridedSlice", "Tile", "ConstantOfShape", "ArangeOf"}
CASES.update({
    "Shape": [((arr((2, 3)),), {}), ((arr((), I),), {})],
    "ReshapeTo": [((arr((2, 6)), _V(3, -1)), {}), ((arr((2, 6)), _V(0, 3, 2)), {})],
    "Expand": [((arr((3, 1)), _V(2, 1, 4)), {})],
    "StridedSlice": [((arr((4, 5)), _V(3), _V(0), _V(0), _V(-2)), {})],
    "Tile": [((arr((2, 3), I), _V(2, 1)), {})],
    "ConstantOfShape": [((_V(2, 3), np.float64(1.5)), {})],
    "ArangeOf": [((np.int64(1), np.int64(9), np.int64(3)), {})],
})


def call(op, inputs, attrs):
    """Runs op eagerly, inputs by name (an attr may come first: Fill(shape, value))."""
    names = [naming.python_ident(i["name"]) for i in REGISTRY[op]["inputs"]]
    return getattr(of.ops, naming.op_python_name(op))(**dict(zip(names, inputs)), **attrs)


def spec(x):
    if isinstance(x, list):
        return [spec(v) for v in x]
    a = np.asarray(x)
    return (a.dtype, a.shape)


def test_every_builtin_op_has_a_case():
    assert sorted(CASES) == BUILTIN, "add an infer case for each new op"


@pytest.mark.parametrize("op", BUILTIN)
def test_infer_matches_eager(op):
    for inputs, attrs in CASES[op]:
        dtypes, shapes, completed = pw.infer(op, tuple(spec(x) for x in inputs), attrs)
        out = call(op, inputs, attrs)
        outs = out if isinstance(out, tuple) else (out,)
        assert len(dtypes) == len(shapes) == len(outs) == len(REGISTRY[op]["outputs"])
        for d, s, t in zip(dtypes, shapes, outs):
            assert isinstance(d, of.DType) and d == t.dtype, (op, d, t.dtype)
            if op in VALUE_DEPENDENT:
                assert len(s) == len(t.shape) and all(a in (b, None) for a, b in zip(s, t.shape)), (op, s, t.shape)
            else:
                assert s == t.shape, (op, s, t.shape)
        assert sorted(completed) == sorted(a["name"] for a in REGISTRY[op]["attrs"])
        for a in REGISTRY[op]["attrs"]:
            if a["name"] in attrs and a["type"] != "type":
                given = attrs[a["name"]]
                want = [given] if a["type"] == "list(int)" and isinstance(given, int) else given
                want = tuple(want) if isinstance(want, list) else want  # lists come back as tuples
                assert completed[a["name"]] == want, (op, a["name"])
            elif a["inferred"] and a["type"] == "int":  # N of a list arg
                arg = next(i for i in REGISTRY[op]["inputs"] if i["number_attr"] == a["name"])
                pos = [i["name"] for i in REGISTRY[op]["inputs"]].index(arg["name"])
                assert completed[a["name"]] == len(inputs[pos])
            elif a["inferred"]:  # T: the dtype of its first input
                pos = next(k for k, i in enumerate(REGISTRY[op]["inputs"]) if i["type_attr"] == a["name"])
                first = inputs[pos][0] if isinstance(inputs[pos], list) else inputs[pos]
                assert completed[a["name"]] == np.asarray(first).dtype
            elif a["has_default"] and a["default"] is not None and a["type"] != "type":
                default = a["default"]
                assert completed[a["name"]] == (tuple(default) if isinstance(default, list) else default)


def test_infer_accepts_every_dtype_spelling_and_needs_no_data():
    for d in (of.float64, np.float64, np.dtype("float64"), "float64"):
        dtypes, shapes, attrs = pw.infer("Add", ((d, (2**40, 3)), (d, [1, 3])), {})
        assert dtypes == (of.float64,) and shapes == ((2**40, 3),) and attrs == {"T": of.float64}
    dtypes, shapes, attrs = pw.infer("Fill", (("float32", ()),), {"shape": (2, 3)})
    assert shapes == ((2, 3),) and attrs["shape"] == (2, 3)


@pytest.mark.parametrize("op,inputs,attrs,error,needle", [
    ("Add", (("float32", (2, 3)), ("float32", (4, 3))), {}, of.errors.InvalidArgumentError,
     r"Add: argument 'x' with shape \[2, 3\] and argument 'y' with shape \[4, 3\] cannot be broadcast"),
    ("Add", (("int64", (2,)), ("uint64", (2,))), {}, of.errors.InvalidArgumentError,
     r"Add: argument 'y' has dtype uint64 and argument 'x' has dtype int64: the promotion table has no common"),
    ("Div", (("int32", (2,)), ("int32", (2,))), {}, of.errors.InvalidArgumentError,
     r"Div: argument 'x' has dtype int32, which is not supported"),
    ("Sum", (("float32", (2, 3)),), {"axis": [5]}, of.errors.InvalidArgumentError, r"Sum: .*axis"),
    ("Sum", (("float32", (2, 3)),), {"keepdims": 1}, of.errors.InvalidArgumentError,
     r"Sum: attr 'keepdims' must be a bool"),
    ("Sum", (("float32", (2, 3)),), {"keepdim": True}, of.errors.InvalidArgumentError,
     r"Sum: unknown attr 'keepdim'"),
    ("Cast", (("float32", (2,)),), {}, of.errors.InvalidArgumentError, r"Cast: attr 'dtype' is required"),
    ("MatMul", (("float32", (2, 3)), ("float32", (2, 3))), {}, of.errors.InvalidArgumentError, r"MatMul: "),
    ("Reshape", (("float32", (2, 3)),), {"shape": [4, -1]}, of.errors.InvalidArgumentError, r"Reshape: "),
    ("Add", (("float32", (2,)),), {}, of.errors.InvalidArgumentError, r"Add: infer\(\) got 1 inputs"),
    ("Add", (("complex64", (2,)), ("float32", (2,))), {}, of.errors.InvalidArgumentError,
     r"Add: argument 'x': dtype must be an opforge dtype"),
    ("Add", (("float32", (-1,)), ("float32", (2,))), {}, of.errors.InvalidArgumentError, r"Add: argument 'x': "),
    ("Add", (("float32", "ab"), ("float32", (2,))), {}, of.errors.InvalidArgumentError,
     r"Add: argument 'x': shape must be a sequence of ints"),
    ("Add", (("float32", (2.5,)), ("float32", (2,))), {}, of.errors.InvalidArgumentError,
     r"Add: argument 'x': shape must be a sequence of ints"),
    ("Add", (np.ones(2), ("float32", (2,))), {}, of.errors.InvalidArgumentError,
     r"Add: argument 'x' must be a \(dtype, shape\) pair"),
    ("Concat", (None,), {}, of.errors.InvalidArgumentError,
     r"Concat: argument 'values' must be a list of \(dtype, shape\) pairs"),
    ("Concat", ([("float32", (2,)), ("float64", (2,))],), {}, of.errors.InvalidArgumentError,
     r"Concat: argument 'values'\[1\] has dtype float64 but argument 'values' has dtype float32"),
    ("NoSuchOp", (), {}, of.errors.NotFoundError, r"NoSuchOp: op is not registered"),
])
def test_infer_errors_are_the_ops_errors(op, inputs, attrs, error, needle):
    with pytest.raises(error, match=needle):
        pw.infer(op, inputs, attrs)


def test_infer_errors_match_eager_errors():
    for op, inputs, attrs in [("Add", (np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)), {}),
                              ("MatMul", (np.ones((2, 3)), np.ones((2, 3))), {}),
                              ("Sum", (np.ones((2, 3)),), {"axis": [2]}),
                              ("Softmax", (np.ones((2, 3)),), {"axis": 3})]:
        with pytest.raises(of.errors.OpError) as eager:
            call(op, inputs, attrs)
        with pytest.raises(of.errors.OpError) as inferred:
            pw.infer(op, tuple(spec(x) for x in inputs), attrs)
        assert type(eager.value) is type(inferred.value)
        assert str(eager.value) == str(inferred.value)
