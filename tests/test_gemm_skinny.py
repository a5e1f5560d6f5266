"""Products with few columns and a weight stored [N, K] (more than 64 rows,
at most half a register tile of columns: x @ W^T of a classifier head) run
as row dot products (cpp/kernels/gemm/skinny.cc): against numpy in float64,
with every epilogue, at the path's edges, bitwise independent of the thread
count, and on the narrower microkernel tables (AVX2 / portable: nr = 16)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import opforge as of

gen = of.ops.gen_linalg_ops
ACTS = {"none": lambda z: z, "relu": lambda z: np.maximum(z, 0), "sigmoid": lambda z: 1 / (1 + np.exp(-z)),
        "silu": lambda z: z / (1 + np.exp(-z)),
        "gelu": lambda z: 0.5 * z * (1 + np.vectorize(__import__("math").erf)(z / np.sqrt(2)))}


def close(got, want, k):
    eps = np.finfo(np.float32).eps
    np.testing.assert_allclose(np.asarray(got), want, rtol=20 * eps * k ** 0.5 + 1e-6, atol=20 * eps * k)


# Inside the path (m > 64, n <= 8 or 16, k >= 64) and just outside it on each side.
SHAPES = [(256, 1024, 10), (65, 64, 1), (300, 777, 16), (1000, 100, 3), (129, 65, 8),
          (64, 1024, 10), (256, 63, 10), (256, 1024, 17), (70, 300, 33)]


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_transposed_weight_against_numpy(m, k, n):
    rng = np.random.default_rng(m + k + n)
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    close(of.matmul(x, w, transpose_b=True).numpy(), x.astype(np.float64) @ w.T.astype(np.float64), k)


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("m,k,n", [(256, 1024, 10), (65, 64, 1), (300, 777, 16)])
def test_fused_epilogue_against_unfused(act, m, k, n):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32)
    got = gen.fused_mat_mul(x, w, bias, transpose_b=True, activation=act).numpy()
    close(got, ACTS[act](x.astype(np.float64) @ w.T.astype(np.float64) + bias), k)
    unfused = of.add(of.matmul(x, w, transpose_b=True), bias)
    unfused = {"none": lambda z: z, "relu": of.relu, "sigmoid": of.sigmoid, "gelu": of.gelu,
               "silu": lambda z: of.mul(z, of.sigmoid(z))}[act](unfused).numpy()
    np.testing.assert_allclose(got, unfused, rtol=1e-5, atol=1e-5)


def test_head_gradients_against_numpy():
    # A classifier head under the tape: the forward product takes this path,
    # the gradients (dy @ W, dy^T @ x) the packed and small-M ones.
    rng = np.random.default_rng(1)
    x = of.tensor(rng.standard_normal((128, 96), dtype=np.float32), requires_grad=True)
    w = of.tensor(rng.standard_normal((10, 96), dtype=np.float32), requires_grad=True)
    of.sum(of.square(of.matmul(x, w, transpose_b=True))).backward()
    xn, wn = x.numpy().astype(np.float64), w.numpy().astype(np.float64)
    y = xn @ wn.T
    close(x.grad.numpy(), 2 * y @ wn, 96)
    close(w.grad.numpy(), 2 * y.T @ xn, 128)


_SCRIPT = """
import sys, numpy as np, opforge as of
rng = np.random.default_rng(3)
x = rng.standard_normal((300, 1024), dtype=np.float32)
w = rng.standard_normal((10, 1024), dtype=np.float32)
b = rng.standard_normal(10, dtype=np.float32)
np.save(sys.argv[1], of.ops.gen_linalg_ops.fused_mat_mul(x, w, b, transpose_b=True, activation="relu").numpy())
"""


@pytest.mark.skipif(os.environ.get("OPFORGE_SIMD") is not None, reason="a rerun with the dispatch capped")
def test_same_bits_on_one_and_two_threads_and_off_matches(tmp_path):
    outs = {}
    for name, env in (("one", {"OPFORGE_NUM_THREADS": "1"}), ("two", {"OPFORGE_NUM_THREADS": "2"}),
                      ("off", {"OPFORGE_GEMM_SKINNY": "0"})):
        path = tmp_path / f"{name}.npy"
        subprocess.run([sys.executable, "-c", _SCRIPT, str(path)], env=dict(os.environ, **env), check=True)
        outs[name] = np.load(path)
    assert np.array_equal(outs["one"], outs["two"])
    np.testing.assert_allclose(outs["off"], outs["two"], rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(os.environ.get("OPFORGE_SIMD") is not None, reason="already a rerun")
@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_narrower_microkernels(isa):
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", __file__],
                          env=dict(os.environ, OPFORGE_SIMD=isa), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
