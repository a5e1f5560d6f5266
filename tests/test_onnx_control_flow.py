"""ONNX If, Loop and Scan (pkg/opforge/onnx/_ops_control.py) against numpy:
bodies reading outer values, the order of nodes a body depends on, the
graph-mode path (fold or fall back to eager) and the errors."""

import os
import re

import numpy as np
import pytest

# Under the sanitizer build (.ci/sanitize) these would test onnx's and onnxruntime's
# C++ under an ASan preload, not opforge's (the op tests cover the kernels there).
if os.environ.get("OPFORGE_SANITIZED"):
    pytest.skip("ONNX suites run in the plain build only", allow_module_level=True)

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opforge  # noqa: E402
import opforge.onnx  # noqa: E402
from opforge import errors  # noqa: E402

F = TensorProto.FLOAT


def _vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _if_model():
    # The branches read 'h', which a node after the If (in file order) computes: the
    # import orders nodes by what their bodies read too.
    then = helper.make_graph([helper.make_node("Add", ["h", "x"], ["t"])], "then", [], [_vi("t", [3])])
    other = helper.make_graph([helper.make_node("Mul", ["h", "x"], ["e"])], "else", [], [_vi("e", [3])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if"),
             helper.make_node("Relu", ["x"], ["h"])]
    return _model(nodes, [_vi("c", [], TensorProto.BOOL), _vi("x", [3])], [_vi("y", [3])])


def test_if_runs_the_branch_its_condition_picks():
    x = np.array([-1.0, 2.0, 3.0], np.float32)
    m = _if_model()
    (yes,) = opforge.onnx.run(m, {"c": np.array(True), "x": x})
    (no,) = opforge.onnx.run(m, {"c": np.array(False), "x": x})
    np.testing.assert_array_equal(yes, np.maximum(x, 0) + x)
    np.testing.assert_array_equal(no, np.maximum(x, 0) * x)


def test_loop_carries_state_and_stacks_scan_outputs():
    # for i in range(M): s = s * 2 + i, while max(s) < limit; scan output: s at each step.
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Mul", ["s", "two"], ["s2"]),
         helper.make_node("Add", ["s2", "fi"], ["s_out"]),
         helper.make_node("ReduceMax", ["s_out"], ["top"], keepdims=0),
         helper.make_node("Less", ["top", "limit"], ["c_out"]),
         helper.make_node("Identity", ["s_out"], ["scan"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("c", [], TensorProto.BOOL), _vi("s", [2])],
        [_vi("c_out", [], TensorProto.BOOL), _vi("s_out", [2]), _vi("scan", [2])],
        [numpy_helper.from_array(np.float32(2), "two")])
    m = _model([helper.make_node("Loop", ["M", "c0", "s0"], ["s", "trace"], body=body)],
               [_vi("M", [], TensorProto.INT64), _vi("c0", [], TensorProto.BOOL), _vi("s0", [2]),
                _vi("limit", [])],
               [_vi("s", [2]), _vi("trace", None)])
    s0 = np.array([1.0, 0.5], np.float32)
    for trip, limit in ((5, 1e9), (10, 40.0)):
        s, trace = s0.copy(), []
        for i in range(trip):
            s = s * 2 + i
            trace.append(s.copy())
            if not s.max() < limit:
                break
        got_s, got_trace = opforge.onnx.run(m, {"M": np.array(trip, np.int64), "c0": np.array(True),
                                                 "s0": s0, "limit": np.array(limit, np.float32)})
        np.testing.assert_array_equal(got_s, s)
        np.testing.assert_array_equal(got_trace, np.stack(trace))


def _scan_model():
    # Running sum over axis 1, read backwards; the scan output is written along axis 1 too.
    body = helper.make_graph([helper.make_node("Add", ["acc", "x_t"], ["acc_out"]),
                              helper.make_node("Mul", ["acc_out", "w"], ["y_t"])],
                             "body", [_vi("acc", [2]), _vi("x_t", [2])], [_vi("acc_out", [2]), _vi("y_t", [2])])
    scan = helper.make_node("Scan", ["init", "xs"], ["final", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1])
    return _model([scan], [_vi("init", [2]), _vi("xs", [2, 4]), _vi("w", [2])], [_vi("final", [2]), _vi("ys", [2, 4])])


def _scan_reference(init, xs, w):
    acc, ys = init.copy(), []
    for t in range(xs.shape[1] - 1, -1, -1):
        acc = acc + xs[:, t]
        ys.append(acc * w)
    return acc, np.stack(ys, axis=1)


def test_scan_matches_numpy_eagerly_and_in_a_graph():
    rng = np.random.default_rng(0)
    init, xs, w = (rng.standard_normal(s).astype(np.float32) for s in ((2,), (2, 4), (2,)))
    want = _scan_reference(init, xs, w)
    got = opforge.onnx.run(_scan_model(), {"init": init, "xs": xs, "w": w})
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-6)
    imported = opforge.onnx.import_model(_scan_model())  # unrolled: a static length
    sess = opforge.Session(imported.graph)
    feeds = {imported.inputs[k]: v for k, v in (("init", init), ("xs", xs), ("w", w))}
    outs = sess.run([imported.outputs["final"], imported.outputs["ys"]], feeds)
    for g, v in zip(outs, want):
        np.testing.assert_allclose(np.asarray(g), v, rtol=1e-6)


def test_if_on_a_computed_condition_needs_a_value():
    # In a graph the condition has no value at import: UnimplementedError names the node.
    with pytest.raises(errors.UnimplementedError, match="'if'.*cond"):
        opforge.onnx.import_model(_if_model())


def test_unmapped_operators_in_a_body_are_listed_at_import():
    body = helper.make_graph([helper.make_node("MelWeightMatrix", ["x"], ["t"], name="mel")], "then", [],
                             [_vi("t", [3])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)]
    m = _model(nodes, [_vi("c", [], TensorProto.BOOL), _vi("x", [3])], [_vi("y", [3])])
    with pytest.raises(errors.UnimplementedError, match="'mel'.*MelWeightMatrix"):
        opforge.onnx.load(m)


def test_one_error_lists_unmapped_operators_of_the_graph_and_its_bodies():
    body = helper.make_graph([helper.make_node("MelWeightMatrix", ["x"], ["t"], name="mel"),
                              helper.make_node("STFT", ["t"], ["u"], name="stft")], "then", [], [_vi("u", [3])])
    nodes = [helper.make_node("Det", ["x"], ["d"], name="det"),
             helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body, name="if")]
    m = _model(nodes, [_vi("c", [], TensorProto.BOOL), _vi("x", [3])], [_vi("y", [3])])
    with pytest.raises(errors.UnimplementedError) as e:
        opforge.onnx.load(m)
    found = e.value.unsupported_operators
    assert set(found) == {"Det", "MelWeightMatrix", "STFT"}
    count, where = found["MelWeightMatrix"]
    assert count == 2 and re.fullmatch(r"'mel' \(MelWeightMatrix\) in (then|else)_branch of 'if' \(If\)", where)
    assert found["Det"] == (1, "'det' (Det)")
