"""float16 conv nets imported to compute in float32 between the graph's
edges (pkg/opforge/onnx/_half_compute.py, issue 25): the caller still feeds
and gets float16; the result matches onnxruntime's and float32 math rounded
once; graphs the pass must not touch are left alone."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opforge.onnx as ox  # noqa: E402
from opforge.onnx import _half_compute  # noqa: E402

H, F = TensorProto.FLOAT16, TensorProto.FLOAT


def _net(dtype=np.float16, cast_inside=False, output_is_input=False):
    """x -> Conv(w, b) -> Relu -> (Cast to f16) -> Add(const) -> MaxPool -> y (and z, a Constant's value)."""
    rng = np.random.default_rng(0)
    code = H if dtype == np.float16 else F
    w = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(dtype), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(dtype), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"])]
    src = "r"
    if cast_inside:
        nodes.append(helper.make_node("Cast", ["r"], ["rc"], to=code))
        src = "rc"
    nodes += [helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array(0.5, dtype), "k")),
              helper.make_node("Add", [src, "k"], ["a"]),
              helper.make_node("MaxPool", ["a"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    outputs = [helper.make_tensor_value_info("y", code, [1, 4, 4, 4]),
               helper.make_tensor_value_info("c", code, [1, 4, 8, 8])]  # an output that is also consumed
    if output_is_input:
        outputs.append(helper.make_tensor_value_info("x", code, [1, 3, 8, 8]))
    g = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", code, [1, 3, 8, 8])], outputs, [w, b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_the_rewrite_computes_in_float32_between_two_casts():
    m = _half_compute.compute_in_float32(_net(cast_inside=True, output_is_input=True))
    types = {t.name: t.data_type for t in m.graph.initializer}
    assert types == {"w": H, "b": H}  # widened as the importer reads them (one copy at a time)
    arrays = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    _half_compute.widen_initializers(m, arrays)
    assert {k: v.dtype for k, v in arrays.items()} == {"w": np.float32, "b": np.float32}
    left = {"w": np.zeros(2, np.float16)}
    _half_compute.widen_initializers(_net(), left)  # a model the pass did not rewrite: untouched
    assert left["w"].dtype == np.float16
    casts = [n for n in m.graph.node if n.op_type == "Cast"]
    assert [helper.get_attribute_value(a) for n in casts for a in n.attribute] == [F, F, H, H]
    assert m.graph.node[0].op_type == "Cast" and m.graph.node[0].input[0] == "x"
    const = next(n for n in m.graph.node if n.op_type == "Constant")
    assert const.attribute[0].t.data_type == F
    assert [o.name for o in m.graph.output] == ["y", "c", "x"]  # the caller's names and dtypes
    assert all(o.type.tensor_type.elem_type == H for o in m.graph.output)


def test_imported_half_conv_net_matches_float32_math_and_onnxruntime():
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float16)
    y, c, xo = ox.run(_net(cast_inside=True, output_is_input=True), {"x": x})
    assert y.dtype == c.dtype == xo.dtype == np.float16 and y.shape == (1, 4, 4, 4)
    np.testing.assert_array_equal(xo, x)
    # float32 math from the same float16 values, rounded once at the end
    net32 = _net(np.float32)
    w = numpy_helper.to_array(_net().graph.initializer[0]).astype(np.float32)
    b = numpy_helper.to_array(_net().graph.initializer[1]).astype(np.float32)
    for t in net32.graph.initializer:
        t.CopyFrom(numpy_helper.from_array({"w": w, "b": b}[t.name], t.name))
    want_y, want_c = ox.run(net32, {"x": x.astype(np.float32)})
    np.testing.assert_allclose(y.astype(np.float32), want_y.astype(np.float16).astype(np.float32), rtol=1e-3,
                               atol=1e-3)
    np.testing.assert_allclose(c.astype(np.float32), want_c.astype(np.float16).astype(np.float32), rtol=1e-3,
                               atol=1e-3)
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(_net(cast_inside=True, output_is_input=True).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    oy, oc, _ = sess.run(None, {"x": x})
    np.testing.assert_allclose(y.astype(np.float32), oy.astype(np.float32), rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(c.astype(np.float32), oc.astype(np.float32), rtol=1e-2, atol=1e-2)


def test_graphs_without_half_convs_or_with_subgraphs_are_left_alone():
    m32 = _net(np.float32)
    assert _half_compute.compute_in_float32(m32) is m32
    mlp = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", H, [2])],
        [helper.make_tensor_value_info("y", H, [2])]))
    assert _half_compute.compute_in_float32(mlp) is mlp
    m = _net()
    sub = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "then", [],
                            [helper.make_tensor_value_info("o", H, [1, 3, 8, 8])])
    m.graph.node.append(helper.make_node("If", ["cond"], ["z"], then_branch=sub, else_branch=sub))
    assert _half_compute.compute_in_float32(m) is m
