"""opforge.onnx: onnxruntime as the oracle, and hostile models refused at import."""

import os
import subprocess
import sys

import numpy as np
import pytest

# Under the sanitizer build (.ci/sanitize) these would test onnx's and
# onnxruntime's C++ under an ASan preload, not opforge's: the kernels the
# models run are covered by the op tests there.
if os.environ.get("OPFORGE_SANITIZED"):
    pytest.skip("ONNX suites run in the plain build only", allow_module_level=True)

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opforge.onnx  # noqa: E402
from opforge import errors  # noqa: E402


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", opset)])


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _mlp(rng, sizes=(784, 512, 512, 10), batch=None):
    """Gemm (transB, as PyTorch exports Linear) + Relu, LayerNormalization, Softmax."""
    nodes, inits, x = [], [], "x"
    for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
        b = (0.1 * rng.standard_normal(n)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"h{i}"], transB=1, name=f"fc{i}"))
        x = f"h{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"], name=f"relu{i}"))
            x = f"r{i}"
    n = sizes[-1]
    inits += [numpy_helper.from_array((1 + 0.1 * rng.standard_normal(n)).astype(np.float32), "ln_s"),
              numpy_helper.from_array((0.1 * rng.standard_normal(n)).astype(np.float32), "ln_b")]
    nodes.append(helper.make_node("LayerNormalization", [x, "ln_s", "ln_b"], ["ln"], epsilon=1e-5, name="ln"))
    nodes.append(helper.make_node("Softmax", ["ln"], ["y"], axis=-1, name="softmax"))
    return _model(nodes, [_vi("x", [batch, sizes[0]])], [_vi("y", [batch, n])], inits)


def _ort(model, feeds):
    if os.environ.get("OPFORGE_SANITIZED"):
        # onnxruntime is the oracle, not under test: keep its uninstrumented
        # allocator out of the ASan run (opforge's side runs in test_onnx_backend).
        pytest.skip("onnxruntime is not run under the sanitizer preload")
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def test_mlp_matches_onnxruntime():
    rng = np.random.default_rng(0)
    model = _mlp(rng, sizes=(64, 32, 32, 10), batch=8)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    (got,) = opforge.onnx.run(model, {"x": x})
    (want,) = _ort(model, {"x": x})
    assert got.dtype == np.float32 and got.shape == (8, 10)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [11, 13])
def test_opset_semantics_match_onnxruntime(opset):
    # Softmax before 13 flattens to 2-D at axis; ReduceSum's axes move to an input at 13.
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    nodes = [helper.make_node("Softmax", ["x"], ["s"], axis=1),
             helper.make_node("LogSoftmax", ["x"], ["l"], axis=1)]
    inits = []
    if opset >= 13:
        inits.append(numpy_helper.from_array(np.array([0, -1], np.int64), "axes"))
        nodes.append(helper.make_node("ReduceSum", ["x", "axes"], ["r"], keepdims=0))
    else:
        nodes.append(helper.make_node("ReduceSum", ["x"], ["r"], axes=[0, -1], keepdims=0))
    model = _model(nodes, [_vi("x", [2, 3, 4])],
                   [_vi("s", None), _vi("l", None), _vi("r", None)], inits, opset=opset)
    for got, want in zip(opforge.onnx.run(model, [x]), _ort(model, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_converted_models_match_onnxruntime():
    """The suite's converted models that use mapped operators only, against onnxruntime."""
    from test_onnx_backend import CASES, SKIPS, _data_sets, _load_case_model
    checked = 0
    for p in CASES:
        case = p.values[0]
        if case.model_dir is None or case.name in SKIPS:
            continue
        model = _load_case_model(case)
        for inputs, _ in _data_sets(case):
            feeds = {vi.name: a for vi, a in zip(
                [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}],
                inputs)}
            try:
                want = _ort(model, feeds)
            except Exception as e:  # noqa: BLE001 -- e.g. onnxruntime lacks opset-6 Mul
                if "NOT_IMPLEMENTED" in str(e):
                    continue
                raise
            for got, w in zip(opforge.onnx.run(model, feeds), want):
                np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5, err_msg=case.name)
            checked += 1
    assert checked >= 10


def test_onnx_mlp_bench_runs():
    pytest.importorskip("onnxruntime")
    if os.environ.get("OPFORGE_SANITIZED"):
        pytest.skip("onnxruntime is not run under the sanitizer preload")
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-m", "bench.onnx_mlp", "--quick"], cwd=root, check=True,
                         capture_output=True, text=True).stdout
    assert "onnxruntime / opforge:" in out


def test_supported_operators_cover_the_issue_list():
    wanted = ("Add Sub Mul Div Pow Neg Abs Exp Log Sqrt Sin Cos Tanh Sigmoid Relu Equal Less Greater "
              "LessOrEqual GreaterOrEqual And Or Not Where Max Min MatMul Gemm Reshape Transpose Flatten "
              "Concat Slice Squeeze Unsqueeze Identity Cast Softmax LogSoftmax ReduceSum ReduceMean "
              "ReduceMax ReduceMin ReduceProd ArgMax ArgMin RMSNormalization Constant").split()
    assert set(wanted) <= set(opforge.onnx.supported_operators())


def test_import_opforge_does_not_import_onnx():
    code = "import sys, opforge; assert 'onnx' not in sys.modules and 'onnxruntime' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))


def test_import_model_builds_a_graph():
    import opforge as of
    rng = np.random.default_rng(2)
    model = _mlp(rng, sizes=(16, 8, 8, 4), batch=4)
    if not hasattr(of, "Graph"):
        with pytest.raises(errors.UnimplementedError, match="graph mode"):
            opforge.onnx.import_model(model)
        return
    x = rng.standard_normal((4, 16)).astype(np.float32)
    imported = opforge.onnx.import_model(model)
    assert list(imported.inputs) == ["x"] and list(imported.outputs) == ["y"]
    with of.Session(imported.graph) as sess:
        got = sess.run(imported.outputs["y"], feed_dict={imported.inputs["x"]: x})
    np.testing.assert_allclose(got, opforge.onnx.run(model, [x])[0], rtol=1e-6, atol=1e-7)



@pytest.mark.parametrize("weight_is_constant", [True, False])
def test_gemm_transposes_a_constant_weight_once_at_import(weight_is_constant):
    import opforge as of
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    w = rng.standard_normal((5, 6)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1, alpha=0.5)
    inputs = [_vi("x", [4, 6])] + ([] if weight_is_constant else [_vi("w", [5, 6])])
    inits = [numpy_helper.from_array(b, "b")] + ([numpy_helper.from_array(w, "w")] if weight_is_constant else [])
    imported = opforge.onnx.import_model(_model([node], inputs, [_vi("y", [4, 5])], inits))
    y = imported.outputs["y"]
    matmul = y.op.inputs[0].op.inputs[0].op  # Add(Mul(MatMul(x, w), alpha), b)
    assert matmul.type == "MatMul" and matmul.get_attr("transpose_b") is not weight_is_constant
    feeds = {imported.inputs[k]: v for k, v in (("x", x), ("w", w)) if k in imported.inputs}
    with of.Session(imported.graph) as sess:
        np.testing.assert_allclose(sess.run(y, feeds), 0.5 * x @ w.T + b, rtol=1e-5, atol=1e-6)

# --- hostile or unsupported models ------------------------------------------------

def _add_model(**kw):
    return _model([helper.make_node("Add", ["x", "y"], ["z"], name="add")],
                  [_vi("x", [2]), _vi("y", [2])], [_vi("z", [2])], **kw)


def _raises(cls, match, model_or_bytes):
    with pytest.raises(cls, match=match):
        opforge.onnx.load(model_or_bytes)


def test_truncated_and_garbage_bytes():
    data = _mlp(np.random.default_rng(0), sizes=(8, 4, 2)).SerializeToString()
    _raises(errors.InvalidArgumentError, "not a valid ONNX model|no graph", data[: len(data) // 2])
    _raises(errors.InvalidArgumentError, "not a valid ONNX model|no graph", b"\xff" * 64)
    _raises(errors.InvalidArgumentError, "cannot read", "/nonexistent/model.onnx")
    _raises(errors.InvalidArgumentError, "must be an onnx.ModelProto", 42)


def test_cycle_is_reported_not_followed():
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
             helper.make_node("Relu", ["a"], ["b"], name="n2")]
    _raises(errors.InvalidArgumentError, "cycle.*n1", _model(nodes, [_vi("x", [2])], [_vi("b", [2])]))


def test_dangling_input_and_reassigned_value():
    _raises(errors.InvalidArgumentError, "'n'.*reads 'nope'",
            _model([helper.make_node("Relu", ["nope"], ["y"], name="n")], [_vi("x", [2])], [_vi("y", [2])]))
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Relu", ["x"], ["y"], name="b")]
    _raises(errors.InvalidArgumentError, "already defined", _model(nodes, [_vi("x", [2])], [_vi("y", [2])]))
    _raises(errors.InvalidArgumentError, "never defined",
            _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("q", [2])]))


def test_unsupported_element_types():
    _raises(errors.UnimplementedError, "FLOAT8E4M3FN", _model(
        [helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2], TensorProto.FLOAT8E4M3FN)], [_vi("y", [2])]))
    w = helper.make_tensor("w", TensorProto.COMPLEX64, [2], [1, 2])
    _raises(errors.UnimplementedError, "initializer 'w'.*COMPLEX64", _add_model(initializers=[w]))
    cast = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.STRING, name="c")
    _raises(errors.UnimplementedError, "'c'.*STRING", _model([cast], [_vi("x", [2])], [_vi("y", [2])]))


def test_dims_that_overflow_or_disagree_with_the_data():
    huge = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 40, 1 << 40])
    _raises(errors.InvalidArgumentError, "overflow", _add_model(initializers=[huge]))
    neg = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[-3])
    _raises(errors.InvalidArgumentError, "negative", _add_model(initializers=[neg]))
    short = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[3, 3], raw_data=b"\0" * 16)
    _raises(errors.InvalidArgumentError, r"shape \[3, 3\].*16 bytes", _add_model(initializers=[short]))
    typed = onnx.TensorProto(name="w", data_type=TensorProto.INT64, dims=[5], int64_data=[1, 2, 3])
    _raises(errors.InvalidArgumentError, "5 elements.*3 values", _add_model(initializers=[typed]))
    const = helper.make_node("Constant", [], ["c"], value=onnx.TensorProto(
        data_type=TensorProto.FLOAT, dims=[1 << 31, 1 << 31, 1 << 31]), name="k")
    _raises(errors.InvalidArgumentError, "overflow", _model([const], [], [_vi("c", None)]))
    _raises(errors.InvalidArgumentError, "negative|overflow", _model(
        [helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [-5])], [_vi("y", [2])]))


def test_external_data_is_refused():
    t = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2],
                         data_location=TensorProto.EXTERNAL)
    t.external_data.add(key="location", value="../../etc/passwd")
    _raises(errors.UnimplementedError, "external", _add_model(initializers=[t]))


def test_unsupported_operator_named_at_import():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="ok"),
             helper.make_node("MelWeightMatrix", ["r"], ["y"], name="mel1")]
    _raises(errors.UnimplementedError, "'mel1' \\(MelWeightMatrix\\).*MelWeightMatrix is not supported",
            _model(nodes, [_vi("x", [1, 1, 2, 2])], [_vi("y", None)]))
    _raises(errors.UnimplementedError, "domain", _model(
        [helper.make_node("Relu", ["x"], ["y"], domain="com.example")], [_vi("x", [2])], [_vi("y", [2])]))


def test_unsupported_versions_and_attributes():
    # Cast before opset 6 took its target type as a string.
    _raises(errors.UnimplementedError, "opset 5.*versions", _model(
        [helper.make_node("Cast", ["x"], ["y"], to=1)], [_vi("x", [2])], [_vi("y", [2])], opset=5))
    _raises(errors.UnimplementedError, "attribute 'foo'", _model(
        [helper.make_node("Relu", ["x"], ["y"], foo=1, name="r")], [_vi("x", [2])], [_vi("y", [2])]))
    _raises(errors.InvalidArgumentError, "'axis' must be int", _model(
        [helper.make_node("Softmax", ["x"], ["y"], axis=1.5)], [_vi("x", [2])], [_vi("y", [2])]))
    x = np.arange(6, dtype=np.float32)
    steps = _model([helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"], name="sl")],
                   [_vi("x", [6])], [_vi("y", None)],
                   [numpy_helper.from_array(np.array([v], np.int64), n)
                    for n, v in [("s", 0), ("e", 6), ("a", 0), ("st", 2)]])
    np.testing.assert_array_equal(opforge.onnx.run(steps, [x])[0], x[0:6:2])  # strided: StridedSlice
    div = _model([helper.make_node("Div", ["x", "x"], ["y"], name="d")], [_vi("x", [6], TensorProto.UINT64)],
                 [_vi("y", None, TensorProto.UINT64)])
    with pytest.raises(errors.UnimplementedError, match="'d'.*uint64"):
        opforge.onnx.run(div, [np.arange(1, 7, dtype=np.uint64)])


def test_arg_max_min_select_last_index():
    x = np.array([[3, 1, 3, 0], [2, 2, 5, 5]], np.float32)
    for op, ref in (("ArgMax", np.argmax), ("ArgMin", np.argmin)):
        m = _model([helper.make_node(op, ["x"], ["y"], axis=1, keepdims=0, select_last_index=1)],
                   [_vi("x", [2, 4])], [_vi("y", None, TensorProto.INT64)])
        (got,) = opforge.onnx.run(m, [x])
        np.testing.assert_array_equal(got, 3 - ref(x[:, ::-1], axis=1))


def test_legacy_broadcast_is_exact():
    # Opset 6: no broadcasting unless broadcast=1, which aligns B with A at axis.
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.arange(3, dtype=np.float32)
    mk = lambda **kw: _model([helper.make_node("Add", ["a", "b"], ["c"], name="add", **kw)],
                             [_vi("a", [2, 3, 4]), _vi("b", [3])], [_vi("c", [2, 3, 4])], opset=6)
    (got,) = opforge.onnx.run(mk(broadcast=1, axis=1), [a, b])
    np.testing.assert_array_equal(got, a + b[:, None])
    with pytest.raises(errors.InvalidArgumentError, match="broadcast is 0"):
        opforge.onnx.run(mk(), [a, b])
    with pytest.raises(errors.InvalidArgumentError, match="does not broadcast"):
        opforge.onnx.run(mk(broadcast=1), [a, b])  # trailing alignment: 3 vs 4


def test_feeds_are_checked():
    prog = opforge.onnx.load(_add_model())
    one = np.ones(2, np.float32)
    with pytest.raises(errors.InvalidArgumentError, match="'x' must be float32, got float64"):
        prog.run({"x": np.ones(2), "y": one})
    with pytest.raises(errors.InvalidArgumentError, match=r"'y' must have shape \[2\]"):
        prog.run({"x": one, "y": np.ones(3, np.float32)})
    with pytest.raises(errors.InvalidArgumentError, match="no value fed for model input 'y'"):
        prog.run({"x": one})
    with pytest.raises(errors.InvalidArgumentError, match="not inputs"):
        prog.run({"x": one, "y": one, "q": one})
    np.testing.assert_array_equal(prog.run([one, one])[0], 2 * one)


def test_outputs_never_alias_weights_or_feeds():
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32), "w")
    m = _model([helper.make_node("Reshape", ["w", "s"], ["y"]), helper.make_node("Identity", ["x"], ["z"])],
               [_vi("x", [2])], [_vi("y", None), _vi("z", None)],
               [w, numpy_helper.from_array(np.array([2, 3], np.int64), "s")])
    prog = opforge.onnx.load(m)
    x = np.ones(2, np.float32)
    y, z = prog.run([x])
    y[...] = -1
    z[...] = -1
    np.testing.assert_array_equal(prog.run([x])[0], np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(x, 1)


def test_bool_initializer_bytes_are_normalized():
    t = onnx.TensorProto(name="c", data_type=TensorProto.BOOL, dims=[3], raw_data=bytes([0, 1, 7]))
    m = _model([helper.make_node("Not", ["c"], ["y"])], [], [_vi("y", [3], TensorProto.BOOL)], [t])
    np.testing.assert_array_equal(opforge.onnx.run(m, {})[0], [True, False, False])


def test_kernel_errors_name_the_node():
    m = _model([helper.make_node("MatMul", ["x", "y"], ["z"], name="mm")],
               [_vi("x", [2, 3]), _vi("y", [2, 3])], [_vi("z", None)])
    with pytest.raises(errors.InvalidArgumentError, match="'mm' \\(MatMul\\)"):
        opforge.onnx.run(m, [np.ones((2, 3), np.float32)] * 2)


def test_mutated_models_raise_opforge_errors_only():
    """Random byte flips of a valid model: each runs or raises an opforge error, never anything else."""
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st
    data = bytearray(_mlp(np.random.default_rng(0), sizes=(6, 4, 3), batch=2).SerializeToString())
    x = np.ones((2, 6), np.float32)

    @hypothesis.settings(max_examples=60, deadline=None, derandomize=True)
    @hypothesis.given(st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(0, 255)), min_size=1, max_size=4))
    def check(flips):
        mutated = bytearray(data)
        for pos, val in flips:
            mutated[pos] = val
        try:
            prog = opforge.onnx.load(bytes(mutated))
            if list(prog.inputs) == ["x"]:
                prog.run({"x": x})
        except errors.OpError:
            pass

    check()


def test_every_unsupported_operator_in_one_error():
    # Operators no helper maps: the error lists each once, with its count and a node.
    nodes = [helper.make_node("NoSuchOpA", ["x"], ["a"], name="a1"),
             helper.make_node("Relu", ["a"], ["r"], name="ok"),
             helper.make_node("NoSuchOpA", ["r"], ["b"], name="a2"),
             helper.make_node("NoSuchOpB", ["b"], ["c"], name="b1"),
             helper.make_node("Relu", ["c"], ["y"], name="odd", domain="com.example")]
    model = _model(nodes, [_vi("x", [2])], [_vi("y", [2])])
    model.ir_version = 8  # the onnx checker would refuse the unknown ops before opforge sees them
    with pytest.raises(errors.UnimplementedError) as info:
        opforge.onnx.load(model)
    msg = str(info.value)
    assert "3 operators used by 4 nodes" in msg, msg
    assert "NoSuchOpA x2 (e.g. node 'a1' (NoSuchOpA))" in msg, msg
    assert "NoSuchOpB x1 (e.g. node 'b1' (NoSuchOpB))" in msg, msg
    assert "Relu (domain 'com.example') x1 (e.g. node 'odd' (Relu))" in msg, msg
    assert "'ok'" not in msg
    assert info.value.unsupported_operators == {
        "NoSuchOpA": (2, "'a1' (NoSuchOpA)"), "NoSuchOpB": (1, "'b1' (NoSuchOpB)"),
        "Relu (domain 'com.example')": (1, "'odd' (Relu)")}
