"""The C++ graph is the only store (issue 21): Python's Graph, Operation and
SymbolicTensor are views (handle, node id, output index) whose facts are read
from C++; unknown dims are unknown in the shape functions (no stand-in sizes)."""
import sys

import numpy as np
import pytest

import opforge as of
from opforge import errors
from opforge.graph import Operation, SymbolicTensor


def test_views_hold_no_facts_only_ids():
    assert set(Operation.__slots__) <= {"graph", "_id", "__weakref__"}
    assert set(SymbolicTensor.__slots__) == {"graph", "_node", "value_index"}
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [2, 3], name="x")
        y = of.add(x, x); line = sys._getframe().f_lineno  # noqa: E702
        z = of.add(y, 1.0)
    assert not hasattr(g, "_ops") and not hasattr(g, "_names")
    # Names are made unique by the C++ graph, TensorFlow style.
    assert [op.name for op in g.get_operations()] == ["x", "Add", "Const", "Add_1"]
    assert g.unique_name("Add") == "Add_2"
    a, b = z.op.inputs
    assert a is y and b is g.get_operations()[2].outputs[0] and b.op.type == "Const"
    assert y.op.location.endswith(f"test_graph_store.py:{line}")
    assert z.op.get_attr("T") == of.float32 and z.shape == (2, 3)
    np.testing.assert_array_equal(g.get_operations()[2].get_attr("value").numpy(), np.float32(1.0))


def test_create_op_and_placeholder_attrs_read_from_cpp():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float64, [None, 4], name="x")
        c = g.create_op("Concat", {"values": [x, x]}, {"axis": 0}, name="cat")
    assert x.op.get_attr("shape") == [None, 4] and x.op.get_attr("dtype") == of.float64
    assert c.name == "cat:0" and c.op.get_attr("N") == 2 and c.shape == (None, 4)
    with pytest.raises(errors.InvalidArgumentError, match="missing input 'values'"):
        g.create_op("Concat", {}, {"axis": 0})


@pytest.mark.parametrize("build, shape", [
    (lambda x: of.concat([x, x], 1), (None, 8)),
    (lambda x: of.concat([x, np.ones((2, 4), np.float32)], 0), (None, 4)),
    (lambda x: of.slice(x, [1, 0], [2, -1]), (2, 4)),
    (lambda x: of.slice(x, [0, 1], [-1, 2]), (None, 2)),
    (lambda x: of.reshape(x, [-1, 2]), (None, 2)),
    (lambda x: of.matmul(x, np.ones((4, 5), np.float32)), (None, 5)),
    (lambda x: of.sum(x, None), ()),
    (lambda x: x * np.ones((1, 4), np.float32), (None, 4)),
])
def test_shape_functions_take_unknown_dims_as_unknown(build, shape):
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [None, 4], name="x")
        y = build(x)
    assert y.shape == shape
    xv = np.arange(12, dtype=np.float32).reshape(3, 4)
    with of.Session(g) as sess:
        got = sess.run(y, {x: xv})
    want = np.asarray(build(xv))
    np.testing.assert_array_equal(got, want)


def test_unknown_dims_that_cannot_fit_every_size_fail_at_build():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [None, 3], name="x")
        with pytest.raises(errors.InvalidArgumentError, match=r"unknown dimension \(None\)"):
            of.reshape(x, [-1, 2])  # 3 * n is not even for every n
        with pytest.raises(errors.InvalidArgumentError, match=r"\[None, 3\]"):
            of.matmul(x, np.ones((4, 2), np.float32))
        y = of.slice(x, [4, 0], [1, -1])  # needs 5 rows: checked when the graph runs
    with pytest.raises(errors.InvalidArgumentError, match="fed shapes"):
        of.Session(g).run(y, {x: np.ones((2, 3), np.float32)})
