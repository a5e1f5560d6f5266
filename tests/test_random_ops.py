"""Random ops (Philox): distributions (moments, KS against the exact CDFs), seeding rules,
reproducibility across thread counts, shape functions and bad input."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import opforge as of
from opforge import errors


def _ks(sample, cdf):
    """The Kolmogorov-Smirnov statistic of `sample` against `cdf` (a vectorized function)."""
    x = np.sort(np.asarray(sample, np.float64).ravel())
    n = len(x)
    f = cdf(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


_erf = np.vectorize(math.erf)


def _normal_cdf(x):
    return 0.5 * (1 + _erf(x / math.sqrt(2)))


def _ks_limit(n):
    return 1.63 / math.sqrt(n)  # alpha = 0.01


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_uniform_distribution(dtype):
    of.random.seed(1)
    u = of.random.uniform([20000], dtype=dtype).numpy()
    assert u.dtype == dtype and u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.003
    assert _ks(u, lambda x: np.clip(x, 0, 1)) < _ks_limit(u.size)
    v = of.random.uniform([20000], -3.0, 5.0, dtype=dtype).numpy()
    assert v.min() >= -3 and v.max() < 5 and abs(v.mean() - 1) < 0.1


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_normal_distribution(dtype):
    of.random.seed(2)
    z = of.random.normal([40001], dtype=dtype).numpy()  # odd: the last Box-Muller pair is cut
    assert z.dtype == dtype and np.isfinite(z).all()
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02
    assert abs(np.mean(z ** 3)) < 0.05 and abs(np.mean(z ** 4) - 3) < 0.15  # skew, kurtosis
    assert _ks(z, _normal_cdf) < _ks_limit(z.size)
    w = of.random.normal([10000], mean=3.0, stddev=0.5, dtype=dtype).numpy()
    assert abs(w.mean() - 3) < 0.02 and abs(w.std() - 0.5) < 0.02


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_truncated_normal_distribution(dtype):
    of.random.seed(3)
    t = of.random.truncated_normal([30000], dtype=dtype).numpy()
    assert t.min() >= -2 and t.max() <= 2
    z = _normal_cdf(np.array([2.0]))[0] - _normal_cdf(np.array([-2.0]))[0]
    cdf = lambda x: (_normal_cdf(x) - _normal_cdf(np.array([-2.0]))[0]) / z  # noqa: E731
    assert _ks(t, cdf) < _ks_limit(t.size)
    assert abs(t.std() - 0.8796) < 0.015


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_randint_distribution(dtype):
    of.random.seed(4)
    r = of.random.randint(-3, 7, [50000], dtype=dtype).numpy()
    assert r.dtype == dtype and r.min() == -3 and r.max() == 6
    counts = np.bincount(r + 3, minlength=10)
    expected = r.size / 10
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 21.7  # chi-square, 9 degrees of freedom, alpha = 0.01
    big = of.random.randint(0, 2 ** 40, [1000]).numpy()
    assert big.max() > 2 ** 39 and big.min() >= 0


def test_shuffle_and_permutation():
    of.random.seed(5)
    x = np.arange(24, dtype=np.int64).reshape(12, 2)
    y = of.random.shuffle(x).numpy()
    assert sorted(map(tuple, y)) == sorted(map(tuple, x)) and not np.array_equal(x, y)
    p = of.random.permutation(1000).numpy()
    assert np.array_equal(np.sort(p), np.arange(1000))
    # Every position equally likely: where element 0 lands over many shuffles.
    where = [int(np.argmax(of.random.permutation(5).numpy() == 0)) for _ in range(2000)]
    counts = np.bincount(where, minlength=5)
    assert ((counts - 400) ** 2 / 400).sum() < 13.3  # chi-square, 4 dof, alpha = 0.01
    for dtype in ("float32", "float64", "int32", "bool"):
        assert of.random.shuffle(np.zeros((3, 2), dtype)).dtype.name == dtype
    assert of.random.permutation(0).shape == (0,)


def test_global_seed_repeats_the_sequence():
    of.random.seed(10)
    a, b = of.random.normal([5]).numpy(), of.random.normal([5]).numpy()
    assert not np.array_equal(a, b)  # each call draws the next stream
    of.random.seed(10)
    assert np.array_equal(of.random.normal([5]).numpy(), a)
    assert np.array_equal(of.random.normal([5]).numpy(), b)
    of.random.seed(11)
    assert not np.array_equal(of.random.normal([5]).numpy(), a)


def test_op_seed_has_its_own_sequence():
    of.random.seed(0)
    a1 = of.random.uniform([4], seed=7).numpy()
    of.random.uniform([4])  # draws of the global sequence do not move the op's
    a2 = of.random.uniform([4], seed=7).numpy()
    assert not np.array_equal(a1, a2)
    of.random.seed(0)
    assert np.array_equal(of.random.uniform([4], seed=7).numpy(), a1)
    assert np.array_equal(of.random.uniform([4], seed=7).numpy(), a2)
    assert not np.array_equal(of.random.uniform([4], seed=8).numpy(), a1)


def test_raw_op_is_a_pure_function_of_its_seeds():
    a = of.random_uniform([3, 4], "float64", 123, 9).numpy()
    assert np.array_equal(a, of.random_uniform([3, 4], "float64", 123, 9).numpy())
    assert not np.array_equal(a, of.random_uniform([3, 4], "float64", 123, 10).numpy())
    # Element i does not depend on the shape around it (counter-based).
    flat = of.random_standard_normal([12], "float32", 5, 0).numpy()
    assert np.array_equal(of.random_standard_normal([3, 4], "float32", 5, 0).numpy().ravel(), flat)
    assert np.array_equal(of.random_standard_normal([7], "float32", 5, 0).numpy(), flat[:7])


_SCRIPT = """
import hashlib, opforge as of
parts = [of.random_uniform([300001], "float32", 1, 2), of.random_standard_normal([200001], "float64", 3, 4),
         of.truncated_normal([100001], "float32", 5, 6), of.random_uniform_int([100001], -5, 1000, "int64", 7, 8),
         of.random_shuffle(of.arange(100001), 9, 10)]
print(of.config.num_threads(), hashlib.sha256(b"".join(p.numpy().tobytes() for p in parts)).hexdigest())
"""


def test_same_numbers_for_any_thread_count():
    out = []
    for threads in ("1", "4"):
        env = dict(os.environ, OPFORGE_NUM_THREADS=threads)
        r = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        out.append(r.stdout.split())
    assert out[0][0] == "1" and out[1][0] == "4"
    assert out[0][1] == out[1][1]


def test_shape_functions_and_bad_input():
    assert of.random_uniform([], "float32").shape == ()
    assert of.random_uniform([2, 0, 3]).shape == (2, 0, 3)
    with pytest.raises(errors.InvalidArgumentError, match="minval"):
        of.random_uniform_int([2], 5, 5)
    with pytest.raises(errors.InvalidArgumentError, match="int32"):
        of.random_uniform_int([2], 0, 2 ** 40, "int32")
    with pytest.raises(errors.InvalidArgumentError, match="rank"):
        of.random_shuffle(np.float32(1.0))
    with pytest.raises(errors.InvalidArgumentError, match="negative"):
        of.random.normal([2, -1])
    with pytest.raises(errors.InvalidArgumentError, match="float32 or float64"):
        of.random.normal([2], dtype="int32")
    with pytest.raises(errors.InvalidArgumentError, match="seed"):
        of.random.seed("x")


def test_no_gradient_declared():
    x = of.tensor(np.ones((4, 2), np.float32), requires_grad=True)
    y = of.random.shuffle(x)
    assert not y.requires_grad  # declared .NoGradient(): not recorded


def test_graph_mode_nodes_draw_their_own_streams():
    g = of.Graph()
    with g.as_default():
        a = of.random.normal([3], seed=1)
        b = of.random.normal([3], seed=1)
    with of.Session(g) as sess:
        va, vb = sess.run([a, b])
        va2, _ = sess.run([a, b])
    with of.Session(g) as sess:
        va3, _ = sess.run([a, b])
    assert not np.array_equal(va, vb)
    assert not np.array_equal(va, va2)  # stateful: each run draws anew
    assert np.array_equal(va, va3)  # a new Session repeats the sequence


def test_initializers():
    of.random.seed(0)
    init = of.initializers
    w = init.glorot_uniform()([300, 200]).numpy()
    limit = math.sqrt(6 / 500)
    assert np.abs(w).max() <= limit and abs(w.std() - limit / math.sqrt(3)) < 0.01 * limit
    w = init.he_normal()([400, 100]).numpy()
    assert abs(w.std() - math.sqrt(2 / 400)) < 0.03 * math.sqrt(2 / 400)
    w = init.glorot_normal()([3, 3, 64, 64]).numpy()  # conv kernel: fans times the receptive field
    assert abs(w.std() - math.sqrt(2 / (2 * 9 * 64))) < 0.03 * math.sqrt(2 / (2 * 9 * 64))
    w = init.he_uniform()([500, 10]).numpy()
    assert np.abs(w).max() <= math.sqrt(6 / 500)
    assert np.array_equal(init.zeros()([2, 3], "float64").numpy(), np.zeros((2, 3)))
    assert np.array_equal(init.ones()([2]).numpy(), np.ones(2, np.float32))
    assert np.array_equal(init.constant(2.5)([2]).numpy(), np.full(2, 2.5, np.float32))
    of.random.seed(3)
    a = init.get("lecun_normal")([4, 4]).numpy()
    s = init.he_normal(seed=9)
    b1, b2 = s([4]).numpy(), s([4]).numpy()
    of.random.seed(3)
    assert np.array_equal(init.get("lecun_normal")([4, 4]).numpy(), a)
    assert np.array_equal(s([4]).numpy(), b1) and not np.array_equal(b1, b2)
    with pytest.raises(errors.InvalidArgumentError):
        init.get("no_such_init")


def test_philox_oracle_known_answers_and_kernels_match_it():
    sys.path.insert(0, os.path.dirname(__file__))
    import random_oracles as ro
    # Random123's known-answer vectors for Philox4x32-10 (counter, key -> output).
    kat = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
           ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
           ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for ctr, key, want in kat:
        assert tuple(int(v) for v in ro.philox(np.array([ctr], np.uint64), key)[0]) == want
    seed, seed2 = -12345, 2**40 + 7
    for dtype in ("float32", "float64"):
        assert np.array_equal(of.random_uniform([7, 5], dtype, seed, seed2).numpy(),
                              ro.uniform([7, 5], dtype, seed, seed2))
        np.testing.assert_allclose(of.random_standard_normal([33], dtype, seed, seed2).numpy(),
                                   ro.standard_normal([33], dtype, seed, seed2), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(of.truncated_normal([500], dtype, seed, seed2).numpy(),
                                   ro.truncated_normal([500], dtype, seed, seed2), rtol=1e-6, atol=1e-6)
    assert np.array_equal(of.random_uniform_int([9], -2**40, 2**41, "int64", seed, seed2).numpy(),
                          ro.uniform_int([9], -2**40, 2**41, "int64", seed, seed2))
    x = np.arange(40, dtype=np.int32).reshape(20, 2)
    assert np.array_equal(of.random_shuffle(x, seed, seed2).numpy(), ro.shuffle(x, seed, seed2))
