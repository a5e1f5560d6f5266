"""opforge's own float32 GEMM (cpp/kernels/gemm/) behind MatMul and MatMulGrad,
against numpy in float64 as the oracle: random shapes (every dim 1..300),
transposes, batch broadcasting, non-contiguous inputs, float32 and float64;
every microkernel (the module reruns itself with OPFORGE_SIMD capped); the
Pow fast paths against numpy.power."""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import opforge as of

gen = of.ops.gen_linalg_ops
DIM = st.integers(1, 300)


def oracle(a, b, ta, tb):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if ta:
        a64 = np.swapaxes(a64, -1, -2)
    if tb:
        b64 = np.swapaxes(b64, -1, -2)
    return np.matmul(a64, b64)


def close(got, want, k, dtype):
    eps = np.finfo(dtype).eps
    got = np.asarray(got)
    assert got.dtype == dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=20 * eps * k ** 0.5 + 1e-6, atol=20 * eps * k)


@settings(max_examples=60, deadline=None)
@given(m=DIM, k=DIM, n=DIM, ta=st.booleans(), tb=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2 ** 16))
def test_matmul_random_shapes(m, k, n, ta, tb, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (k, m) if ta else (m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(dtype)
    close(gen.mat_mul(a, b, transpose_a=ta, transpose_b=tb).numpy(), oracle(a, b, ta, tb), k, dtype)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.float64]))
def test_matmul_batch_broadcasting(data, dtype):
    m, k, n = data.draw(st.integers(1, 80)), data.draw(st.integers(1, 120)), data.draw(st.integers(1, 80))
    ba = data.draw(st.lists(st.integers(1, 3), max_size=2))
    bb = [data.draw(st.sampled_from([1, d])) for d in ba]
    if data.draw(st.booleans()):
        ba, bb = bb, ba
    ta, tb = data.draw(st.booleans()), data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    a = rng.uniform(-1, 1, (*ba, *((k, m) if ta else (m, k)))).astype(dtype)
    b = rng.uniform(-1, 1, (*bb, *((n, k) if tb else (k, n)))).astype(dtype)
    close(gen.mat_mul(a, b, transpose_a=ta, transpose_b=tb).numpy(), oracle(a, b, ta, tb), k, dtype)


@settings(max_examples=30, deadline=None)
@given(m=DIM, k=DIM, n=DIM, dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2 ** 16))
def test_matmul_non_contiguous(m, k, n, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, 2 * k)).astype(dtype)[:, ::2]     # strided rows
    b = np.asfortranarray(rng.uniform(-1, 1, (k, n)).astype(dtype))  # column-major
    assert (m == 1 and k == 1) or not a.flags.c_contiguous
    close(of.matmul(a, b).numpy(), oracle(a, b, False, False), k, dtype)


@pytest.mark.parametrize("m,k,n", [(1, 768, 3072), (16, 3072, 768), (128, 768, 768), (300, 1, 300),
                                   (1, 1, 1), (257, 513, 129), (700, 300, 1), (1, 300, 700)])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_model_shapes(m, k, n, tb):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n), dtype=np.float32)
    close(gen.mat_mul(a, b, transpose_b=tb).numpy(), oracle(a, b, False, tb), k, np.float32)


@settings(max_examples=12, deadline=None)
@given(m=st.integers(65, 260), k=st.sampled_from([200, 257, 600]), n=st.sampled_from([300, 777, 2200]),
       ta=st.booleans(), tb=st.booleans(), act=st.sampled_from(["none", "relu", "gelu"]),
       seed=st.integers(0, 2 ** 16))
@example(m=250, k=600, n=2200, ta=False, tb=True, act="relu", seed=0)  # two A blocks, packed once
@example(m=4, k=784, n=256, ta=False, tb=True, act="relu", seed=0)  # a few rows: threaded as a GEMV is
@example(m=8, k=257, n=777, ta=True, tb=False, act="gelu", seed=0)
@example(m=130, k=600, n=777, ta=True, tb=False, act="gelu", seed=1)
def test_threaded_split_shapes(m, k, n, ta, tb, act, seed):
    # Products big enough for the intra-op threads: one row of tiles (all of
    # A packed once by the threads, K in one or several depth blocks) and the
    # fused epilogue on the tiles' last depth block; every transpose.
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (k, m) if ta else (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
    want = oracle(a, b, ta, tb)
    close(gen.mat_mul(a, b, transpose_a=ta, transpose_b=tb).numpy(), want, k, np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    got = gen.fused_mat_mul(a, b, bias, transpose_a=ta, transpose_b=tb, activation=act).numpy()
    close(got, ACTS[act](want + bias), k, np.float32)


@settings(max_examples=12, deadline=None)
@given(k=st.integers(100, 1200), n=st.integers(130, 2000), tb=st.booleans(), row=st.booleans(),
       act=st.sampled_from(["none", "relu", "silu"]), seed=st.integers(0, 2 ** 16))
@example(k=768, n=768, tb=False, row=True, act="relu", seed=0)  # depth split over the threads
@example(k=3072, n=768, tb=True, row=True, act="none", seed=0)
def test_gemv_threaded_layouts(k, n, tb, row, act, seed):
    # M = 1 big enough for the threads: W [K, N] splits the depth (partial
    # rows summed), W [N, K] the columns (row dot products); `row` False is
    # the matrix-vector form W^T-free N = 1 (C's column, transposed to M = 1).
    rng = np.random.default_rng(seed)
    w = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
    x = rng.uniform(-1, 1, (1, k)).astype(np.float32)
    if row:
        want = oracle(x, w, False, tb)
        close(gen.mat_mul(x, w, transpose_b=tb).numpy(), want, k, np.float32)
        bias = rng.uniform(-1, 1, n).astype(np.float32)
        got = gen.fused_mat_mul(x, w, bias, transpose_b=tb, activation=act).numpy()
        close(got, ACTS[act](want + bias), k, np.float32)
    else:  # [N, K] @ [K, 1] (or W^T @ x when W is [K, N])
        xt = np.ascontiguousarray(x.T)
        close(gen.mat_mul(w, xt, transpose_a=not tb).numpy(), oracle(w, xt, not tb, False), k, np.float32)


@pytest.mark.parametrize("m", [9, 12, 13, 17, 64])
@pytest.mark.parametrize("n", [512, 513])
@pytest.mark.parametrize("tb", [False, True])
def test_small_m_tile_heights(m, n, tb):
    # Small M reads A in place in tiles of at most 8 rows while B (K x N) is
    # at most 2^17 floats (n = 512 at K = 256), else up to the ISA's mr
    # (n = 513): rows split into 5 + 4, 6 + 6, 7 + 6, 6 + 6 + 5, 8 x 8 or
    # 12-row tiles and their edges, B in place and packed (tb).
    rng = np.random.default_rng(m * n)
    a = rng.uniform(-1, 1, (m, 256)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, 256) if tb else (256, n)).astype(np.float32)
    close(gen.mat_mul(a, b, transpose_b=tb).numpy(), oracle(a, b, False, tb), 256, np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    got = gen.fused_mat_mul(a, b, bias, transpose_b=tb, activation="relu").numpy()
    close(got, np.maximum(oracle(a, b, False, tb) + bias, 0), 256, np.float32)


@pytest.mark.parametrize("m,k,n", [(131, 17, 70), (200, 513, 64), (65, 300, 300), (131, 15, 2000),
                                   (1030, 257, 1024), (520, 300, 2100), (2050, 40, 200)])
@pytest.mark.parametrize("wide", [False, True])
def test_packed_a_rows_and_tile_grids(m, k, n, wide):
    # Row-major A packed by 16 x 16 in-register transposes (AVX-512): last
    # panels of 11 and 8 rows (131, 200), depths with a 1, 15 or 3-float
    # tail, rows further apart than k (`wide`: a column slice of a wider A),
    # serial and threaded; the larger ones cut into one or two tiles per
    # thread (by columns when B is large, 512 x 512-ish for 1030 x 1024).
    rng = np.random.default_rng(m + k + n)
    a = rng.uniform(-1, 1, (m, k + 37 if wide else k)).astype(np.float32)[:, :k]
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    close(gen.mat_mul(a, b).numpy(), oracle(a, b, False, False), k, np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    got = gen.fused_mat_mul(a, b, bias, activation="relu").numpy()
    close(got, np.maximum(oracle(a, b, False, False) + bias, 0), k, np.float32)


@pytest.mark.parametrize("k", [1025, 3071, 4096, 4097])
@pytest.mark.parametrize("n", [13, 771])
def test_gemv_transposed_weight_long_rows(k, n):
    # W [N, K] at M = 1: rows up to 16 KiB (K <= 4096) are read eight at a
    # time, longer ones four; n = 8 + 4 + 1 and 771 reach the 8-, 4- and
    # 1-row tails, k the vector tail (3071, 4097) and the switch (4096/4097).
    rng = np.random.default_rng(k + n)
    w = rng.uniform(-1, 1, (n, k)).astype(np.float32)
    x = rng.uniform(-1, 1, (1, k)).astype(np.float32)
    close(gen.mat_mul(x, w, transpose_b=True).numpy(), oracle(x, w, False, True), k, np.float32)


@pytest.mark.parametrize("n", [5, 16, 1000, 3000])
def test_gemv_transposed_weight_alternating_direction_is_bitwise_stable(n):
    # W [N, K] at M = 1 is read forwards and backwards on alternate calls
    # (per thread): each output is one dot product in one order either way.
    rng = np.random.default_rng(n)
    w = rng.uniform(-1, 1, (n, 768)).astype(np.float32)
    x = rng.uniform(-1, 1, (1, 768)).astype(np.float32)
    runs = [gen.mat_mul(x, w, transpose_b=True).numpy() for _ in range(4)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r, runs[0])
    close(runs[0], oracle(x, w, False, True), 768, np.float32)


@pytest.mark.parametrize("k,n", [(768, 3072), (768, 3001), (1024, 2500), (512, 2000), (700, 1100)])
def test_gemv_row_major_weight_alternating_columns_is_bitwise_stable(k, n):
    # W [K, N] at M = 1 on two threads splits the depth; a thread's share a
    # little larger than its core's L2 (4.7 MB at 768 x 3072 against 2 MiB;
    # 2 MB at 512 x 2000 against 1 MiB) is read in 512-column blocks,
    # forwards and backwards on alternate calls: each output keeps one sum
    # order (n = 3001: a partial vector in the last block; 1100: 3 blocks).
    rng = np.random.default_rng(k * n)
    w = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    x = rng.uniform(-1, 1, (1, k)).astype(np.float32)
    runs = [gen.mat_mul(x, w).numpy() for _ in range(4)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r, runs[0])
    close(runs[0], oracle(x, w, False, False), k, np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    got = gen.fused_mat_mul(x, w, bias, activation="relu").numpy()
    close(got, np.maximum(oracle(x, w, False, False) + bias, 0), k, np.float32)


def test_matmul_folded_batch_and_gradient():
    # [B, M, K] @ [K, N] runs as one [B*M, K] product; the gradient through
    # MatMulGrad checks both products of the backward pass.
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 70, 90), dtype=np.float32)
    b = rng.standard_normal((90, 50), dtype=np.float32)
    g = rng.standard_normal((3, 70, 50), dtype=np.float32)
    close(of.matmul(a, b).numpy(), oracle(a, b, False, False), 90, np.float32)
    ga, gb = of.raw_ops.mat_mul_grad(a, b, g)
    close(ga.numpy(), np.matmul(g.astype(np.float64), b.T.astype(np.float64)), 50, np.float32)
    close(gb.numpy(), np.einsum("bmk,bmn->kn", a.astype(np.float64), g.astype(np.float64)), 210, np.float32)


def test_matmul_nan_and_inf_propagate():
    a = np.ones((20, 30), np.float32)
    b = np.ones((30, 40), np.float32)
    a[3, 4] = np.nan
    b[5, 6] = np.inf
    got = of.matmul(a, b).numpy()
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got, a @ b)


# ---- Pow with a constant exponent: multiplies / sqrt instead of pow ----------

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -3.25, 1e-30, 1e30, np.inf, -np.inf, np.nan, 7.0], np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("c", [2, 3, 0.5, -1, -0.5, 0, 1, -2, -3, 4, 5, 7, 16, -9, 2.5, 17])
def test_pow_constant_exponents(dtype, c):
    rng = np.random.default_rng(2)
    x = np.concatenate([SPECIAL, rng.uniform(-3, 3, 1000), rng.uniform(0, 3, 1000)]).astype(dtype)
    with np.errstate(all="ignore"):
        want = np.power(x, dtype(c))
        for y in (dtype(c), np.array([[c]], dtype)):
            got = of.pow(x, y).numpy()
            assert got.shape == np.broadcast_shapes(x.shape, np.shape(y))
            np.testing.assert_allclose(got.reshape(-1), want, rtol=4 * abs(c) * np.finfo(dtype).eps + 1e-6,
                                       atol=0, equal_nan=True)
    zero = x == 0
    np.testing.assert_array_equal(np.signbit(of.pow(x, dtype(c)).numpy()[zero]), np.signbit(want[zero]))


@pytest.mark.skipif(os.environ.get("OPFORGE_SGEMM") == "own" or os.environ.get("OPFORGE_SIMD") is not None,
                    reason="already a rerun, or the dispatch is capped")
@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_every_microkernel(isa):
    # Reruns this module with the dispatch capped (generic and AVX2
    # microkernels; OPFORGE_SGEMM=own marks the rerun); on a CPU without the
    # set it falls back to a narrower one.
    env = dict(os.environ, OPFORGE_SGEMM="own")
    if isa != "native":
        env["OPFORGE_SIMD"] = isa
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", __file__],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


# ---- FusedMatMul (the GEMM epilogue) against the unfused ops ----------------

ACTS = {"none": lambda z: z, "relu": lambda z: np.maximum(z, 0), "sigmoid": lambda z: 1 / (1 + np.exp(-z)),
        "silu": lambda z: z / (1 + np.exp(-z)),
        "gelu": lambda z: 0.5 * z * (1 + np.vectorize(__import__("math").erf)(z / np.sqrt(2)))}


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("m,k,n,ta,tb", [(1, 300, 77, False, True), (16, 64, 300, False, False),
                                         (130, 33, 65, True, False), (200, 129, 40, True, True), (5, 1, 1, False, False)])
def test_fused_matmul_against_unfused(act, m, k, n, ta, tb):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((k, m) if ta else (m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32)
    got = gen.fused_mat_mul(a, b, bias, transpose_a=ta, transpose_b=tb, activation=act).numpy()
    unfused = of.add(of.matmul(a.T if ta else a, b.T if tb else b), bias)
    unfused = {"none": lambda z: z, "relu": of.relu, "sigmoid": of.sigmoid, "gelu": of.gelu,
               "silu": lambda z: of.mul(z, of.sigmoid(z))}[act](unfused).numpy()
    np.testing.assert_allclose(got, unfused, rtol=1e-5, atol=1e-5)
    close(got, ACTS[act](oracle(a, b, ta, tb) + bias), k, np.float32)


_EPI_SCRIPT = """
import sys, numpy as np, opforge as of
rng = np.random.default_rng(5)
out = {}
for m, k, n in ((16, 64, 300), (130, 33, 65), (200, 129, 40), (300, 600, 70)):
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32)
    for act in ("none", "relu", "gelu", "silu", "sigmoid"):
        out[f"{m}_{k}_{n}_{act}"] = of.ops.gen_linalg_ops.fused_mat_mul(a, b, bias, activation=act).numpy()
np.savez(sys.argv[1], **out)
"""


@pytest.mark.skipif(os.environ.get("OPFORGE_SIMD") is not None,
                    reason="a rerun: the fused tests check this ISA against the unfused ops")
def test_fused_epilogue_in_registers_matches_second_pass(tmp_path):
    # The microkernels apply bias and activation to their accumulators
    # (AVX-512, AVX2); OPFORGE_GEMM_EPILOGUE=pass applies them in a second pass
    # over each stored tile: the same steps in the same order, so the two
    # agree to the last bits (small-M, packed, edge tiles, several depth blocks).
    files = {}
    for mode in ("", "pass"):
        files[mode] = tmp_path / f"epi{mode}.npz"
        # No hand-off to numpy's BLAS: its workers spin for a while after
        # they start at import, and a handed-off product is OpenBLAS's, not
        # our microkernels' (it failed about one run in three).
        env = dict(os.environ, OPFORGE_GEMM_EPILOGUE=mode, OPFORGE_GEMM_HANDOFF="0")
        subprocess.run([sys.executable, "-c", _EPI_SCRIPT, str(files[mode])], env=env, check=True, timeout=300)
    regs, second = np.load(files[""]), np.load(files["pass"])
    for key in regs.files:
        np.testing.assert_allclose(regs[key], second[key], rtol=2e-7, atol=1e-6, err_msg=key)


_BLOCKING_SCRIPT = """
import sys, numpy as np, opforge as of
rng = np.random.default_rng(7)
for m, k, n, tb in [(300, 200, 333, False), (131, 150, 600, True), (520, 70, 1030, False), (90, 300, 70, True)]:
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    got = of.ops.gen_linalg_ops.fused_mat_mul(a, b, bias, transpose_b=tb, activation="relu").numpy()
    want = np.maximum(a.astype(np.float64) @ (b.T if tb else b).astype(np.float64) + bias, 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=20 * np.finfo(np.float32).eps * k)
    assert not np.array_equal(got, 0)
print("ok")
"""


@pytest.mark.parametrize("blocking", ["16,1,64,1", "48,3,96,2", "256,16,3072,4", "256,16,3072,1"])
def test_gemm_blocking_override(blocking):
    # OPFORGE_GEMM_BLOCKING sets kc, panels of A, nc and tiles per thread
    # (blocking.cc chooses them per CPU from its L2): depth blocks of 16 and
    # 48 (A prepacked per block), B blocks narrower than a tile, and both
    # CPUs' tile grids (Zen 5: four per thread; a 2 MiB L2: one or two) on
    # whichever CPU runs the tests. No hand-off: the product must be ours.
    env = dict(os.environ, OPFORGE_GEMM_BLOCKING=blocking, OPFORGE_GEMM_HANDOFF="0")
    proc = subprocess.run([sys.executable, "-c", _BLOCKING_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_fused_relu_keeps_nan():
    # max(0, NaN) is NaN, as numpy's maximum: the in-register ReLU too.
    x = np.ones((20, 8), np.float32)
    x[3, 2] = np.nan
    w = np.ones((8, 40), np.float32)
    got = gen.fused_mat_mul(x, w, np.zeros(40, np.float32), activation="relu").numpy()
    assert np.isnan(got[3]).all() and not np.isnan(np.delete(got, 3, axis=0)).any()


def test_fused_matmul_batched_rows_and_errors():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 20), dtype=np.float32)
    w = rng.standard_normal((20, 7), dtype=np.float32)
    bias = rng.standard_normal(7, dtype=np.float32)
    got = gen.fused_mat_mul(x, w, bias, activation="relu").numpy()
    assert got.shape == (2, 3, 7)
    close(got, np.maximum(oracle(x, w, False, False) + bias, 0), 20, np.float32)
    with pytest.raises(of.errors.InvalidArgumentError, match="bias"):
        gen.fused_mat_mul(x, w, np.zeros(6, np.float32))
    with pytest.raises(of.errors.InvalidArgumentError, match="activation"):
        gen.fused_mat_mul(x, w, bias, activation="tanh")


def test_linear_is_fused_with_and_without_gradients():
    layer = of.nn.Linear(30, 10, seed=0)
    x = np.random.default_rng(5).standard_normal((4, 30)).astype(np.float32)
    w, b = layer._weights["weight"].numpy(), layer._weights["bias"].numpy()
    with of.no_grad():
        inference = layer(x).numpy()
    trained = layer(x)
    np.testing.assert_allclose(inference, x @ w.T + b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(trained.numpy(), inference, rtol=1e-6, atol=1e-6)


def test_onnx_gemm_relu_chain_runs_fused():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import functools

    import opforge.onnx
    from bench.onnx_mlp import build_model
    model, _ = build_model(np.random.default_rng(6), sizes=(50, 40, 30, 10), batch=3)
    prog = opforge.onnx.load(model)
    fused = [fn for _, fn, _ in prog.steps if isinstance(fn, functools.partial)]
    assert [f.keywords["activation"] for f in fused] == ["relu", "relu"]
    x = np.random.default_rng(7).standard_normal((3, 50)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(prog.run({"x": x})[0], want, rtol=1e-5, atol=1e-6)
    imported = opforge.onnx.import_model(model)
    got = of.Session(imported.graph).run([imported.outputs["y"]], {imported.inputs["x"]: x})[0]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    assert onnx is not None


def test_bench_gemm_table_quick_mode():
    # The bench harness runs end to end (it checks every product against numpy).
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-m", "bench.gemm_table", "--quick"], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "measured FMA peak" in proc.stdout and "square 64" in proc.stdout


# ---- FusedMatMul's gradient against the unfused ops' and finite differences --

UNFUSED = {"none": lambda z: z, "relu": of.relu, "sigmoid": of.sigmoid, "gelu": of.gelu,
           "silu": lambda z: of.mul(z, of.sigmoid(z))}


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("ashape,ta,tb", [((3, 5, 7), False, True), ((7, 4), True, False), ((7,), False, False),
                                          ((70, 7), False, False)])
def test_fused_matmul_gradient(act, ashape, ta, tb):
    rng = np.random.default_rng(4)
    a = rng.standard_normal(ashape, dtype=np.float32)
    b = rng.standard_normal((6, 7) if tb else (7, 6), dtype=np.float32)
    bias = rng.standard_normal(6, dtype=np.float32)
    fused = [of.tensor(v, requires_grad=True) for v in (a, b, bias)]
    y = gen.fused_mat_mul(*fused, transpose_a=ta, transpose_b=tb, activation=act)
    w = rng.standard_normal(y.shape, dtype=np.float32)
    of.sum(of.mul(y, w)).backward()
    plain = [of.tensor(v, requires_grad=True) for v in (a, b, bias)]
    z = UNFUSED[act](of.add(of.matmul(plain[0], plain[1], transpose_a=ta, transpose_b=tb), plain[2]))
    of.sum(of.mul(z, w)).backward()
    for f, p in zip(fused, plain):
        np.testing.assert_allclose(f.grad.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-5)
    # Central differences on a few entries of each input (float64 sums of the float32 op).
    loss = lambda *vs: float(np.sum(np.asarray(gen.fused_mat_mul(*vs, transpose_a=ta, transpose_b=tb,
                                                                 activation=act), np.float64) * w))
    for i, v in enumerate((a, b, bias)):
        for flat in rng.choice(v.size, 3, replace=False):
            up, dn = [x.copy() for x in (a, b, bias)], [x.copy() for x in (a, b, bias)]
            up[i].reshape(-1)[flat] += 1e-2
            dn[i].reshape(-1)[flat] -= 1e-2
            fd = (loss(*up) - loss(*dn)) / 2e-2
            if act == "relu" and abs(fd - fused[i].grad.numpy().reshape(-1)[flat]) > 1e-2:
                continue  # a kink within the step
            np.testing.assert_allclose(fused[i].grad.numpy().reshape(-1)[flat], fd, rtol=2e-2, atol=2e-2)


def test_fused_matmul_activation_grad_checks_y():
    a, b, bias = np.ones((4, 3), np.float32), np.ones((3, 5), np.float32), np.ones(5, np.float32)
    with pytest.raises(of.errors.InvalidArgumentError, match="argument 'y'"):
        gen.fused_mat_mul_activation_grad(np.ones((4, 6), np.float32), np.ones((4, 6), np.float32), a, b, bias)
    with pytest.raises(of.errors.InvalidArgumentError, match="argument 'dy'"):
        gen.fused_mat_mul_activation_grad(np.ones((4, 6), np.float32), np.ones((4, 5), np.float32), a, b, bias)
