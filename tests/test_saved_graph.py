"""opforge.saved_graph: graphs saved as ONNX, loaded in a fresh process,
run in onnxruntime (issue 26 item 6)."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import opforge as of
from opforge import errors

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(7)
W = RNG.standard_normal((4, 3)).astype(np.float32)
B = RNG.standard_normal(3).astype(np.float32)
XV = RNG.standard_normal((5, 4)).astype(np.float32)


def _mlp():
    """Only ops with ONNX equivalents."""
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [None, 4], name="x")
        h = of.tanh(x @ W + B)
        y = of.softmax(of.reshape(h, [-1, 3]), axis=-1)
        s = of.sum(y * 2.0, axis=[1], keepdims=True)
        m = of.mean(of.maximum(h, 0.1))
        c = of.cast(of.greater(h, 0.0), of.int32)
        t = of.transpose(of.concat([h, h], axis=1), perm=[1, 0])
    return g, x, {"y": y, "s": s, "m": m, "c": c, "t": t}


def _run_fresh(code, *args):
    """Runs `code` in a new interpreter (no model code, only opforge)."""
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


LOAD_AND_RUN = """
import sys, numpy as np, opforge as of
saved = of.saved_graph.load(sys.argv[1])
out = saved.run({"x": np.load(sys.argv[2])})
np.savez(sys.argv[3], **out)
"""


def test_onnx_ops_only_graph_runs_in_onnxruntime_and_loads_in_a_fresh_process(tmp_path):
    g, x, outs = _mlp()
    path = tmp_path / "mlp.onnx"
    model = of.saved_graph.save(path, g, {"x": x}, outs)
    assert {n.domain for n in model.graph.node} == {""}  # every op has an ONNX equivalent
    onnx.checker.check_model(onnx.load(str(path)))
    with of.Session(g) as sess:
        ref = sess.run(outs, {x: XV})
    got = dict(zip([o.name for o in ort.InferenceSession(str(path)).get_outputs()],
                   ort.InferenceSession(str(path)).run(None, {"x": XV})))
    assert set(got) == set(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype and got[k].shape == ref[k].shape
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-6)
    np.save(tmp_path / "x.npy", XV)
    _run_fresh(LOAD_AND_RUN, str(path), str(tmp_path / "x.npy"), str(tmp_path / "out.npz"))
    fresh = np.load(tmp_path / "out.npz")
    for k in ref:
        np.testing.assert_array_equal(fresh[k], ref[k])  # the same kernels: bit for bit


def test_ops_without_onnx_equivalents_go_to_the_opforge_domain(tmp_path):
    g = of.Graph()
    with g.as_default():
        a = of.placeholder(of.float32, [3, 4], name="a")
        i = of.placeholder(of.int64, [3], name="i")
        y = of.gelu(of.matmul(a, W.T.copy(), transpose_b=True))  # transposed MatMul, Gelu
        q = of.arg_max(a, axis=1) + i                          # ArgMax: axis=None has no ONNX form
        sq = of.square(a)
    model = of.saved_graph.save(tmp_path / "g.onnx", g, [a, i], {"y": y, "q": q, "sq": sq})
    domains = {n.op_type: n.domain for n in model.graph.node}
    assert domains["MatMul"] == domains["Gelu"] == domains["ArgMax"] == domains["Square"] == "opforge"
    assert [n.name for n in model.graph.input] == ["a", "i"]
    feeds = {"a": RNG.standard_normal((3, 4)).astype(np.float32), "i": np.array([3, -4, 7], np.int64)}
    with of.Session(g) as sess:
        ref = sess.run({"y": y, "q": q, "sq": sq}, {a: feeds["a"], i: feeds["i"]})
    saved = of.saved_graph.load(tmp_path / "g.onnx")
    assert saved.outputs["y"].op.inputs[0].op.get_attr("transpose_b") is True
    got = saved.run(feeds)
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k])


def test_unknown_dims_survive_and_unknown_rank_inputs_are_refused(tmp_path):
    g = of.Graph()
    with g.as_default():
        u = of.placeholder(of.float32, name="u")
        v = of.placeholder(of.float32, [None, 2], name="v")
        y = of.exp(u) + 1.0
        z = v * 3.0
    with pytest.raises(errors.InvalidArgumentError, match="input 'u' has unknown rank"):
        of.saved_graph.save(tmp_path / "u.onnx", g, {"u": u, "v": v}, {"y": y, "z": z})
    of.saved_graph.save(tmp_path / "u.onnx", g, {"v": v}, {"z": z})
    saved = of.saved_graph.load(tmp_path / "u.onnx")
    assert saved.inputs["v"].shape == (None, 2)
    out = saved.run({"v": np.ones((5, 2), np.float32)})
    np.testing.assert_array_equal(out["z"], np.full((5, 2), 3.0, np.float32))


def test_outputs_that_are_inputs_or_constants_and_pruning(tmp_path):
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [2], name="x")
        unused = of.placeholder(of.float32, [2], name="unused")
        k = of.constant(np.array([1.0, 2.0], np.float32), name="k")
        y = x + k
        _ = of.exp(unused)  # not needed by the outputs: not saved
    model = of.saved_graph.save(tmp_path / "p.onnx", g, {"x": x}, {"same": x, "k": k, "y": y, "y2": y})
    assert [n.op_type for n in model.graph.node].count("Exp") == 0
    got = of.saved_graph.load(tmp_path / "p.onnx").run({"x": np.array([5, 6], np.float32)})
    np.testing.assert_array_equal(got["same"], [5, 6])
    np.testing.assert_array_equal(got["k"], [1, 2])
    np.testing.assert_array_equal(got["y"], [6, 8])
    np.testing.assert_array_equal(got["y2"], [6, 8])


def test_save_refuses_what_it_cannot_write(tmp_path):
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [2], name="x")
        hidden = of.placeholder(of.float32, [2], name="hidden")
        y = x + hidden
    with pytest.raises(errors.InvalidArgumentError, match="placeholder 'hidden'.*not among the inputs"):
        of.saved_graph.save(tmp_path / "a.onnx", g, {"x": x}, {"y": y})
    with pytest.raises(errors.InvalidArgumentError, match="must be placeholders"):
        of.saved_graph.save(tmp_path / "a.onnx", g, {"y": y}, {"y2": y})
    with pytest.raises(errors.InvalidArgumentError, match="not a tensor of the graph"):
        of.saved_graph.save(tmp_path / "a.onnx", g, {"x": x}, {"y": np.ones(2)})
    with pytest.raises(errors.InvalidArgumentError, match="Session or opforge.Graph"):
        of.saved_graph.save(tmp_path / "a.onnx", "graph", {"x": x}, {"y": y})
    assert not os.path.exists(tmp_path / "a.onnx")


def _saved(tmp_path):
    g, x, outs = _mlp()
    path = tmp_path / "m.onnx"
    return of.saved_graph.save(path, g, {"x": x}, outs), path


def _mutated(tmp_path, edit):
    model, _ = _saved(tmp_path)
    edit(model)
    return model.SerializeToString()


@pytest.mark.parametrize("make, err, pattern", [
    (lambda p: b"not a model at all", errors.InvalidArgumentError, "not a valid ONNX model"),
    (lambda p: open(p, "rb").read()[:200], errors.InvalidArgumentError, "not a valid ONNX model|undefined|no graph"),
    (lambda p: _mutated(p.parent, lambda m: m.graph.node[2].input.__setitem__(0, "nowhere")),
     errors.InvalidArgumentError, "nowhere"),
    (lambda p: _mutated(p.parent, lambda m: (setattr(m.graph.node[2], "domain", "opforge"),
                                              setattr(m.graph.node[2], "op_type", "NoSuchOp"),
                                              m.opset_import.add(domain="opforge", version=1))),
     errors.InvalidArgumentError, "no built-in op 'NoSuchOp'"),
    (lambda p: _mutated(p.parent, lambda m: m.graph.node[4].attribute.add(name="bogus", type=2, i=1)),
     errors.InvalidArgumentError, "bogus"),
    (lambda p: _mutated(p.parent, lambda m: setattr(m.graph.node[2], "op_type", "LpNormalization")),
     errors.InvalidArgumentError, "not one opforge.saved_graph writes"),
    (lambda p: _mutated(p.parent, lambda m: (setattr(m.graph.node[2], "domain", "opforge.lib.mylib"),
                                              m.opset_import.add(domain="opforge.lib.mylib", version=1))),
     errors.NotFoundError, "load it first with opforge.load_op_library"),
    (lambda p: _mutated(p.parent, lambda m: setattr(m.graph.initializer[0], "raw_data", b"\0" * 5)),
     errors.InvalidArgumentError, "bytes of data|not a valid ONNX model"),
    (lambda p: _mutated(p.parent, lambda m: setattr(m.opset_import[0], "version", 11)),
     errors.InvalidArgumentError, "bad.onnx is not a valid ONNX model: Unrecognized attribute: allowzero"),
    (lambda p: _mutated(p.parent, lambda m: setattr(m.opset_import[0], "version", 16)),
     errors.InvalidArgumentError, "uses ONNX opset 16.*opforge.onnx.import_model"),
])
def test_hostile_files_raise_clear_errors(tmp_path, make, err, pattern):
    _, path = _saved(tmp_path)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(make(path))
    with pytest.raises(err, match=pattern):
        of.saved_graph.load(bad)


def test_load_of_a_missing_file():
    with pytest.raises(errors.InvalidArgumentError, match="cannot read"):
        of.saved_graph.load("/nonexistent/model.onnx")


def test_graph_show_and_dot(tmp_path):
    _, path = _saved(tmp_path)
    run = [sys.executable, "-m", "opforge", "graph", "show", str(path)]
    text = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "x: float[?, 4]" in text and "Softmax: Softmax(" in text and "-> y  [axis=-1]" in text
    assert "ReduceSum" in text and "outputs:" in text
    dot = tmp_path / "m.dot"
    subprocess.run(run + ["--dot", str(dot)], capture_output=True, text=True, check=True)
    body = dot.read_text()
    assert body.startswith("digraph saved_graph {") and body.rstrip().endswith("}")
    assert '"in:x" -> ' not in body or "node0" in body
    assert body.count(" -> ") >= len(onnx.load(str(path)).graph.node)
    if shutil.which("dot"):
        assert (tmp_path / "m.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    bad = subprocess.run([sys.executable, "-m", "opforge", "graph", "show", str(tmp_path / "none.onnx")],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "cannot read" in bad.stderr and "Traceback" not in bad.stderr


def test_import_opforge_does_not_import_onnx():
    out = _run_fresh("import sys, opforge as of; of.saved_graph.SavedGraph; of.graph_util; "
                     "print('onnx' in sys.modules)")
    assert out.strip() == "False"


def test_corrupted_files_raise_opforge_errors_or_load(tmp_path):
    """Bytes flipped anywhere: an opforge error or a graph that loads, never another exception."""
    _, path = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(0)
    outcomes = set()
    for _ in range(150):
        bad = bytearray(data)
        for i in rng.integers(0, len(bad), rng.integers(1, 4)):
            bad[i] = rng.integers(0, 256)
        try:
            of.saved_graph.load(bytes(bad)).run({"x": XV})
            outcomes.add("loaded")
        except errors.OpError as e:
            outcomes.add(type(e).__name__)
    assert "InvalidArgumentError" in outcomes


def test_variables_are_saved_with_their_session_values_and_load_as_variables(tmp_path):
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [None, 4], name="x")
        target = of.placeholder(of.float32, [None, 3], name="target")
        w = of.Variable(np.zeros((4, 3), np.float32), name="w")
        b = of.Variable(np.zeros(3, np.float32), name="b", trainable=False)
        y = x @ w + b
        loss = of.mean((y - target) ** 2)
        step = of.optim.SGD(lr=0.1).minimize(loss)
        bump = b.assign_add(np.ones(3, np.float32))
        init = of.global_variables_initializer()
    tv = RNG.standard_normal((5, 3)).astype(np.float32)
    with of.Session(g) as sess:
        sess.run(init)
        with pytest.raises(errors.InvalidArgumentError, match="variable 'w': pass the Session"):
            of.saved_graph.save(tmp_path / "v.onnx", g, {"x": x}, {"y": y})
        for _ in range(3):
            sess.run(step, {x: XV, target: tv})
        sess.run(bump)
        ref = sess.run(y, {x: XV})
        model = of.saved_graph.save(tmp_path / "v.onnx", sess, {"x": x}, {"y": y})
    assert sorted(t.name for t in model.graph.initializer) == ["b", "w"]
    assert np.abs(ref).max() > 0.5  # the trained and bumped values, not the initial zeros
    (got_ort,) = ort.InferenceSession(str(tmp_path / "v.onnx")).run(None, {"x": XV})
    np.testing.assert_allclose(got_ort, ref, rtol=1e-5, atol=1e-6)
    code = """
import sys, numpy as np, opforge as of
saved = of.saved_graph.load(sys.argv[1])
assert sorted(saved.variables) == ["b", "w"], saved.variables
assert saved.variables["w"].trainable and not saved.variables["b"].trainable
y = saved.run({"x": np.load(sys.argv[2])})["y"]
again = saved.replace("MatMul", "MatMul").run({"x": np.load(sys.argv[2])})["y"]  # variables carried over
assert np.array_equal(y, again)
np.save(sys.argv[3], y)
"""
    np.save(tmp_path / "x.npy", XV)
    _run_fresh(code, str(tmp_path / "v.onnx"), str(tmp_path / "x.npy"), str(tmp_path / "y.npy"))
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), ref)
