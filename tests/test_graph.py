"""Graph mode: nodes through the wrappers' hook, Session.run on the C++ engine."""

import threading

import numpy as np
import pytest

import opforge as of
from opforge import errors


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_issue_example():
    rng = np.random.default_rng(0)
    w_np = rng.random((784, 10), dtype=np.float32)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[64, 784], name="x")
        w = of.constant(w_np)
        y = of.softmax(x @ w)
        assert y.shape == (64, 10) and y.dtype == of.float32
    batch = rng.random((64, 784), dtype=np.float32)
    with of.Session(g) as sess:
        out = sess.run(y, feed_dict={x: batch})
    assert isinstance(out, np.ndarray)
    # The oracle in float64: logits near 200 summed over 784 float32 products
    # carry a rounding error of a few 1e-4 in any float32 BLAS (numpy's own
    # softmax of them is 3e-4 off), which softmax turns into that relative error.
    want = _softmax(batch.astype(np.float64) @ w_np.astype(np.float64))
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-6)


def test_symbolic_tensor_attributes():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [2, 3], name="x")
        s = of.sum(x, axis=[1], keepdims=True)
        c = of.concat([x, x], axis=0)
    assert x.name == "x:0" and x.op.type == "Placeholder"
    assert s.op.type == "Sum" and s.shape == (2, 1)
    assert s.op.inputs[0] is x
    assert s.op.get_attr("keepdims") is True and s.op.get_attr("T") == of.float32
    assert c.op.get_attr("N") == 2 and c.shape == (4, 3)
    assert g.get_operations()[0] is x.op
    with pytest.raises(errors.NotFoundError):
        s.op.get_attr("nope")


def test_numpy_on_symbolic_tensor_points_to_session_run():
    with of.Graph().as_default():
        x = of.placeholder(of.float32, [2])
    with pytest.raises(errors.InvalidArgumentError, match="Session"):
        x.numpy()
    with pytest.raises(errors.InvalidArgumentError, match="Session"):
        np.asarray(x)
    with pytest.raises(errors.InvalidArgumentError, match="Session"):
        bool(x)


def test_bad_node_raises_at_build_time_naming_node_and_line():
    with of.Graph().as_default():
        a = of.placeholder(of.float32, [2, 3])
        b = of.placeholder(of.float32, [4, 5])
        with pytest.raises(errors.InvalidArgumentError) as e:
            of.matmul(a, b)  # the line the error must name
        msg = str(e.value)
        assert "MatMul" in msg and "node 'MatMul'" in msg and "test_graph.py:" in msg
        with pytest.raises(errors.InvalidArgumentError, match="no common dtype"):
            of.add(of.placeholder(of.int64, [2, 3]), of.placeholder(of.uint64, [2, 3]))
        with pytest.raises(errors.InvalidArgumentError, match="axis"):
            of.sum(a, axis=[5])


def test_operators_scalars_and_constants():
    x_np = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [2, 3])
        y = (-x + 1) * 2.0 - x / 4 + np.ones((2, 3), np.float32)
        z = (x > 2.0) | (x < 1.0)
        t = x.T
        assert y.dtype == of.float32 and z.dtype == of.bool and t.shape == (3, 2)
    with of.Session(g) as sess:
        yv, zv, tv = sess.run([y, z, t], {x: x_np})
    np.testing.assert_allclose(yv, (-x_np + 1) * 2 - x_np / 4 + 1)
    np.testing.assert_array_equal(zv, (x_np > 2) | (x_np < 1))
    np.testing.assert_array_equal(tv, x_np.T)


def test_fetch_structures_and_plain_feeds():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float64, [3])
        a, b = x + 1, x * 3
    sess = of.Session(g)
    out = sess.run({"a": a, "pair": (b, [a, x])}, {x: [1.0, 2.0, 3.0]})
    np.testing.assert_array_equal(out["a"], [2, 3, 4])
    assert isinstance(out["pair"], tuple) and isinstance(out["pair"][1], list)
    np.testing.assert_array_equal(out["pair"][0], [3, 6, 9])
    np.testing.assert_array_equal(out["pair"][1][1], [1, 2, 3])


def test_feeds_of_another_shape_reinfer_or_fail_before_running():
    w = np.ones((3, 2), np.float32)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [2, 3])
        y = of.matmul(x + 1, w)
    with of.Session(g) as sess:
        np.testing.assert_allclose(sess.run(y, {x: np.zeros((5, 3), np.float32)}), np.full((5, 2), 3))
        with pytest.raises(errors.InvalidArgumentError, match="fed shapes.*MatMul"):
            sess.run(y, {x: np.zeros((5, 4), np.float32)})
        assert sess.last_run_stats["nodes_run"] == 2  # from the good run: the bad one ran nothing
        # float64 data is converted when no value changes (test_graph_user_errors.py), else refused
        with pytest.raises(errors.InvalidArgumentError, match="dtype"):
            sess.run(y, {x: np.full((2, 3), 1e300)})
        with pytest.raises(errors.InvalidArgumentError, match="must be fed"):
            sess.run(y)


def test_pruning_runs_only_what_fetches_need(monkeypatch):
    monkeypatch.setenv("OPFORGE_GRAPH_FUSION", "0")  # count the graph's own nodes (Exp(Tanh) would fuse)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [4])
        needed = of.exp(of.tanh(x))
        for _ in range(10):
            x = x * 2.0  # a branch the fetch does not need (x is rebound, the placeholder stays fed)
    feed = g.get_operations()[0].outputs[0]
    with of.Session(g) as sess:
        sess.run(needed, {feed: np.ones(4, np.float32)})
        assert sess.last_run_stats["nodes_run"] == 2


def test_intermediates_are_freed_after_their_last_reader():
    n = 1 << 18  # 1 MiB of float32
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [n])
        y = x
        for _ in range(30):
            y = y + 1.0
    with of.Session(g) as sess:
        out = sess.run(y, {x: np.zeros(n, np.float32)})
        peak = sess.last_run_stats["peak_bytes"]
    np.testing.assert_array_equal(out[:3], [30, 30, 30])
    assert peak <= 3 * 4 * n, peak  # a chain keeps about two alive, not thirty


def test_independent_nodes_run_concurrently_on_the_inter_op_pool():
    m = np.random.default_rng(1).random((160, 160), dtype=np.float32) / 160
    g = of.Graph()
    with g.as_default():
        outs = []
        for _ in range(4):
            y = of.constant(m)
            for _ in range(12):
                y = of.matmul(y, m)
            outs.append(y)
    with of.Session(g, inter_op_threads=1) as one:
        ref = one.run(outs)
        assert one.last_run_stats["max_concurrent"] == 1
    with of.Session(g, inter_op_threads=2) as two:
        # The OS may start the borrowed pool thread late on a loaded machine:
        # concurrency must show in one of a few runs.
        seen = []
        for _ in range(5):
            got = two.run(outs)
            seen.append(two.last_run_stats["max_concurrent"])
            if seen[-1] >= 2:
                break
        assert max(seen) == 2, seen
    for a, b in zip(ref, got):
        np.testing.assert_array_equal(a, b)


def test_kernel_error_names_the_node():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.int32, [3])
        y = of.pow(x, of.placeholder(of.int32, [3], name="e"))
    e = g.get_operations()[1].outputs[0]
    with of.Session(g) as sess, pytest.raises(errors.InvalidArgumentError, match="node 'Pow'.*negative"):
        sess.run(y, {x: np.array([1, 2, 3], np.int32), e: np.array([1, -1, 2], np.int32)})


def test_plan_cache_and_repeated_runs():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [2])
        y, z = x + 1.0, x * 2.0
    with of.Session(g) as sess:
        for i in range(5):
            v = np.full(2, i, np.float32)
            np.testing.assert_array_equal(sess.run(y, {x: v}), v + 1)
            np.testing.assert_array_equal(sess.run([z, y], {x: v})[0], v * 2)


def test_default_graph_is_per_thread_and_eager_outside():
    g = of.Graph()
    seen = {}
    with g.as_default():
        assert of.get_default_graph() is g

        def other():
            seen["eager"] = of.add(np.ones(2, np.float32), 1.0).numpy()
            seen["default"] = of.get_default_graph()

        t = threading.Thread(target=other)
        t.start()
        t.join()
    np.testing.assert_array_equal(seen["eager"], [2, 2])
    assert seen["default"] is not g
    assert isinstance(of.add(np.ones(2), 1.0), of.Tensor)  # eager again


def test_tensors_of_another_graph_are_refused():
    with of.Graph().as_default():
        x = of.placeholder(of.float32, [2])
    with of.Graph().as_default():
        with pytest.raises(errors.InvalidArgumentError, match="another graph"):
            of.neg(x)


def test_constants_copy_writable_arrays():
    a = np.ones(3, np.float32)
    g = of.Graph()
    with g.as_default():
        y = of.add(a, 1.0)
    a[:] = 100
    with of.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(y), [2, 2, 2])


def test_create_op_adds_named_nodes_without_a_wrapper():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [2, 2], name="in")
    y = g.create_op("MatMul", {"a": x, "b": np.eye(2, dtype=np.float32)}, {"transpose_a": True}, name="mm")
    z = g.create_op("Concat", {"values": [y, x]}, {"axis": 1})
    assert y.name == "mm:0" and z.shape == (2, 4) and y.op.get_attr("transpose_a") is True
    v = np.arange(4, dtype=np.float32).reshape(2, 2)
    with of.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(z, {x: v}), np.concatenate([v.T, v], axis=1))
