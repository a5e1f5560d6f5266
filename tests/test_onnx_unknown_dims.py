"""ONNX inputs with symbolic dims (dim_param) import as placeholders with
unknown dims; onnxruntime is the oracle at several batch sizes."""

import os

import numpy as np
import pytest

if os.environ.get("OPFORGE_SANITIZED"):
    pytest.skip("ONNX suites run in the plain build only", allow_module_level=True)

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

import opforge as of  # noqa: E402
import opforge.onnx  # noqa: E402
from opforge import errors  # noqa: E402
from test_onnx_import import _model, _mlp, _ort, _vi  # noqa: E402


def test_mlp_with_a_symbolic_batch_matches_onnxruntime_at_any_batch():
    rng = np.random.default_rng(0)
    model = _mlp(rng, sizes=(64, 32, 32, 10), batch="N")
    imported = opforge.onnx.import_model(model)
    x, y = imported.inputs["x"], imported.outputs["y"]
    assert x.shape == (None, 64) and y.shape == (None, 10)
    with of.Session(imported.graph) as sess:
        for batch in (1, 8, 33):
            xv = rng.standard_normal((batch, 64)).astype(np.float32)
            (want,) = _ort(model, {"x": xv})
            np.testing.assert_allclose(sess.run(y, {x: xv}), want, rtol=1e-5, atol=1e-6)
        with pytest.raises(errors.InvalidArgumentError, match="does not fit"):
            sess.run(y, {x: np.ones((4, 63), np.float32)})


def test_input_shapes_still_fixes_symbolic_dims():
    model = _mlp(np.random.default_rng(1), sizes=(16, 8, 8, 4), batch="N")
    imported = opforge.onnx.import_model(model, input_shapes={"x": [5, 16]})
    assert imported.inputs["x"].shape == (5, 16) and imported.outputs["y"].shape == (5, 4)


def test_a_node_that_needs_an_unknown_dim_statically_is_refused_naming_it():
    # Split sizes its outputs at import: with a symbolic dim on the split
    # axis that is an UnimplementedError naming the node.
    model = _model([helper.make_node("Split", ["x"], ["a", "b"], axis=0, name="halves", num_outputs=2)],
                   [_vi("x", ["N", 3])], [_vi("a", None), _vi("b", None)], opset=18)
    with pytest.raises(errors.UnimplementedError, match=r"halves.*static shape"):
        opforge.onnx.import_model(model)
    imported = opforge.onnx.import_model(model, input_shapes={"x": [4, 3]})
    xv = np.arange(12, dtype=np.float32).reshape(4, 3)
    a = of.Session(imported.graph).run(imported.outputs["a"], {imported.inputs["x"]: xv})
    np.testing.assert_array_equal(a, xv[:2])


def test_flatten_of_a_symbolic_dim_runs_at_every_size():
    model = _model([helper.make_node("Flatten", ["x"], ["y"], axis=2, name="flat")],
                   [_vi("x", ["N", 3, "M"])], [_vi("y", None)])
    imported = opforge.onnx.import_model(model)
    with of.Session(imported.graph) as sess:
        for shape in [(2, 3, 4), (1, 3, 5)]:
            xv = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
            np.testing.assert_array_equal(sess.run(imported.outputs["y"], {imported.inputs["x"]: xv}),
                                          xv.reshape(shape[0] * 3, -1))