"""A threaded GEMM's first call after a pause (cpp/kernels/gemm/sgemm.cc, claims.h) and the cached
output blocks from 128 KiB (cpp/framework/allocator.cc), against numpy in float64.

The threads pack A once for every tile (SharedPhase: units of 4 panels handed out from one counter)
in the same fork-join as the tiles: a worker that starts late, or not at all, must find A packed
whatever share of it the caller took. Shapes: more than one kc = 256 depth block, panel counts not a
multiple of 4, a partial last panel; after a pause (workers parked), back to back, from several
Python threads at once (the pool busy: products run inline), and in a child at three threads.
"""
import threading
import time

import numpy as np
import pytest

import opforge as of

from child_threads import run_at_threads

gen = of.ops.gen_linalg_ops

# (m, k, n, transpose_a, transpose_b): m > 64 and tiles in several columns, so A is packed once.
SHAPES = [(97, 257, 300, False, False), (130, 600, 777, True, False), (256, 256, 256, False, True),
          (301, 1000, 260, True, True), (1024, 33, 512, False, False)]


def oracle(a, b, ta, tb):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64.T if ta else a64) @ (b64.T if tb else b64)


def check(m, k, n, ta, tb, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (k, m) if ta else (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
    got = gen.mat_mul(a, b, transpose_a=ta, transpose_b=tb).numpy()
    eps = np.finfo(np.float32).eps
    np.testing.assert_allclose(got, oracle(a, b, ta, tb), rtol=20 * eps * k ** 0.5 + 1e-6, atol=20 * eps * k)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:3])))
def test_prepacked_a_after_a_pause_and_back_to_back(shape):
    for i in range(3):
        time.sleep(0.25 if i == 0 else 0.0)  # the pool's workers park after 200 us
        check(*shape, seed=i)


def test_prepacked_a_from_several_python_threads():
    # Callers beyond the first find the pool taken and run their products inline.
    errors = []

    def work(t):
        try:
            for i, shape in enumerate(SHAPES):
                check(*shape, seed=10 * t + i)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_prepacked_a_at_three_threads():
    run_at_threads("test_gemm_cold", "for i, s in enumerate(t.SHAPES): t.check(*s, seed=i)\n")


# Output sizes on both sides of 128 KiB (heap below, cached page-granular maps above) and of 1 MiB
# (cached huge-page maps): in float32 elements.
SIZES = [32 * 1024 - 16, 32 * 1024, 32 * 1024 + 1, 64 * 1024, 100_000, 256 * 1024 - 1, 256 * 1024,
         256 * 1024 + 7, 700_000]


def test_cached_output_blocks_are_aligned_and_never_shared():
    # Tensors of each size are made, some freed and made again (the cache hands a freed block to a
    # request of up to twice less), while the others stay alive: each keeps its own values.
    rng = np.random.default_rng(0)
    live = []
    for rnd in range(4):
        for size in rng.permutation(SIZES):
            x = np.full(int(size), float(rnd * 100 + len(live)), np.float32)
            t = of.add(x, np.float32(1))
            arr = t.numpy()
            assert arr.ctypes.data % 64 == 0
            live.append((t, float(x[0]) + 1))
        # free every other one: their blocks go to the cache and back out in the next round
        live = [item for i, item in enumerate(live) if i % 2 == 0]
        for t, want in live:
            a = t.numpy()
            assert a[0] == want and a[-1] == want and a[a.size // 2] == want


@pytest.mark.parametrize("n", [181, 256, 300, 512])
def test_matmul_outputs_reused_across_calls(n):
    # Outputs of 128 KiB..1 MiB come back from the cache: a result held while the next is computed
    # is not overwritten, and each result is right.
    rng = np.random.default_rng(n)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    want = oracle(a, b, False, False)
    held = [(of.matmul(a, b), 1)]
    for i in range(2, 6):
        r = of.matmul(a * i, b)
        np.testing.assert_allclose(r.numpy(), want * i, rtol=1e-4, atol=1e-3 * i)
        if i % 2:
            held.append((r, i))
    for r, f in held:
        np.testing.assert_allclose(r.numpy(), want * f, rtol=1e-4, atol=1e-3 * f)
