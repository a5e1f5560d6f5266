"""Winograd with its filter transform stored as column panels (PackConv2DFilter winograd=True, columns=True):
calls of 16 to 31 4x4 output tiles (batch 1 at 14x14) take Winograd with the tiles down the microkernel's rows,
each phase split over threads; fewer tiles take the column GEMM panels, more the usual block loop reading the
column panels. Against the numpy reference over random shapes, pads, activations and thread counts, and the
importer's choice against onnxruntime. Every instruction set: test_winograd.py reruns this module."""
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge as of
import vision_reference as ref
from opforge import ops as P

EXAMPLES = int(os.environ.get("OPFORGE_VISION_EXAMPLES", "12"))
ACTS = {"none": lambda z: z, "relu": lambda z: np.maximum(z, 0), "silu": lambda z: z / (1 + np.exp(-z)),
        "hardswish": lambda z: z * np.clip(z / 6 + 0.5, 0, 1)}


@st.composite
def column_case(draw):
    c, o = draw(st.integers(16, 48)), draw(st.integers(16, 70))
    p = [draw(st.integers(0, 2)) for _ in range(4)]
    # 8 to 20 output pixels a side at batch 1 (4 to 25 tiles), some calls at batch 2 or 3 (more tiles).
    h, w = draw(st.integers(10 - p[0] - p[2], 22)), draw(st.integers(10 - p[1] - p[3], 22))
    n = draw(st.sampled_from([1, 1, 1, 2, 3]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    f = (rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    return x, f, rng, p


@settings(max_examples=EXAMPLES, deadline=None)
@given(column_case(), st.sampled_from(sorted(ACTS)))
def test_column_winograd_matches_numpy(case, act):
    x, f, rng, pads = case
    b = rng.standard_normal(f.shape[0]).astype(np.float32)
    blob = P.pack_conv2d_filter(f, winograd=True, columns=True)
    got = P.conv2d_packed(x, blob, b, filter_shape=list(f.shape), strides=[1, 1], pads=pads, dilations=[1, 1],
                          activation=act).numpy()
    want = ACTS[act](ref.conv2d(x.astype(np.float64), f.astype(np.float64), pads=pads) + b.reshape(1, -1, 1, 1))
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * max(1.0, float(np.abs(want).max())))


def test_resnet_14x14_layer_at_batch_1():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 64, 14, 14)).astype(np.float32)
    f = (rng.standard_normal((96, 64, 3, 3)) / 24).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    blob = P.pack_conv2d_filter(f, winograd=True, columns=True)
    want = np.maximum(ref.conv2d(x.astype(np.float64), f.astype(np.float64), pads=[1] * 4) + b.reshape(1, -1, 1, 1), 0)
    # At the suite's thread count (the phases split over the intra-op pool; one thread runs them inline).
    got = P.conv2d_packed(x, blob, b, filter_shape=list(f.shape), strides=[1, 1], pads=[1] * 4, dilations=[1, 1],
                          activation="relu").numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * float(np.abs(want).max()))


def test_importer_stores_the_column_transform_for_batch_1_at_14x14():
    onnx = pytest.importorskip("onnx")
    if os.environ.get("OPFORGE_SANITIZED"):
        pytest.skip("onnxruntime is not run under the sanitizer preload")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper
    import opforge.onnx
    from opforge.onnx import _pack_conv
    rng = np.random.default_rng(4)
    f = (rng.standard_normal((32, 32, 3, 3)) / 17).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 14, 14])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(f, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 18)])
    assert _pack_conv.winograd_columns_pay((1, 32, 14, 14), [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 32, 32)
    assert not _pack_conv.winograd_columns_pay((1, 32, 7, 7), [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 32, 32)
    assert not _pack_conv.winograd_columns_pay((None, 32, 14, 14), [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 32, 32)
    x = rng.standard_normal((1, 32, 14, 14)).astype(np.float32)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    imported = opforge.onnx.import_model(model)
    with of.Session(imported.graph) as sess:
        got = sess.run(imported.outputs["y"], {imported.inputs["x"]: x})
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * float(np.abs(want).max()))
