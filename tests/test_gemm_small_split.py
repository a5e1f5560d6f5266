"""The small-product split (cpp/kernels/gemm/small_split.h): float32
products of a few microseconds run over the caller and one pool worker, each
tile claimed by whoever gets to it first. Whichever thread runs a tile, each
element is the same dot product, so results must be bitwise those of the
one-thread path, and within float32 tolerance of numpy in float64. The test
hook forces both halves of the protocol: "shares" (the worker runs its own
tiles) and "caller" (the caller runs the worker's tiles: the steal path).
The module reruns itself with OPFORGE_SIMD capped (AVX2 and generic tiles)."""
import ctypes
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import opforge as of
from opforge import _pywrap_internal

gen = of.ops.gen_linalg_ops
_lib = ctypes.CDLL(_pywrap_internal.__file__)
_set_mode = _lib._ZN7opforge4gemm17SetSmallSplitModeEi
_set_mode.restype, _set_mode.argtypes = ctypes.c_int, [ctypes.c_int]
_count = _lib._ZN7opforge4gemm15SmallSplitCountEi
_count.restype, _count.argtypes = ctypes.c_int64, [ctypes.c_int]
OFF, AUTO, SHARES, CALLER = 0, 1, 2, 3

two_threads = pytest.mark.skipif(of.config.num_threads() < 2, reason="needs two intra-op threads")


def counts():
    return [_count(i) for i in range(5)]  # splits, worker tiles, stolen, unpaid, sessions


class mode:
    def __init__(self, m):
        self.m = m

    def __enter__(self):
        self.before = _set_mode(self.m)

    def __exit__(self, *exc):
        _set_mode(self.before)


def close(got, want, k):
    eps = np.finfo(np.float32).eps
    np.testing.assert_allclose(np.asarray(got), want, rtol=20 * eps * k ** 0.5 + 1e-6, atol=20 * eps * k)


# (m, k, n, splits): around each threshold in sgemm.cc: 64 x 64 x 48 multiply-adds
# (kMinSplitFma), 128^3 (kMinParallelFma: larger ones take the threaded
# path), 8 rows (B-bound, never split), one or two column panels, the small-M
# path (M <= 64, or M <= 128 with K <= 256) and packed A (M > 128).
SHAPES = [(48, 64, 64, True), (47, 64, 64, False), (64, 64, 64, True), (9, 256, 96, True), (8, 200, 96, False),
          (64, 100, 33, True), (65, 64, 64, True), (127, 128, 128, True), (128, 128, 128, False),
          (100, 70, 30, True), (13, 900, 40, True), (128, 40, 128, True), (200, 300, 30, True), (40, 300, 17, True)]


def operands(rng, m, k, n, ta, tb):
    a = rng.uniform(-1, 1, (k, m) if ta else (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
    want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    return a, b, want


@two_threads
@pytest.mark.parametrize("forced", [SHARES, CALLER])
def test_both_halves_match_one_thread_bitwise(forced):
    rng = np.random.default_rng(forced)
    for m, k, n, splits in SHAPES:
        for ta, tb in ((False, False), (True, True), (False, True)):
            a, b, want = operands(rng, m, k, n, ta, tb)
            with mode(OFF):
                alone = of.matmul(a, b, transpose_a=ta, transpose_b=tb).numpy()
            before = counts()
            with mode(forced):
                got = of.matmul(a, b, transpose_a=ta, transpose_b=tb).numpy()
            after = counts()
            close(got, want, k)
            np.testing.assert_array_equal(got, alone)
            assert after[0] - before[0] == int(splits), (m, k, n, before, after)
            if splits and forced == SHARES:  # the worker ran its share, the caller none of it
                assert after[1] > before[1] and after[2] == before[2], (m, k, n, before, after)
            if splits and forced == CALLER:  # the caller ran every tile
                assert after[1] == before[1] and after[2] > before[2], (m, k, n, before, after)


@two_threads
@pytest.mark.parametrize("forced", [SHARES, CALLER])
@pytest.mark.parametrize("act", ["none", "relu", "silu", "gelu"])
def test_fused_epilogue_per_tile(forced, act):
    # The bias is per column and the activation per element: each tile must
    # apply them at its own offsets.
    rng = np.random.default_rng(3)
    for m, k, n in ((64, 64, 64), (50, 70, 90), (200, 300, 30)):
        a, b, _ = operands(rng, m, k, n, False, True)
        bias = rng.uniform(-1, 1, n).astype(np.float32)
        with mode(OFF):
            alone = gen.fused_mat_mul(a, b, bias, transpose_b=True, activation=act).numpy()
        with mode(forced):
            got = gen.fused_mat_mul(a, b, bias, transpose_b=True, activation=act).numpy()
        np.testing.assert_array_equal(got, alone)


@two_threads
def test_loop_in_auto_mode_splits_and_stays_bitwise_stable():
    # A loop of 64^3 products (the default mode): correct on every call,
    # whether a call split or not.
    rng = np.random.default_rng(5)
    a, b, want = operands(rng, 64, 64, 64, False, False)
    with mode(AUTO):
        runs = [of.matmul(a, b).numpy() for _ in range(300)]
    close(runs[0], want, 64)
    for r in runs[1:]:
        np.testing.assert_array_equal(r, runs[0])


@two_threads
def test_threads_sharing_the_slot():
    # Two Python threads in small products at once: one owns the job slot,
    # the other runs alone meanwhile; nobody waits forever, all correct.
    rng = np.random.default_rng(9)
    cases = [operands(rng, m, k, n, False, False) for m, k, n in ((64, 64, 64), (96, 80, 72))]
    errors = []

    def work(case):
        a, b, want = case
        try:
            for _ in range(150):
                close(of.matmul(a, b).numpy(), want, a.shape[1])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    for forced in (SHARES, AUTO):
        with mode(forced):
            threads = [threading.Thread(target=work, args=(c,)) for c in cases]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not any(t.is_alive() for t in threads)
    assert not errors, errors


@two_threads
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_runs_alone():
    # A child forked while a session may be live has no pool workers: its
    # small products run on its one thread, even when splits are forced.
    rng = np.random.default_rng(11)
    a, b, want = operands(rng, 64, 64, 64, False, False)
    with mode(SHARES):
        for _ in range(20):
            of.matmul(a, b)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            ok = False
            try:
                got = of.matmul(a, b).numpy()
                ok = np.allclose(got, want, rtol=1e-4, atol=1e-4)
            finally:
                os._exit(0 if ok else 3)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("forked child hung in a small product")
        time.sleep(0.01)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


@pytest.mark.skipif(os.environ.get("OPFORGE_SIMD") is not None, reason="already a rerun")
@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_every_microkernel(isa):
    # The module again with the dispatch capped: other tile shapes (AVX2 6 x
    # 16, generic 4 x 16), so other tile splits.
    env = dict(os.environ, OPFORGE_SIMD=isa)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", __file__],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
