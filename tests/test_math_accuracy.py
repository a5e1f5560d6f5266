"""Accuracy of the vectorized Exp, Log, Tanh, Sigmoid and Sqrt kernels.

They are polynomial implementations (cpp/kernels/simd_math.h), not libm, so
they are checked in ulps against a more precise reference: float64 numpy for
float32 results, long double numpy for float64 results. Special values must
match exactly. Every instruction-set path (OPFORGE_SIMD) is rerun in a
subprocess, since one machine otherwise exercises only its widest one.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import opforge as of

FLOATS = [np.float32, np.float64]
rng = np.random.default_rng(7)

# Documented bounds (simd_math.h), in units of the last place of the result.
MAX_ULP = {"exp": 1.0, "log": 1.0, "tanh": 1.5, "sigmoid": 3.0, "sqrt": 0.5}

# A reference wider than float64 exists where long double is (x86: 64-bit
# mantissa). Elsewhere float64 results get one extra ulp of slack.
WIDE = np.longdouble if np.finfo(np.longdouble).nmant > 52 else np.float64


def reference(name, x):
    """The function in a wider type than x."""
    with np.errstate(all="ignore"):
        w = x.astype(np.float64 if x.dtype == np.float32 else WIDE)
        if name == "exp":
            return np.exp(w)
        if name == "log":
            return np.log(w)
        if name == "tanh":
            return np.tanh(w)
        if name == "sqrt":
            return np.sqrt(w)
        if name == "sigmoid":
            return 1 / (1 + np.exp(-w))
    raise AssertionError(name)


def ulp_errors(got, ref):
    """|got - ref| in ulps of the reference rounded to got's dtype."""
    dt = got.dtype
    with np.errstate(all="ignore"):
        rounded = ref.astype(dt)
        finite = np.isfinite(rounded)
        spacing = np.spacing(np.abs(rounded[finite])).astype(ref.dtype)
        spacing = np.maximum(spacing, np.finfo(dt).smallest_subnormal)
        return np.abs(got[finite].astype(ref.dtype) - ref[finite]) / spacing, finite


def check_ulps(name, x, slack=0.0):
    got = getattr(of, name)(x).numpy()
    assert got.dtype == x.dtype and got.shape == x.shape
    ref = reference(name, x)
    err, finite = ulp_errors(got, ref)
    bound = MAX_ULP[name] + slack + (1.0 if x.dtype == np.float64 and WIDE is np.float64 else 0.0)
    worst = float(err.max()) if err.size else 0.0
    assert worst <= bound, (name, x.dtype, worst, x[finite][np.argmax(err)])
    # Where the rounded reference is inf or NaN, so is the result (same sign).
    with np.errstate(all="ignore"):
        rounded = ref.astype(x.dtype)
    np.testing.assert_array_equal(got[~finite], rounded[~finite])


def random_bits(dtype, n):
    """Uniform over bit patterns: every exponent, denormals, inf, NaN."""
    if dtype == np.float32:
        return rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True).view(np.float64)


def domains(name, dtype):
    """Inputs that cover the function's interesting ranges."""
    f32 = dtype == np.float32
    lo, hi = (-110.0, 95.0) if f32 else (-750.0, 712.0)  # past under- and overflow
    sets = {
        "bits": random_bits(dtype, 400_000),
        "range": rng.uniform(lo, hi, 400_000).astype(dtype),
        "unit": rng.uniform(-4, 4, 400_000).astype(dtype),
        "tiny": (rng.uniform(-1, 1, 100_000) * 10.0 ** rng.uniform(-40 if f32 else -300, 0, 100_000)).astype(dtype),
    }
    if name in ("log", "sqrt"):
        sets["positive"] = np.exp(rng.uniform(-104 if f32 else -745, 88 if f32 else 709, 400_000)).astype(dtype)
        sets["near_one"] = (1 + rng.uniform(-0.3, 0.3, 100_000)).astype(dtype)
    if name == "exp":
        # Results that are denormal, and just below overflow.
        sets["denormal"] = rng.uniform(-104 if f32 else -745.2, -87.3 if f32 else -708.4, 100_000).astype(dtype)
        sets["top"] = rng.uniform(88 if f32 else 709, 88.73 if f32 else 709.79, 100_000).astype(dtype)
    return sets


CASES = [(name, dt) for name in MAX_ULP for dt in FLOATS]


@pytest.mark.parametrize("name,dtype", CASES, ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
def test_ulp_error(name, dtype):
    for x in domains(name, dtype).values():
        check_ulps(name, x)


SPECIALS = {
    "exp": [(0.0, 1.0), (-0.0, 1.0), (np.inf, np.inf), (-np.inf, 0.0), (np.nan, np.nan),
            (1000.0, np.inf), (-1000.0, 0.0), (1.0, np.e)],
    "log": [(0.0, -np.inf), (-0.0, -np.inf), (np.inf, np.inf), (-np.inf, np.nan), (-1.0, np.nan),
            (np.nan, np.nan), (1.0, 0.0)],
    "tanh": [(0.0, 0.0), (np.inf, 1.0), (-np.inf, -1.0), (np.nan, np.nan), (50.0, 1.0), (-50.0, -1.0)],
    "sigmoid": [(0.0, 0.5), (np.inf, 1.0), (-np.inf, 0.0), (np.nan, np.nan), (100.0, 1.0)],
    "sqrt": [(0.0, 0.0), (np.inf, np.inf), (-1.0, np.nan), (-np.inf, np.nan), (np.nan, np.nan), (4.0, 2.0)],
}


@pytest.mark.parametrize("name", sorted(SPECIALS))
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_special_values(name, dtype):
    x = np.array([a for a, _ in SPECIALS[name]], dtype=dtype)
    want = np.array([b for _, b in SPECIALS[name]], dtype=dtype)
    got = getattr(of, name)(x).numpy()
    np.testing.assert_allclose(got, want, rtol=2 * np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_signed_zero_and_tiny_values(dtype):
    neg0 = np.array([-0.0], dtype=dtype)
    assert np.signbit(of.tanh(neg0).numpy()[0])
    assert np.signbit(of.sqrt(neg0).numpy()[0])
    tiny = np.finfo(dtype).smallest_subnormal
    # log of a denormal is finite and accurate; exp of one is 1.
    check_ulps("log", np.array([tiny, 3 * tiny, np.finfo(dtype).tiny / 3], dtype=dtype))
    np.testing.assert_array_equal(of.exp(np.array([tiny, -tiny], dtype=dtype)).numpy(), [1, 1])
    # sigmoid keeps tiny results instead of flushing them to 0.
    x = np.array([-80.0 if dtype == np.float32 else -700.0], dtype=dtype)
    check_ulps("sigmoid", x)
    assert of.sigmoid(x).numpy()[0] > 0


@pytest.mark.parametrize("name", sorted(MAX_ULP))
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_lengths_and_offsets(name, dtype):
    # Partial vectors at the end, unaligned starts (views), and an output
    # large enough for streaming stores whose thread chunks start unaligned.
    base = rng.uniform(0.01, 5, 5_000_000).astype(dtype)
    for n in list(range(0, 70)) + [127, 1025]:
        for off in (0, 1, 3):
            check_ulps(name, base[off:off + n])
    check_ulps(name, base[1:4_200_013])


@pytest.mark.skipif(os.environ.get("OPFORGE_SIMD") is not None, reason="already capped")
@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_every_instruction_set(isa):
    # Reruns this module with the dispatch capped; on a CPU without the set
    # it falls back to a narrower one, which must pass as well.
    env = dict(os.environ, OPFORGE_SIMD=isa)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
