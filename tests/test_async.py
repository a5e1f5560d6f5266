"""Async mode: pending Tensors, dependency order, deferred kernel errors."""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import opforge as of
from opforge import errors


@pytest.fixture(autouse=True)
def _clean_queue():
    yield
    try:
        of.flush()
    except errors.OpError:
        pass


def test_issue_example():
    a = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    b = np.ones((64, 64), np.float32)
    with of.execution_mode("async"):
        z = of.add(a, b)
        w = of.matmul(z, z)
        assert w.shape == (64, 64) and w.dtype == of.float32  # known at once
        assert isinstance(of.queue_size(), int) and of.pending() >= 0
        text = str(w)
        of.flush()
    assert of.pending() == 0
    np.testing.assert_allclose(w.numpy(), (a + b) @ (a + b), rtol=1e-5)
    assert text == str((a + b) @ (a + b)) or "[" in text


def _program(rng, n_ops):
    """A random program over a pool of tensors: chained and independent ops."""
    pool = [rng.standard_normal((8, 8)).astype(np.float32) for _ in range(6)]
    steps = []
    for _ in range(n_ops):
        kind = rng.integers(0, 7)
        i, j = rng.integers(0, len(pool) + len(steps), size=2)
        steps.append((int(kind), int(i), int(j)))
    return pool, steps


def _run(pool, steps):
    vals = list(pool)
    for kind, i, j in steps:
        a, b = vals[i], vals[j]
        if kind == 0:
            v = of.add(a, b)
        elif kind == 1:
            v = of.mul(a, 0.5) - b
        elif kind == 2:
            v = of.tanh(a)
        elif kind == 3:
            v = of.matmul(a, b) * 0.125
        elif kind == 4:
            v = of.maximum(a, b)
        elif kind == 5:
            v = of.softmax(a)
        else:
            v = of.sum(a, axis=[1], keepdims=True) * 0.1 + b
        vals.append(v)
    return vals[len(pool):]


def test_random_program_of_1000_ops_equals_sync():
    pool, steps = _program(np.random.default_rng(42), 1000)
    want = [v.numpy() for v in _run(pool, steps)]
    with of.execution_mode("async"):
        got = _run(pool, steps)
        assert any(of._async.is_pending(t) for t in got) or of.pending() == 0
    for w, g in zip(want, got):
        np.testing.assert_array_equal(w, g.numpy())


def test_call_site_errors_stay_synchronous():
    with of.execution_mode("async"):
        with pytest.raises(errors.InvalidArgumentError, match="Add.*no common dtype"):
            of.add(np.ones(2, np.int64), np.ones(2, np.uint64))
        with pytest.raises(errors.InvalidArgumentError, match="MatMul"):
            of.matmul(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))
        assert of.pending() >= 0


def test_kernel_error_surfaces_on_read_naming_op_and_line():
    with of.execution_mode("async"):
        bad = of.pow(np.array([2, 3], np.int32), np.array([1, -1], np.int32))  # submitted here
        line = sys._getframe().f_lineno - 1
        later = of.add(bad, 1)
        fine = of.add(np.ones(2, np.float32), 1.0)
    with pytest.raises(errors.InvalidArgumentError) as e:
        bad.numpy()
    assert "Pow" in str(e.value) and f"test_async.py:{line}" in str(e.value)
    with pytest.raises(errors.InvalidArgumentError, match="failed op.*Pow"):
        print(later)
    np.testing.assert_array_equal(fine.numpy(), [2, 2])  # unrelated tensors are fine
    of.flush()  # already observed: not raised again


def test_unread_kernel_error_is_raised_by_flush_once():
    with of.execution_mode("async"):
        of.pow(np.array([2], np.int64), np.array([-3], np.int64))
        with pytest.raises(errors.InvalidArgumentError, match="Pow.*submitted at"):
            of.flush()
        of.flush()


def test_every_read_path_waits():
    x = np.arange(4, dtype=np.float64)
    with of.execution_mode("async"):
        t = of.add(x, 1.0)
        s = of.sum(t)
        assert float(s) == 10.0
        assert s.item() == 10.0 and bool(s)
        assert np.asarray(t).tolist() == [1, 2, 3, 4]
        assert memoryview(of.mul(t, 2.0)).tolist() == [2, 4, 6, 8]
        assert "opforge.Tensor" in repr(of.neg(t))


def test_writes_to_borrowed_arrays_after_submit_do_not_change_results():
    a = np.ones((256, 256), np.float32)
    with of.execution_mode("async"):
        results = []
        for i in range(20):
            results.append(of.mul(a, 2.0))
            a[:] = i + 100  # right after the call returned
    for r in results[:1]:
        np.testing.assert_array_equal(r.numpy(), np.full((256, 256), 2))
    for i, r in enumerate(results[1:]):
        np.testing.assert_array_equal(r.numpy(), np.full((256, 256), 2 * (i + 100)))


def test_dropping_queued_tensors_is_safe():
    big = np.ones((200, 200), np.float32)
    with of.execution_mode("async"):
        for _ in range(50):
            of.matmul(of.add(big, 1.0), big)  # result dropped at once
        keep = of.add(big, 2.0)
        of.flush()
    assert keep.numpy()[0, 0] == 3


def test_eight_threads_submitting_at_once():
    def worker(k, out):
        x = np.full((16, 16), k, np.float32)
        with of.execution_mode("async"):
            y = x
            for _ in range(100):
                y = of.add(of.mul(y, 0.5), 1.0)
            out[k] = y.numpy()
        want = np.full((16, 16), k, np.float32)
        for _ in range(100):
            want = want * np.float32(0.5) + np.float32(1.0)
        np.testing.assert_array_equal(out[k], want)

    out = {}
    threads = [threading.Thread(target=worker, args=(k, out)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 8


def test_gil_is_released_while_waiting():
    m = np.random.default_rng(0).random((400, 400), dtype=np.float32)
    ticks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0)

    with of.execution_mode("async"):
        y = m
        for _ in range(40):
            y = of.matmul(y, m) * 0.001
        t = threading.Thread(target=spin)
        t.start()
        time.sleep(0.01)
        before = len(ticks)
        y.numpy()  # waits here
        during = len(ticks) - before
        stop.set()
        t.join()
    assert during > 0


def test_sync_mode_and_the_env_override(monkeypatch):
    with of.execution_mode("async"):
        with of.execution_mode("sync"):
            assert not of._async.is_pending(of.add(np.ones(2), 1.0))
        monkeypatch.setenv("OPFORGE_EXECUTION", "sync")
        assert not of._async.is_pending(of.add(np.ones(2), 1.0))
    of.set_execution_mode("async")
    try:
        monkeypatch.delenv("OPFORGE_EXECUTION")
        t = of.matmul(np.ones((300, 300), np.float32), np.ones((300, 300), np.float32))
        assert t.shape == (300, 300)
    finally:
        of.set_execution_mode("sync")
    assert not of._async.is_pending(of.add(np.ones(2), 1.0))
    with pytest.raises(ValueError):
        of.execution_mode("later").__enter__()


def test_interpreter_exit_with_queued_work():
    code = ("import numpy as np, opforge as of\n"
            "of.set_execution_mode('async')\n"
            "m = np.ones((300, 300), np.float32)\n"
            "y = m\n"
            "for _ in range(60): y = of.matmul(y, m) * 0.001\n"
            "bad = of.pow(np.array([2]), np.array([-1]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr


def test_forked_child_runs_queued_and_graph_work_inline():
    code = ("import os, numpy as np, opforge as of\n"
            "with of.execution_mode('async'):\n"
            "    of.add(np.ones(2), 1.0).numpy()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    with of.execution_mode('async'):\n"
            "        v = of.add(of.add(np.ones(2), 1.0), 1.0).numpy().tolist()\n"
            "    g = of.Graph()\n"
            "    with g.as_default():\n"
            "        x = of.placeholder(of.float64, [2])\n"
            "        y = [x + 1.0, x * 2.0]\n"
            "    w = of.Session(g).run(y, {x: np.ones(2)})\n"
            "    os._exit(0 if v == [3, 3] and w[1].tolist() == [2, 2] else 3)\n"
            "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "0", r.stdout + r.stderr
