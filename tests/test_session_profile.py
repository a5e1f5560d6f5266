"""Session.profile: per-node kernel times of in-order graph runs (cpp/framework/run_profile.*)."""
import numpy as np
import pytest

import opforge as of


def _graph():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [64, 64], name="x")
        y = of.matmul(x, x)
        z = of.sum(y)
    return g, x, y, z


def test_profile_lists_each_run_node_with_its_op_and_a_time():
    g, x, y, z = _graph()
    sess = of.Session(g)
    xv = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    rows = sess.profile(z, {x: xv}, runs=3)
    ops = [op for _, op, _ in rows]
    assert ops == ["MatMul", "Sum"], rows
    assert [name for name, _, _ in rows][0] == y.op.name
    assert all(isinstance(t, float) and 0 < t < 1 for _, _, t in rows)
    # Profiling is off again: a plain run records nothing, and gives the same value.
    np.testing.assert_allclose(sess.run(z, {x: xv}), (xv @ xv).sum(), rtol=1e-4)
    assert of._pywrap_internal.graph_profile_take() == []
    assert sess.inter_op_threads >= 1


def test_profile_rejects_runs_below_one():
    g, x, _, z = _graph()
    with pytest.raises(of.errors.InvalidArgumentError, match="runs"):
        of.Session(g).profile(z, {x: np.zeros((64, 64), np.float32)}, runs=0)
