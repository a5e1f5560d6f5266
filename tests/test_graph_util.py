"""opforge.graph_util.replace: swapping ops in a graph, by type or pattern,
for built-in ops and a plugin from load_op_library (issue 26 item 7)."""

import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import opforge as of
from opforge import errors
from opforge import graph_util as gu

import op_library_build

ROOT = pathlib.Path(__file__).resolve().parent
RNG = np.random.default_rng(3)


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """libplugin_matmul_ops.so: built with the SDK's flags, as a user would."""
    out = tmp_path_factory.mktemp("plugin") / "libplugin_matmul_ops.so"
    op_library_build.run([op_library_build.cxx(), "-shared", *of.sysconfig.get_compile_flags(),
                          str(ROOT / "graph_rewrite_fixtures" / "plugin_matmul_ops.cc"), "-o", str(out),
                          *of.sysconfig.get_link_flags()])
    return out


def _gelu_tanh_np(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _gelu_erf_np(x):
    from math import erf
    return x * 0.5 * (1 + np.vectorize(erf)(x / math.sqrt(2)))


@pytest.mark.parametrize("write", [
    lambda x: 0.5 * x * (1.0 + of.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * of.pow(x, 3.0)))),
    lambda x: x * (1.0 + of.tanh((x + x * x * x * 0.044715) * math.sqrt(2 / math.pi))) * 0.5,
])
def test_tanh_gelu_chain_becomes_one_gelu_node(write):
    w = RNG.standard_normal((4, 4)).astype(np.float32)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [None, 4], name="x")
        h = x @ w
        y = write(h) + 1.0
        also = of.tanh(h)  # a Tanh outside the chain stays
    xv = RNG.standard_normal((6, 4)).astype(np.float32)
    before, a1 = of.Session(g).run([y, also], {x: xv})
    np.testing.assert_allclose(before, _gelu_tanh_np(xv @ w) + 1, rtol=1e-5, atol=1e-6)
    assert len(gu.find(g, gu.TANH_GELU)) == 1
    new = gu.replace(g, gu.TANH_GELU, "Gelu")
    assert new.count == 1
    types = [o.type for o in new.graph.get_operations()]
    assert types.count("Gelu") == 1 and types.count("Tanh") == 1 and "Pow" not in types
    y2, also2 = new.tensor(y), new.tensor(also)
    assert y2.op.inputs[0].op.type == "Gelu" and y2.op.inputs[0].op.inputs[0].op.type == "MatMul"
    after, a2 = of.Session(new.graph).run([y2, also2], {new.tensor(x): xv})
    np.testing.assert_allclose(after, _gelu_erf_np((xv @ w).astype(np.float64)) + 1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(after, before, atol=2e-3)  # tanh GELU approximates erf GELU to ~1e-3
    np.testing.assert_array_equal(a2, a1)  # the untouched part computes exactly as before


def test_a_chain_read_from_outside_keeps_the_shared_nodes():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [3], name="x")
        t = of.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * of.pow(x, 3.0)))
        y = 0.5 * x * (1.0 + t)
        z = t * 2.0  # reads the chain's Tanh
    new = gu.replace(g, gu.TANH_GELU, "Gelu")
    xv = np.array([-1.0, 0.5, 2.0], np.float32)
    yv, zv = of.Session(new.graph).run([new.tensor(y), new.tensor(z)], {new.tensor(x): xv})
    np.testing.assert_allclose(yv, _gelu_erf_np(xv.astype(np.float64)), rtol=1e-5)
    np.testing.assert_allclose(zv, 2 * np.tanh(math.sqrt(2 / math.pi) * (xv + 0.044715 * xv ** 3)), rtol=1e-5)


def test_replacement_dtypes_and_shapes_are_checked():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [2, 3], name="x")
        y = of.sum(x, axis=[1])
        of.exp(y)
    with pytest.raises(errors.InvalidArgumentError, match=r"Exp gives shape \[2, 3\] where node 'Sum' \(Sum\) gave \[2\]"):
        gu.replace(g, "Sum", "Exp")
    with pytest.raises(errors.InvalidArgumentError, match="IsNan gives bool where node 'Exp'"):
        gu.replace(g, "Exp", "IsNan")
    with pytest.raises(errors.InvalidArgumentError, match="MatMul cannot replace node 'Exp'"):
        gu.replace(g, "Exp", "MatMul")
    with pytest.raises(errors.NotFoundError, match="NoSuchOp"):
        gu.replace(g, "Exp", "NoSuchOp")
    with pytest.raises(errors.NotFoundError, match="nothing in the graph matches"):
        gu.replace(g, "Tanh", "Exp")
    with pytest.raises(errors.InvalidArgumentError, match="not a pattern"):
        gu.replace(g, gu.op("Exp", object()), "Exp")


def test_plugin_matmul_replaces_matmul_and_the_result_saves_loads_and_runs(plugin, tmp_path):
    pytest.importorskip("onnx")
    w1 = RNG.standard_normal((5, 8)).astype(np.float32)
    w2 = RNG.standard_normal((8, 2)).astype(np.float32)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [None, 5], name="x")
        y = of.softmax(of.relu(x @ w1) @ w2)
    of.saved_graph.save(tmp_path / "mlp.onnx", g, {"x": x}, {"y": y})
    xv = RNG.standard_normal((7, 5)).astype(np.float32)
    ref = of.Session(g).run(y, {x: xv})
    np.save(tmp_path / "x.npy", xv)
    # A new process with no model code: load, replace MatMul by the plugin's op, run, save, load again.
    code = """
import sys, numpy as np, opforge as of
lib = of.load_op_library(sys.argv[2])
saved = of.saved_graph.load(sys.argv[1])
swapped = saved.replace("MatMul", "PluginMatMul")
types = [o.type for o in swapped.graph.get_operations()]
assert types.count("PluginMatMul") == 2 and "MatMul" not in types, types
out = swapped.run({"x": np.load(sys.argv[3])})["y"]
model = swapped.save(sys.argv[4])
domains = sorted({n.domain for n in model.graph.node})
again = of.saved_graph.load(sys.argv[4]).run({"x": np.load(sys.argv[3])})["y"]
np.save(sys.argv[5], np.stack([out, again]))
print(domains)
"""
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "mlp.onnx"), str(plugin),
                           str(tmp_path / "x.npy"), str(tmp_path / "swapped.onnx"), str(tmp_path / "out.npy")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['', 'opforge.lib.plugin_matmul']"
    out, again = np.load(tmp_path / "out.npy")
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(again, out)
    # Looking at it needs no library: the plugin's nodes show with their domain.
    shown = subprocess.run([sys.executable, "-m", "opforge", "graph", "show", str(tmp_path / "swapped.onnx")],
                           capture_output=True, text=True, timeout=300, check=True).stdout
    assert shown.count("opforge.lib.plugin_matmul.PluginMatMul(") == 2
    # Without the library, loading names the domain and load_op_library.
    proc = subprocess.run([sys.executable, "-c", "import sys, opforge as of; of.saved_graph.load(sys.argv[1])",
                           str(tmp_path / "swapped.onnx")], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "NotFoundError" in proc.stderr and "opforge.lib.plugin_matmul" in proc.stderr
    assert "libplugin_matmul_ops.so" in proc.stderr and "load_op_library" in proc.stderr


def test_copy_is_the_same_graph():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [2], name="x")
        y = of.concat([x, x * 2.0], axis=0)
    c = gu.copy(g)
    assert [(o.type, o.name) for o in c.graph.get_operations()] == [(o.type, o.name) for o in g.get_operations()]
    np.testing.assert_array_equal(of.Session(c.graph).run(c.tensor(y), {c.tensor(x): np.ones(2, np.float32)}),
                                  [1, 1, 2, 2])
