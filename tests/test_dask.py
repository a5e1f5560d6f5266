"""opforge.dask: every registry op on dask arrays against numpy (the oracles of
tests/robustness_oracles.py), on several chunkings and the synchronous
scheduler; one pipeline on a two-process distributed.LocalCluster.

The op list is the registry's: an op whose category has no case builder
here, or a "none" op without a reason in NOT_DISTRIBUTED, fails.
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import dask  # noqa: E402
from dask.array.utils import assert_eq  # noqa: E402

import opforge as of  # noqa: E402
import opforge.dask as odask  # noqa: E402
from opforge import errors  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from codegen import naming  # noqa: E402
from robustness_oracles import ORACLES  # noqa: E402

OPS = {o["name"]: o for o in json.loads(of._pywrap_internal.registry_json())["ops"]}

# Ops declared Category("none"), and why they cannot be distributed.
NOT_DISTRIBUTED = {
    **{op: "stateful: reads or writes a variable of the process" for op in (
        "AssignVariable", "AssignAddVariable", "AssignSubVariable", "ReadVariable", "VariableIsInitialized",
        "ResourceApplyGradientDescent", "ResourceApplyMomentum", "ResourceApplyAdam")},
    "Group": "does nothing: it orders graph ops",
    **{op: "a shape-tensor op (ONNX import: one graph for every size); its shape depends on a value"
       for op in ("ArangeOf", "ConstantOfShape", "Expand", "ReshapeTo", "Shape", "StridedSlice", "Tile")},
    "ApplyAdam": "updates var, m and v in place",
    "ApplyGradientDescent": "updates var in place",
    "ApplyMomentum": "updates var and accum in place",
    "DropoutMask": "a function of each element's flat index, which a block does not know",
    "SparseSoftmaxCrossEntropyWithLogits": "two outputs",
    "LayerNormGrad": "three outputs", "MatMulGrad": "two outputs", "RmsNormGrad": "two outputs",
    "ConcatGrad": "backward op (the tape's); distribute the forward op",
    "ConcatGradGrad": "backward op (the tape's): ConcatGrad's adjoint",
    "GatherGrad": "backward op with a scatter-add over indices",
    **{op: "indices address the whole input, across chunk borders" for op in (
        "GatherND", "ScatterND", "GatherElements", "ScatterElements")},
    "TopK": "two outputs", "NonZero": "its output size depends on every chunk's values",
    "NonMaxSuppression": "boxes suppress each other across chunk borders; two outputs",
    "Unique": "rows are compared across chunk borders; five outputs",
    "ScaledDotProductAttention": "each query row reads every key: blocks would need the whole key/value",
    "ScaledDotProductAttentionGrad": "three outputs",
    "ApplyRotaryEmbedding": "cos/sin broadcast against x: their chunks would have to follow x's",
    **{op: "windows span chunk borders (needs overlap, not implemented)" for op in (
        "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MaxPool2D", "MaxPool2DGrad", "AvgPool2D",
        "AvgPool2DGrad", "AdaptiveAvgPool2D", "AdaptiveAvgPool2DGrad", "FusedConv2D", "ConvTranspose2D",
        "ResizeBilinear", "ResizeBilinearGrad", "Pad", "PadGrad")},
    "BatchNorm": "statistics over the whole batch and three outputs",
    "BatchNormGrad": "sums over the whole batch and five outputs",
    "ReduceGrad": "backward op (the tape's)", "ReduceGradGrad": "backward op (the tape's)",
    "SliceGrad": "backward op (the tape's)",
    "RandomUniform": "no inputs to chunk; a draw is a function of each element's flat index",
    "RandomStandardNormal": "no inputs to chunk; a draw is a function of each element's flat index",
    "TruncatedNormal": "no inputs to chunk; a draw is a function of each element's flat index",
    "RandomUniformInt": "no inputs to chunk; a draw is a function of each element's flat index",
    "RandomShuffle": "moves rows across blocks",
    "PythonFunction": "the tape's node of an autograd.Function call",
    "FusedMatMul": "an inference fast path for whole arrays; distribute MatMul + Add",
    "FusedElementwise": "made by the graph fusion pass when a graph is planned; distribute the ops it fuses",
    "FusedMatMulActivationGrad": "FusedMatMul's gradient, over whole arrays like it",
    "FusedMatMulActivationGradGrad": "the second-order term of FusedMatMul's gradient, over whole arrays like it",
    **{op: "quantization (issue 25): per-tensor parameters depend on the whole array, not yet distributed"
       for op in ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "QLinearMatMul",
                  "ConvInteger", "QLinearConv")},
    **{op: "packed weights (issue 25): an opaque per-process blob of the whole weight, not an array to chunk"
       for op in ("PackMatMulIntegerWeight", "MatMulIntegerPacked", "DynamicQuantizeMatMul", "PackHalfMatMulWeight",
                  "HalfMatMulPacked")},
    **{op: "packed float32 weights (issue 22): an opaque per-process blob of the whole weight, not an array to chunk"
       for op in ("PackMatMulWeight", "FusedMatMulPacked")},
    **{op: "packed conv filters (issue 23): an opaque per-process blob of the whole filter, not an array to chunk"
       for op in ("PackConv2DFilter", "Conv2DPacked", "Conv2DPackedAdd", "Conv2DPackedConcat")},
    **{op: "the NCHWc layout (issue 23): an inference layout inside imported CNN graphs, blocks of channels the "
           "importer lays out whole" for op in ("Conv2DNchwc", "ReorderToNchwc", "ReorderFromNchwc",
                                                  "GlobalAveragePoolNchwc", "NchwcBlockSize",
                                                  "MaxPool2DNchwc", "Conv2DNchwcConcat")},
}

# Chunk sizes per axis for the first array argument and for the others
# (different ones exercise dask's chunk unification).
CHUNKINGS = {"3": (3, 3), "uneven": (5, 5), "whole": (-1, -1), "mixed": (2, 4)}

RNG = np.random.default_rng(15)


def arr(shape, dtype="float64"):
    if dtype == "bool":
        return RNG.random(shape) > 0.5
    if np.dtype(dtype).kind == "i":
        return RNG.integers(-3, 4, shape).astype(dtype)
    return (RNG.random(shape) * 1.5 + 0.5).astype(dtype)  # > 0: log, sqrt, pow


def in_dtype(op, arg):
    if arg["fixed_type"]:
        return arg["fixed_type"]
    cpu = op["kernels"]["cpu"]
    return "float64" if "float64" in cpu else cpu[0]


def elementwise_cases(op):
    inputs = op["inputs"]
    dts = [in_dtype(op, a) for a in inputs]
    attrs = {"Cast": {"dtype": "int32"}, "BitCast": {"dtype": "int64"}, "BitShift": {"direction": "LEFT"}}.get(
        op["name"], {})
    cases = [([arr((6, 8), d) for d in dts], attrs)]
    if len(inputs) > 1:
        cases.append(([arr((6, 8), dts[0])] + [arr((8,), d) for d in dts[1:]], attrs))
        cases.append(([arr((6, 1), dts[0])] + [arr((8,), d) for d in dts[1:]], attrs))
        if dts[-1].startswith("float") and len(inputs) == 2:
            cases.append(([arr((6, 8), dts[0]), 1.5], attrs))
    return cases


def reduction_cases(op):
    x = arr((6, 8))
    cases = [([x], {}), ([x], {"axis": [1], "keepdims": True}), ([x], {"axis": [0]}),
             ([x], {"axis": [-1, 0], "keepdims": True}), ([x], {"axis": []})]
    if op["name"] in ("Sum", "Max", "Min"):
        cases.append(([arr((6, 8), "int64")], {"axis": [0]}))
    return cases


def arg_reduction_cases(op):
    x = arr((6, 8))
    return [([x], {}), ([x], {"axis": 0}), ([x], {"axis": -1, "keepdims": True}),
            ([x], {"keepdims": True})]


def contraction_cases(op):
    a, b = arr((6, 4)), arr((4, 8))
    return [([a, b], {}), ([a.T.copy(), b], {"transpose_a": True}),
            ([a, b.T.copy()], {"transpose_b": True}),
            ([arr((2, 6, 4)), arr((2, 4, 8))], {})]


def whole_axis_cases(op):
    has_axis = any(a["name"] == "axis" for a in op["attrs"])
    first = arr((6, 8))
    rest = [arr((6, 8) if has_axis else (8,)) for _ in op["inputs"][1:]]
    if not has_axis:
        return [([first] + rest, {})]
    return [([first] + rest, {"axis": -1}), ([first] + rest, {"axis": 0})]


LAYOUT_CASES = {
    "Reshape": lambda: [([arr((6, 8)), [8, 6]], {}), ([arr((6, 8)), [-1]], {}),
                        ([arr((6, 8)), [2, 3, 8]], {})],
    "Transpose": lambda: [([arr((6, 8))], {}), ([arr((6, 8))], {"perm": [1, 0]})],
    "Concat": lambda: [([[arr((6, 8)), arr((2, 8))]], {}), ([[arr((6, 8)), arr((6, 3))]], {"axis": 1})],
    "Slice": lambda: [([arr((6, 8)), [1, 2], [3, -1]], {}), ([arr((6, 8)), [0, 0], [6, 8]], {})],
    "Fill": lambda: [([[6, 8], np.array(2.5)], {}), ([[6, 8], np.array(3, np.int32)], {})],
    "Gather": lambda: [([arr((6, 8)), np.array([[5, 0], [2, 2]], np.int64)], {})],
}

BUILDERS = {"elementwise": elementwise_cases, "reduction": reduction_cases, "mean": reduction_cases,
            "arg_reduction": arg_reduction_cases, "contraction": contraction_cases,
            "whole_axis": whole_axis_cases,
            "layout": lambda op: LAYOUT_CASES[op["name"]]() if op["name"] in LAYOUT_CASES else []}


def accepted(op, args, kwargs):
    """Whether the op takes these inputs (a builder's broadcasting variant may not)."""
    pairs = []
    for a in (a for a in args if not isinstance(a, (list, float)) or op["name"] == "Concat"):
        if isinstance(a, list):
            pairs.append([(x.dtype.name, x.shape) for x in a])
        else:
            pairs.append((a.dtype.name, a.shape))
    try:
        attrs = {k: v for k, v in zip(op["params"], args) if k not in [i["name"] for i in op["inputs"]]}
        of._pywrap_internal.infer(op["name"], tuple(pairs), {**attrs, **kwargs})
    except errors.InvalidArgumentError:
        return False
    return True


def with_defaults(op, kwargs):
    """The oracles take every attr: the op's defaults filled in."""
    out = dict(kwargs)
    for a in op["attrs"]:
        if not a["inferred"] and a["has_default"] and a["name"] not in out:
            out[a["name"]] = a["default"]
    return out


def cases_of(name):
    op = OPS[name]
    builder = BUILDERS.get(op["category"])
    cases = builder(op) if builder else []
    if op["category"] == "elementwise":
        cases = [c for c in cases if accepted(op, *c)]
    return cases


def to_dask(args, chunking):
    first, other = chunking
    out, seen = [], 0

    def one(a):
        nonlocal seen
        size = first if seen == 0 else other
        seen += 1
        return da.from_array(a, chunks=size if a.ndim else ())
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(one(a))
        elif isinstance(a, list) and a and isinstance(a[0], np.ndarray):
            out.append([one(x) for x in a])
        else:
            out.append(a)
    return out


DISTRIBUTED = sorted(n for n, o in OPS.items() if o["category"] != "none")


def test_every_op_has_a_case_or_a_reason():
    for name, op in OPS.items():
        if op["category"] == "none":
            assert name in NOT_DISTRIBUTED, f"{name} is not distributed: say why in NOT_DISTRIBUTED"
        else:
            assert name in ORACLES, f"{name} has no numpy oracle in robustness_oracles.py"
            assert cases_of(name), f"{name} ({op['category']}) has no dask case here"
    stale = [n for n in NOT_DISTRIBUTED if OPS.get(n, {}).get("category") != "none"]
    assert not stale, f"NOT_DISTRIBUTED names ops that are distributed or gone: {stale}"
    assert set(odask.__all__) == {naming.op_python_name(n) for n in OPS}


@pytest.mark.parametrize("chunking", sorted(CHUNKINGS))
@pytest.mark.parametrize("name", DISTRIBUTED)
def test_op_matches_numpy(name, chunking):
    fn = getattr(odask, naming.op_python_name(name))
    oracle = ORACLES[name][1]
    with dask.config.set(scheduler="synchronous"):
        for args, kwargs in cases_of(name):
            want = oracle(*args, **with_defaults(OPS[name], kwargs))
            got = fn(*to_dask(args, CHUNKINGS[chunking]), **kwargs)
            assert isinstance(got, da.Array), name
            assert_eq(got, want, check_graph=False)


@pytest.mark.parametrize("name", sorted(NOT_DISTRIBUTED))
def test_undistributable_op_raises_naming_it(name):
    fn = getattr(odask, naming.op_python_name(name))
    n_params = len(OPS[name]["params"])
    with pytest.raises(errors.UnimplementedError, match=name):
        fn(*[None] * n_params)


def test_errors_raise_when_the_graph_is_built():
    x = da.ones((6, 8), chunks=3)
    with pytest.raises(errors.InvalidArgumentError, match="Sum"):
        odask.sum(x, axis=[5])
    with pytest.raises(errors.InvalidArgumentError, match="Add"):
        odask.add(x, da.ones((5,), chunks=2))
    with pytest.raises(errors.InvalidArgumentError, match="Softmax"):
        odask.softmax(x, axis=3)
    with pytest.raises(errors.UnimplementedError, match="MatMul"):
        odask.mat_mul(x, da.ones((8,), chunks=4))


def test_whole_axis_rechunks_only_that_axis():
    x = da.from_array(arr((6, 8)), chunks=(2, 3))
    y = odask.softmax(x, axis=1)
    assert y.chunks == ((2, 2, 2), (8,))
    assert_eq(y, ORACLES["Softmax"][1](x.compute(), 1), scheduler="synchronous")


def test_import_opforge_does_not_import_dask():
    code = "import sys, opforge, opforge.ops; assert 'dask' not in sys.modules, 'dask imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))


@pytest.mark.skipif(bool(os.environ.get("OPFORGE_SANITIZED")),
                    reason="worker processes under ASan are slow; the synchronous tests cover the ops")
def test_pipeline_on_a_two_process_local_cluster():
    distributed = pytest.importorskip("distributed")
    x = arr((64, 48), "float32")
    w = arr((48,), "float32")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        dx = da.from_array(x, chunks=(16, 16))
        h = odask.rms_norm(odask.tanh(odask.add(odask.mul(dx, 2.0), -1.0)), w)
        y = odask.sum(odask.mat_mul(odask.softmax(h), dx.T), axis=[0])
        got = client.compute(y).result()
        assert len(client.scheduler_info()["workers"]) == 2
    h = ORACLES["RmsNorm"][1](np.tanh(x * np.float32(2) - np.float32(1)), w, 1e-6)
    want = (ORACLES["Softmax"][1](h, -1) @ x.T).sum(0)
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_scalars_take_their_partners_dtype():
    c = arr((6, 8), "bool")
    x = arr((6, 8), "float32")
    got = odask.select(da.from_array(c, chunks=3), da.from_array(x, chunks=4), 1.5)
    assert got.dtype == np.float32
    assert_eq(got, np.where(c, x, np.float32(1.5)), scheduler="synchronous")
    assert_eq(odask.sub(2, da.from_array(np.arange(6, dtype=np.int32), chunks=4)),
              2 - np.arange(6, dtype=np.int32), scheduler="synchronous")
