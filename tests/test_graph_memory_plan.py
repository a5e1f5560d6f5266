"""Session.run's static memory plan: intermediates share reusable per-plan
buffers; nothing handed out, fed or constant is ever written by a later node
or a later run. numpy computes every expected value."""

import threading

import numpy as np
import pytest

import opforge as of
from opforge import errors


@pytest.fixture(autouse=True)
def _one_node_per_op(monkeypatch):
    # These chains exist to make buffers reused; graph fusion (graph_fusion.cc)
    # would run each as one node.
    monkeypatch.setenv("OPFORGE_GRAPH_FUSION", "0")


def _chain(x, n):
    # Long enough that every early value's buffer is reused by a later node.
    for i in range(n):
        x = x * 0.5 + float(i)
    return x


def _chain_np(x, n):
    for i in range(n):
        x = (x * np.float32(0.5) + np.float32(i)).astype(np.float32)
    return x


def test_fetched_intermediate_is_not_overwritten_by_later_nodes():
    x0 = np.arange(16, dtype=np.float32)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [16])
        mid = x + 1.0
        end = _chain(mid * 3.0, 20)
    with of.Session(g) as sess:
        got_mid, got_end = sess.run([mid, end], {x: x0})
        np.testing.assert_array_equal(got_mid, x0 + 1)
        np.testing.assert_allclose(got_end, _chain_np((x0 + 1) * 3, 20), rtol=1e-6)
        # And a later run (the same slots written again) leaves them alone.
        sess.run([mid, end], {x: x0 * 7})
        np.testing.assert_array_equal(got_mid, x0 + 1)
        np.testing.assert_allclose(got_end, _chain_np((x0 + 1) * 3, 20), rtol=1e-6)


def test_consecutive_runs_return_distinct_arrays():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [8])
        y = _chain(x, 10)
    with of.Session(g) as sess:
        a0, b0 = np.ones(8, np.float32), np.full(8, 3.0, np.float32)
        first = sess.run(y, {x: a0})
        second = sess.run(y, {x: b0})
        assert not np.shares_memory(first, second)
        np.testing.assert_allclose(first, _chain_np(a0, 10), rtol=1e-6)
        np.testing.assert_allclose(second, _chain_np(b0, 10), rtol=1e-6)


def test_feeds_and_constants_are_never_written():
    c_np = np.linspace(-1, 1, 32, dtype=np.float32)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [32])
        c = of.constant(c_np)
        # x and c are read for the last time by elementwise ops of their own
        # shape and dtype: the natural place for an in-place write.
        y = _chain(of.exp(x) * c, 6)
    feed = np.linspace(0, 2, 32, dtype=np.float32)
    feed_before, c_before = feed.copy(), c_np.copy()
    with of.Session(g) as sess:
        for _ in range(3):
            out = sess.run(y, {x: feed})
            np.testing.assert_array_equal(feed, feed_before)
            np.testing.assert_allclose(out, _chain_np(np.exp(feed_before) * c_before, 6), rtol=1e-5)
        np.testing.assert_array_equal(sess.run(c), c_before)


def test_feed_shape_change_replans_memory():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [None])
        y = _chain(of.tanh(x), 8)
    rng = np.random.default_rng(3)
    with of.Session(g) as sess:
        outs = []
        for n in (4, 4, 4096, 3, 4096, 0, 4):
            v = rng.random(n, dtype=np.float32)
            out = sess.run(y, {x: v})
            assert out.shape == (n,)
            np.testing.assert_allclose(out, _chain_np(np.tanh(v), 8), rtol=1e-5)
            outs.append((out, _chain_np(np.tanh(v), 8)))
        for out, want in outs:  # earlier results survive later plans
            np.testing.assert_allclose(out, want, rtol=1e-5)


@pytest.mark.parametrize("fetch_alias", [True, False])
@pytest.mark.parametrize("alias", ["identity", "reshape"])
def test_aliasing_kernels_keep_what_they_alias_alive(alias, fetch_alias):
    # b shares a's buffer (zero copy); a's last direct reader is early, but
    # b is read at the very end: a's buffer must not be reused before then.
    x0 = np.arange(12, dtype=np.float32)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [12])
        a = x * 2.0
        b = of.identity(a) if alias == "identity" else of.reshape(a, [3, 4])
        c = _chain(a + 1.0, 12)
        d = of.reshape(b, [12]) + c
    # One inter-op thread: a branches, so two threads would take the DAG path.
    with of.Session(g, inter_op_threads=1) as sess:
        for k in range(4):  # the first run finds the alias, the next ones plan for it
            want_d = (x0 + k) * 2 + _chain_np((x0 + k) * 2 + 1, 12)
            if fetch_alias:
                got_b, got_d = sess.run([b, d], {x: x0 + k})
                np.testing.assert_array_equal(got_b.reshape(12), (x0 + k) * 2)
            else:
                got_d = sess.run(d, {x: x0 + k})
            np.testing.assert_allclose(got_d, want_d, rtol=1e-5)
        if fetch_alias:
            first_b = sess.run(b, {x: x0})
            sess.run([b, d], {x: x0 + 100})
            np.testing.assert_array_equal(first_b.reshape(12), x0 * 2)  # a fetched alias is not reused


def test_fetched_alias_of_an_intermediate_survives_the_next_run():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [6])
        r = of.identity(of.sin(x))
        y = _chain(r, 5)
    with of.Session(g) as sess:
        x1 = np.linspace(0, 1, 6, dtype=np.float32)
        x2 = np.linspace(5, 9, 6, dtype=np.float32)
        r1, y1 = sess.run([r, y], {x: x1})
        r2, y2 = sess.run([r, y], {x: x2})
        r3, _ = sess.run([r, y], {x: x1})
        np.testing.assert_allclose(r1, np.sin(x1), rtol=1e-6)
        np.testing.assert_allclose(r2, np.sin(x2), rtol=1e-6)
        np.testing.assert_allclose(y1, _chain_np(np.sin(x1), 5), rtol=1e-5)
        np.testing.assert_allclose(y2, _chain_np(np.sin(x2), 5), rtol=1e-5)
        assert not np.shares_memory(r1, r3)


def test_large_and_small_values_mix():
    n = 1 << 18  # 1 MiB of float32: left to the allocator, the rest in the arena
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [n])
        s = of.placeholder(of.float32, [4])
        big = _chain(x, 3)
        small = _chain(s, 3)
        y = of.sum(big) + small
    xv = np.random.default_rng(0).random(n, dtype=np.float32)
    sv = np.arange(4, dtype=np.float32)
    with of.Session(g, inter_op_threads=1) as sess:
        for _ in range(2):
            out = sess.run(y, {x: xv, s: sv})
            np.testing.assert_allclose(out, _chain_np(xv, 3).sum() + _chain_np(sv, 3), rtol=1e-4)


def test_diamond_on_one_inter_op_thread_runs_in_order_on_the_plan():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [5])
        left = _chain(x, 4)
        right = of.exp(x) * 2.0
        y = left * right + left
    xv = np.linspace(-1, 1, 5, dtype=np.float32)
    left_np = _chain_np(xv, 4)
    want = left_np * (np.exp(xv) * 2) + left_np
    with of.Session(g, inter_op_threads=1) as one, of.Session(g, inter_op_threads=2) as two:
        for _ in range(2):
            np.testing.assert_allclose(one.run(y, {x: xv}), want, rtol=1e-5)
            np.testing.assert_allclose(two.run(y, {x: xv}), want, rtol=1e-5)
        assert one.last_run_stats["max_concurrent"] == 1


def test_a_kernel_error_then_a_good_run():
    g = of.Graph()
    with g.as_default():
        base = of.placeholder(of.int32, [3])
        e = of.placeholder(of.int32, [3])
        y = of.pow(base + 1, e) * 2
    with of.Session(g) as sess:
        with pytest.raises(errors.InvalidArgumentError, match="Pow"):
            sess.run(y, {base: np.array([1, 2, 3], np.int32), e: np.array([1, -1, 2], np.int32)})
        out = sess.run(y, {base: np.array([1, 2, 3], np.int32), e: np.array([1, 2, 3], np.int32)})
        np.testing.assert_array_equal(out, np.power(np.array([2, 3, 4]), [1, 2, 3]) * 2)


def test_threads_running_one_session_get_their_own_buffers():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [64])
        y = _chain(of.sqrt(x), 30)
    sess = of.Session(g)
    failures = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(40):
            v = rng.random(64, dtype=np.float32) + seed
            out = sess.run(y, {x: v})
            if not np.allclose(out, _chain_np(np.sqrt(v), 30), rtol=1e-5):
                failures.append(seed)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
