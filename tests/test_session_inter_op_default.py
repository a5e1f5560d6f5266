"""A Session's default inter-op choice (graph.h kAutoInterOp): a graph whose
nodes are mostly large runs in plan order (their kernels use the intra-op
threads; running two at once would oversubscribe the cores), one of small
nodes keeps running independent nodes at once; an explicit
inter_op_threads always wins. numpy computes every expected value."""

import time

import numpy as np
import pytest

import opforge as of


def _branches(n, depth, width=2):
    """`width` independent chains of matmuls over [n, n] constants, then their sum."""
    rng = np.random.default_rng(0)
    m = ((rng.random((n, n), dtype=np.float32) - 0.5) / np.sqrt(n)).astype(np.float32)
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [n, n])
        ys = [x * float(i + 1) for i in range(width)]
        for _ in range(depth):
            ys = [of.matmul(y, of.constant(m)) for y in ys]
        y = ys[0]
        for other in ys[1:]:
            y = y + other
    xv = rng.random((n, n), dtype=np.float32)
    want = sum(xv * np.float32(i + 1) for i in range(width))
    for _ in range(depth):
        want = want @ m
    return g, x, y, xv, want


def _concurrency(sess, y, feeds, tries=10, patience_s=10.0):
    # On a loaded machine (CI builds the sanitizer tree beside this pass) the
    # OS may not schedule a woken pool thread until the other branch is done,
    # so a count of runs is not enough: keep running until two nodes overlap
    # or several seconds have passed. A serial engine never shows 2.
    seen = []
    deadline = time.monotonic() + patience_s
    while len(seen) < tries or time.monotonic() < deadline:
        out = sess.run(y, feeds)
        seen.append(sess.last_run_stats["max_concurrent"])
        if seen[-1] >= 2:
            break
    return out, max(seen)


@pytest.mark.skipif(of.config.num_threads() < 2, reason="needs two intra-op threads")
def test_large_nodes_run_in_plan_order_by_default():
    g, x, y, xv, want = _branches(192, 3)  # [192, 192] float32 outputs: 144 KiB each
    with of.Session(g) as sess:
        assert sess.inter_op_threads >= 1
        for _ in range(3):
            np.testing.assert_allclose(sess.run(y, {x: xv}), want, rtol=1e-4, atol=1e-5)
            assert sess.last_run_stats["max_concurrent"] == 1
    # Asked for: the same graph's independent nodes at once.
    with of.Session(g, inter_op_threads=2) as two:
        out, most = _concurrency(two, y, {x: xv})
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
        assert most == 2


def test_small_nodes_keep_running_at_once_by_default():
    if of._pywrap_internal.inter_op_threads() < 2:
        pytest.skip("an inter-op pool of one thread")
    g, x, y, xv, want = _branches(120, 12, width=4)  # 56 KiB outputs
    with of.Session(g) as sess:
        out, most = _concurrency(sess, y, {x: xv})
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
        assert most == 2


def test_setting_inter_op_threads_turns_the_default_choice_off():
    g, x, y, xv, want = _branches(48, 8)
    with of.Session(g) as sess:
        sess.inter_op_threads = 1
        np.testing.assert_allclose(sess.run(y, {x: xv}), want, rtol=1e-4, atol=1e-5)
        assert sess.last_run_stats["max_concurrent"] == 1
        assert sess.inter_op_threads == 1
