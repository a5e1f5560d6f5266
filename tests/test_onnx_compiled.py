"""Program.run on the graph engine (pkg/opforge/onnx/_compile.py): one compiled
graph for every size (shape subgraphs computed per feed-shape signature by
the engine), a graph per signature where a model needs static dims, the
eager node loop as the fallback; onnxruntime and the eager loop are the
oracles."""

import os

import numpy as np
import pytest

if os.environ.get("OPFORGE_SANITIZED"):
    pytest.skip("ONNX suites run in the plain build only", allow_module_level=True)

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opforge.onnx  # noqa: E402
from opforge import errors  # noqa: E402
from opforge.onnx import _compile  # noqa: E402
from test_onnx_import import _model, _mlp, _ort, _vi  # noqa: E402


def _eager(model, feeds):
    prog = opforge.onnx.load(model)
    prog.use_graph = False
    return prog.run(feeds)


def _run_twice(prog, feeds):
    """The first run of a signature is eager; the second compiles and runs the graph."""
    first = prog.run(feeds)
    second = prog.run(feeds)
    for a, b in zip(first, second):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    return second


def _shape_model():
    """x [N, S, 8] -> MatMul -> Reshape to [N, S, 2, 4] through Shape -> Gather -> Concat:
    the dims come from the feed, so the shape subgraph folds only once they are fixed."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([0, 1], np.int64), "idx"),
             numpy_helper.from_array(np.array([2, 4], np.int64), "tail")]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Shape", ["h"], ["s"]),
        helper.make_node("Gather", ["s", "idx"], ["ns"]),
        helper.make_node("Concat", ["ns", "tail"], ["target"], axis=0),
        helper.make_node("Reshape", ["h", "target"], ["r"]),
        helper.make_node("Softmax", ["r"], ["y"], axis=-1),
    ]
    return _model(nodes, [_vi("x", ["N", "S", 8])], [_vi("y", None)], inits)


def test_symbolic_dims_run_as_graphs_at_every_size():
    model = _shape_model()
    prog = opforge.onnx.load(model)
    rng = np.random.default_rng(1)
    for shape in [(1, 3, 8), (4, 5, 8), (2, 1, 8), (1, 3, 8)]:
        x = rng.standard_normal(shape).astype(np.float32)
        (got,) = _run_twice(prog, {"x": x})
        (want,) = _ort(model, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    reasons = prog.compiled_reasons()
    assert len(reasons) == 3 and all(r is None for r in reasons.values()), reasons
    # ... and all of them on one graph, compiled once.
    assert prog._compiled.generic_reason() is None
    assert len({id(e) for e in prog._compiled._entries.values()}) == 1


def test_the_one_graph_computes_shape_subgraphs_and_folds_the_rest():
    prog = opforge.onnx.load(_shape_model())
    _run_twice(prog, {"x": np.ones((2, 3, 8), np.float32)})
    (entry,) = prog._compiled._entries.values()
    types = [op.type for op in entry.session.graph.get_operations()]
    # Shape -> Gather -> Concat -> Reshape stays (the dims are symbolic); the
    # weight is a constant (its MatMul runs on the weight packed once), and
    # nothing that reads only constants is an op.
    assert {"Shape", "Gather", "Concat", "ReshapeTo", "FusedMatMulPacked"} <= set(types), types
    assert types.count("Concat") == 1 and "Reshape" not in types


def test_static_dims_still_fold_the_shape_subgraph():
    model = _shape_model()
    imported = opforge.onnx.import_model(model, input_shapes={"x": [2, 3, 8]})
    types = {op.type for op in imported.graph.get_operations()}
    assert "Concat" not in types and "Gather" not in types and "Shape" not in types and "Reshape" in types


def test_a_shape_computed_from_data_runs_on_the_graph_inferred_op_by_op():
    # Reshape's target comes from a fed tensor: the engine cannot plan the
    # shapes from the fed shapes alone, so it infers each op as it runs.
    model = _model([helper.make_node("Reshape", ["x", "t"], ["y"], name="reshape_by_data")],
                   [_vi("x", [2, 6]), _vi("t", [2], TensorProto.INT64)], [_vi("y", None)])
    prog = opforge.onnx.load(model)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for t in ([3, 4], [4, 3], [-1, 3]):
        (got,) = _run_twice(prog, {"x": x, "t": np.array(t, np.int64)})
        np.testing.assert_array_equal(got, x.reshape(t))
    assert list(prog.compiled_reasons().values()) == [None]
    with pytest.raises(errors.InvalidArgumentError, match="reshape_by_data.*negative dim -4"):
        prog.run({"x": x, "t": np.array([-4, 3], np.int64)})


def test_a_model_that_needs_static_dims_compiles_per_signature_and_says_why():
    model = _model([helper.make_node("Split", ["x"], ["a", "b"], axis=0, name="halves", num_outputs=2)],
                   [_vi("x", ["N", 3])], [_vi("a", None), _vi("b", None)], opset=18)
    prog = opforge.onnx.load(model)
    for n in (2, 4):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        a, b = _run_twice(prog, {"x": x})
        np.testing.assert_array_equal(a, x[: n // 2])
    assert "halves" in prog._compiled.generic_reason()
    assert all(r is None for r in prog.compiled_reasons().values()) and len(prog.compiled_reasons()) == 2


def test_a_run_time_error_names_the_onnx_node_as_the_eager_loop_does():
    model = _model([helper.make_node("Gather", ["x", "i"], ["y"], name="pick")],
                   [_vi("x", [4, 3]), _vi("i", [2], TensorProto.INT64)], [_vi("y", None)])
    prog = opforge.onnx.load(model)
    x = np.ones((4, 3), np.float32)
    np.testing.assert_array_equal(_run_twice(prog, {"x": x, "i": np.array([0, 3])})[0], x[[0, 3]])
    assert list(prog.compiled_reasons().values()) == [None]  # the failing run below is a graph run
    with pytest.raises(errors.InvalidArgumentError, match="pick") as graph_err:
        prog.run({"x": x, "i": np.array([0, 9])})
    with pytest.raises(errors.InvalidArgumentError) as eager_err:
        _eager(model, {"x": x, "i": np.array([0, 9])})
    assert str(graph_err.value) == str(eager_err.value)


def test_outputs_never_alias_feeds_or_weights():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = _model([helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Identity", ["w"], ["b"]),
                    helper.make_node("Reshape", ["w", "s"], ["c"])],
                   [_vi("x", [2, 3])], [_vi("a", None), _vi("b", None), _vi("c", None)],
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([3, 2], np.int64), "s")])
    prog = opforge.onnx.load(model)
    x = np.ones((2, 3), np.float32)
    a, b, c = _run_twice(prog, {"x": x})
    assert not np.shares_memory(a, x)
    a[...] = 7
    b[...] = 7
    c[...] = 7
    a2, b2, c2 = prog.run({"x": x})
    np.testing.assert_array_equal(a2, x)
    np.testing.assert_array_equal(b2, w)
    np.testing.assert_array_equal(c2, w.reshape(3, 2))


def test_graph_and_eager_agree_on_an_mlp_at_several_batches():
    model = _mlp(np.random.default_rng(2), sizes=(16, 8, 8, 4), batch="N")
    prog = opforge.onnx.load(model)
    for batch in (1, 5, 9):
        x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
        np.testing.assert_allclose(_run_twice(prog, [x])[0], _eager(model, [x])[0], rtol=1e-5, atol=1e-6)
    assert all(r is None for r in prog.compiled_reasons().values())


def test_the_cache_keeps_the_last_signatures_only():
    prog = opforge.onnx.load(_mlp(np.random.default_rng(3), sizes=(4, 4, 2), batch="N"))
    for batch in range(1, _compile._CACHE_SIZE + 3):
        _run_twice(prog, [np.ones((batch, 4), np.float32)])
    keys = list(prog.compiled_reasons())
    assert len(keys) == _compile._CACHE_SIZE and keys[-1] == ((_compile._CACHE_SIZE + 2, 4),)


def test_a_signature_seen_once_runs_eagerly_and_compiles_on_its_second_run():
    prog = opforge.onnx.load(_shape_model())
    x = np.ones((2, 3, 8), np.float32)
    prog.run({"x": x})
    assert prog.compiled_reasons() == {}
    prog.run({"x": x})
    assert prog.compiled_reasons() == {((2, 3, 8),): None}


def test_owned_finds_overlap_with_any_weight():
    base = np.arange(100, dtype=np.float32)
    weights = [base[10:20], np.zeros(5, np.float32), base[50:60]]
    owned = _compile.Owned(weights)
    assert owned.overlaps(base[15:16]) and owned.overlaps(base[55:70]) and owned.overlaps(base)
    assert not owned.overlaps(base[20:50]) and not owned.overlaps(np.zeros(3, np.float32))
    assert owned.overlaps(weights[1][::2])


def _backend_cases_on_the_graph_path(step):
    """onnx's backend cases that pass (tests/test_onnx_backend.py), each run a
    second time so the compiled graph runs it; returns how many ran as graphs."""
    pytest.importorskip("onnx.backend.test")
    from onnx.backend.test.runner import Runner

    import test_onnx_backend as tb
    from opforge.onnx import backend
    graphs = 0
    for p in tb.CASES[::step]:
        case = p.values[0]
        if case.name in tb.SKIPS:
            continue
        rep = backend.prepare(tb._load_case_model(case))
        for inputs, expected in tb._data_sets(case):
            expected = [numpy_helper.to_array(e) if isinstance(e, onnx.TensorProto) else e for e in expected]
            rep.run(inputs)
            try:
                Runner.assert_similar_outputs(expected, list(rep.run(inputs)), rtol=case.rtol, atol=case.atol)
            except AssertionError as e:
                raise AssertionError(f"{case.name} on the graph path: {e}") from None
        graphs += all(r is None for r in rep.program.compiled_reasons().values())
    return graphs


def test_backend_cases_pass_on_the_graph_path():
    # Every fifth case; all of them (about 7 s more) with
    # OPFORGE_ONNX_SUITE=full python -m pytest -q tests/test_onnx_compiled.py
    full = os.environ.get("OPFORGE_ONNX_SUITE") == "full"
    assert _backend_cases_on_the_graph_path(step=1 if full else 5) > (800 if full else 150)


def test_values_of_the_weights_alone_are_folded_once_for_every_signature():
    # Transpose(w) reads only a weight: one folded array serves both compiled batch sizes.
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    model = _model([helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
                    helper.make_node("MatMul", ["x", "wt"], ["y"])],
                   [_vi("x", ["N", 4])], [_vi("y", None)], [numpy_helper.from_array(w, "w")])
    prog = opforge.onnx.load(model)
    for batch in (2, 5):
        x = np.ones((batch, 4), np.float32)
        np.testing.assert_allclose(_run_twice(prog, {"x": x})[0], x @ w.T)
    (folded,) = prog._folds.values()
    np.testing.assert_array_equal(folded, w.T)


def test_a_signature_run_often_gets_its_own_graph_and_the_others_keep_the_generic_one():
    model = _shape_model()
    prog = opforge.onnx.load(model)
    rng = np.random.default_rng(3)
    often, once = rng.standard_normal((2, 3, 8)).astype(np.float32), rng.standard_normal((3, 4, 8)).astype(np.float32)
    (want_often,), (want_once,) = _ort(model, {"x": often}), _ort(model, {"x": once})
    for i in range(_compile._SPECIALIZE_AFTER + 3):
        np.testing.assert_allclose(prog.run({"x": often})[0], want_often, rtol=1e-5, atol=1e-6)
        if i % 4 == 0:
            np.testing.assert_allclose(prog.run({"x": once})[0], want_once, rtol=1e-5, atol=1e-6)
    generic = prog._compiled._generic
    own = prog._compiled._entries[((2, 3, 8),)]
    assert isinstance(own, _compile.Compiled) and own is not generic
    assert prog._compiled._entries[((3, 4, 8),)] is generic
    # Its graph has the dims fixed: the shape subgraph folded away.
    assert "Shape" not in {op.type for op in own.session.graph.get_operations()}
    assert all(r is None for r in prog.compiled_reasons().values())
