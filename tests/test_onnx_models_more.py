"""ONNX import beyond one operator per node: symbolic dims run at every size
(eagerly), old opsets lifted by onnx.version_converter, operators expanded
from their ONNX function bodies (Attention), local functions, Einsum, exact
int64 Div/Mod; onnxruntime or numpy is the oracle."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto as T, helper as h  # noqa: E402

import opforge.onnx as ox  # noqa: E402

RNG = np.random.default_rng(7)


def _ort(model, feeds):
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _i64(name, v):
    return h.make_tensor(name, T.INT64, [len(v)], v)


def _dynamic_model():
    """x [N, S, 8] -> Reshape to [N, S, 2, 4] by a Shape/Gather/Concat subgraph, summed; positions
    Range(S) + CumSum(ConstantOfShape([N, S])) expanded to [N, S]."""
    nodes = [
        h.make_node("Shape", ["x"], ["shp"]),
        h.make_node("Gather", ["shp", "i0"], ["n"], axis=0),
        h.make_node("Gather", ["shp", "i1"], ["s"], axis=0),
        h.make_node("Concat", ["n", "s", "two_four"], ["tgt"], axis=0),
        h.make_node("Reshape", ["x", "tgt"], ["r"]),
        h.make_node("ReduceSum", ["r", "ax3"], ["y"], keepdims=0),
        h.make_node("Squeeze", ["s", "ax0"], ["s0"]),
        h.make_node("Range", ["zero", "s0", "one"], ["pos"]),
        h.make_node("Concat", ["n", "s"], ["ns"], axis=0),
        h.make_node("Expand", ["pos", "ns"], ["p"]),
        h.make_node("ConstantOfShape", ["ns"], ["ones"], value=h.make_tensor("v", T.INT64, [1], [1])),
        h.make_node("CumSum", ["ones", "one"], ["cs"]),
        h.make_node("Add", ["p", "cs"], ["z"]),
    ]
    inits = [_i64("i0", [0]), _i64("i1", [1]), _i64("two_four", [2, 4]), _i64("ax3", [3]), _i64("ax0", [0]),
             h.make_tensor("zero", T.INT64, [], [0]), h.make_tensor("one", T.INT64, [], [1])]
    g = h.make_graph(nodes, "dyn", [h.make_tensor_value_info("x", T.FLOAT, ["N", "S", 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", "S", 2]),
                      h.make_tensor_value_info("z", T.INT64, ["N", "S"])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_symbolic_dims_import_once_and_run_at_every_size():
    model = _dynamic_model()
    prog = ox.load(model)
    for shape in [(2, 3, 8), (1, 7, 8), (3, 1, 8)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        got, want = prog.run({"x": x}), _ort(model, {"x": x})
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset,nodes", [
    (6, [h.make_node("Dropout", ["x"], ["d"], is_test=1), h.make_node("Relu", ["d"], ["y"])]),
    (7, [h.make_node("Upsample", ["x"], ["y"], mode="nearest", scales=[1.0, 1.0, 2.0, 2.0])]),
])
def test_old_opsets_are_lifted_by_the_version_converter(opset, nodes):
    g = h.make_graph(nodes, "old", [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 3
    x = RNG.standard_normal((1, 1, 2, 3)).astype(np.float32)
    prog = ox.load(model)
    assert prog.opset > opset
    np.testing.assert_array_equal(prog.run({"x": x})[0], _ort(model, {"x": x})[0])


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_is_expanded_from_its_function_body(causal):
    b, hq, hkv, s, d = 2, 4, 2, 5, 8  # grouped key/value heads
    names = ["Q", "K", "V", "mask"]
    shapes = [[b, hq, s, d], [b, hkv, s, d], [b, hkv, s, d], [s, s]]
    node = h.make_node("Attention", names if not causal else names[:3], ["Y"], is_causal=causal)
    g = h.make_graph([node], "attn", [h.make_tensor_value_info(n, T.FLOAT, sh) for n, sh in zip(names, shapes)
                                      if causal == 0 or n != "mask"],
                     [h.make_tensor_value_info("Y", T.FLOAT, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 23)])
    feeds = {n: RNG.standard_normal(sh).astype(np.float32) for n, sh in zip(names, shapes)
             if causal == 0 or n != "mask"}
    np.testing.assert_allclose(ox.run(model, feeds)[0], _ort(model, feeds)[0], rtol=1e-4, atol=1e-5)


def test_local_functions_are_inlined():
    fn = h.make_function("local", "Gelu2", ["a"], ["b"], [
        h.make_node("Mul", ["a", "a"], ["sq"]), h.make_node("Tanh", ["sq"], ["b"])],
        opset_imports=[h.make_opsetid("", 17)])
    g = h.make_graph([h.make_node("Gelu2", ["x"], ["y"], domain="local")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [3])], [h.make_tensor_value_info("y", T.FLOAT, [3])])
    model = h.make_model(g, functions=[fn], opset_imports=[h.make_opsetid("", 17), h.make_opsetid("local", 1)])
    x = RNG.standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(ox.run(model, {"x": x})[0], np.tanh(x * x), rtol=1e-6)


@pytest.mark.parametrize("eq,shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->ji", [(3, 4)]), ("ii->i", [(4, 4)]), ("ij,ij->", [(3, 4)] * 2),
    ("...ij,...jk", [(2, 3, 4), (4, 2)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("i,j->ij", [(3,), (4,)]),
])
def test_einsum_matches_numpy(eq, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    g = h.make_graph([h.make_node("Einsum", names, ["y"], equation=eq)], "e",
                     [h.make_tensor_value_info(n, T.DOUBLE, s) for n, s in zip(names, shapes)],
                     [h.make_tensor_value_info("y", T.DOUBLE, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 12)])
    xs = [RNG.standard_normal(s) for s in shapes]
    np.testing.assert_allclose(ox.run(model, dict(zip(names, xs)))[0], np.einsum(eq, *xs), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op,fmod", [("Div", None), ("Mod", 0), ("Mod", 1)])
def test_int64_division_is_exact(op, fmod):
    a = np.concatenate([RNG.integers(-10**15, 10**15, 500), [7, -7, 7, -7, 0, 2**51 + 1]]).astype(np.int64)
    b = np.concatenate([RNG.integers(1, 999, 500) * RNG.choice([-1, 1], 500), [2, 2, -2, -2, 5, 3]]).astype(np.int64)
    attrs = {} if fmod is None else {"fmod": fmod}
    g = h.make_graph([h.make_node(op, ["a", "b"], ["y"], **attrs)], "d",
                     [h.make_tensor_value_info(n, T.INT64, [len(a)]) for n in "ab"],
                     [h.make_tensor_value_info("y", T.INT64, [len(a)])])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    q = np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))  # truncating, as C and ONNX divide
    want = q if op == "Div" else (np.fmod(a, b) if fmod else np.mod(a, b))
    np.testing.assert_array_equal(ox.run(model, {"a": a, "b": b})[0], want)


@pytest.mark.parametrize("extra", [{}, {"softcap": 2.0}])
def test_attention_is_fused_unless_it_asks_for_more(extra):
    b, heads, s, d = 1, 2, 4, 8
    node = h.make_node("Attention", ["Q", "K", "V"], ["Y"], is_causal=1, **extra)
    g = h.make_graph([node], "attn", [h.make_tensor_value_info(n, T.FLOAT, [b, heads, s, d]) for n in "QKV"],
                     [h.make_tensor_value_info("Y", T.FLOAT, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 23)])
    prog = ox.load(model)
    fused = [ctx.node.op_type for ctx, _, _ in prog.steps] == ["Attention"]
    assert fused is (not extra), node  # softcap: the function body runs instead, unfused
    feeds = {n: RNG.standard_normal((b, heads, s, d)).astype(np.float32) for n in "QKV"}
    np.testing.assert_allclose(prog.run(feeds)[0], _ort(model, feeds)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_of_bool_data(axis):  # BERT's and Llama's exported masks gather bool rows
    g = h.make_graph([h.make_node("Gather", ["x", "i"], ["y"], axis=axis)], "g",
                     [h.make_tensor_value_info("x", T.BOOL, [3, 4]), h.make_tensor_value_info("i", T.INT64, [2])],
                     [h.make_tensor_value_info("y", T.BOOL, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    x, i = RNG.random((3, 4)) > 0.5, np.array([2, -1])
    np.testing.assert_array_equal(ox.run(model, {"x": x, "i": i})[0], np.take(x, i, axis=axis))
