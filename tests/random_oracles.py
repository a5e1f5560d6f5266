"""numpy oracles of the random ops: an independent Philox4x32-10 (checked against Random123's
known-answer vectors in tests/test_random_ops.py) and the same value transforms, so the C++
kernels are compared bit for bit (integers) or to rounding (floats), and their errors to numpy's."""

import math

import numpy as np
from hypothesis import strategies as st

M0, M1, W0, W1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57), 0x9E3779B9, 0xBB67AE85
MASK = np.uint64(0xFFFFFFFF)


def philox(ctr, key):
    """Philox4x32-10 of counters `ctr` (uint64 array [n, 4] holding 32-bit words) under key (k0, k1)."""
    c = [ctr[:, i].astype(np.uint64) for i in range(4)]
    k0, k1 = key
    for _ in range(10):
        p0, p1 = M0 * c[0], M1 * c[2]
        hi0, lo0, hi1, lo1 = p0 >> np.uint64(32), p0 & MASK, p1 >> np.uint64(32), p1 & MASK
        c = [hi1 ^ c[1] ^ np.uint64(k0), lo1, hi0 ^ c[3] ^ np.uint64(k1), lo0]
        k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    return np.stack(c, axis=1)


def mix_seed(seed):
    z = (seed + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return z ^ (z >> 31)


def blocks(seed, seed2, n, sub=0):
    """Blocks 0..n-1 of the stream (seed, seed2): uint64 array [n, 4] of 32-bit words."""
    key = mix_seed(seed & 0xFFFFFFFFFFFFFFFF)
    s2 = seed2 & 0xFFFFFFFFFFFFFFFF
    idx = np.arange(n, dtype=np.uint64)
    ctr = np.stack([idx & MASK, idx >> np.uint64(32), np.full(n, s2 & 0xFFFFFFFF, np.uint64),
                    np.full(n, ((s2 >> 32) ^ sub) & 0xFFFFFFFF, np.uint64)], axis=1)
    return philox(ctr, (key & 0xFFFFFFFF, key >> 32))


def _u24(x):
    return (x >> np.uint64(8)).astype(np.float64) / 16777216.0


def _u53(lo, hi):
    return ((hi << np.uint64(32) | lo) >> np.uint64(11)).astype(np.float64) / 9007199254740992.0


def _box_muller(u1, u2):
    r = np.sqrt(-2.0 * np.log(1.0 - u1))
    return r * np.cos(2 * math.pi * u2), r * np.sin(2 * math.pi * u2)


class Empty(Exception):
    """Raised for a shape with a 0 dim: the result is empty (and numpy may not represent its shape)."""


def _size(shape):
    if any(d < 0 for d in shape):
        raise ValueError("negative dim")
    if 0 in shape:
        raise Empty
    n = int(np.prod([float(d) for d in shape]))
    if n >= 2**31:
        raise ValueError("too big")  # an allocation or a shape overflow: either error is right
    return n


def uniform(shape, dtype, seed, seed2):
    n = _size(shape)
    if dtype == "float32":
        b = blocks(seed, seed2, -(-n // 4))
        return _u24(b).reshape(-1)[:n].astype(np.float32).reshape(shape)
    b = blocks(seed, seed2, -(-n // 2))
    v = np.stack([_u53(b[:, 0], b[:, 1]), _u53(b[:, 2], b[:, 3])], axis=1)
    return v.reshape(-1)[:n].reshape(shape)


def standard_normal(shape, dtype, seed, seed2):
    n = _size(shape)
    if dtype == "float32":
        b = blocks(seed, seed2, -(-n // 4))
        z0, z1 = _box_muller(_u24(b[:, 0]), _u24(b[:, 1]))
        z2, z3 = _box_muller(_u24(b[:, 2]), _u24(b[:, 3]))
        return np.stack([z0, z1, z2, z3], axis=1).reshape(-1)[:n].astype(np.float32).reshape(shape)
    b = blocks(seed, seed2, -(-n // 2))
    z0, z1 = _box_muller(_u53(b[:, 0], b[:, 1]), _u53(b[:, 2], b[:, 3]))
    return np.stack([z0, z1], axis=1).reshape(-1)[:n].reshape(shape)


def truncated_normal(shape, dtype, seed, seed2):
    n = _size(shape)
    out = np.zeros(n)
    todo = np.ones(n, bool)
    k = 1
    while todo.any():
        b = blocks(seed, seed2, n, sub=(k * 0x9E3779B9) & 0xFFFFFFFF)
        z0, z1 = _box_muller(_u53(b[:, 0], b[:, 1]), _u53(b[:, 2], b[:, 3]))
        ok0, ok1 = np.abs(z0) <= 2, np.abs(z1) <= 2
        out = np.where(todo & ok0, z0, np.where(todo & ~ok0 & ok1, z1, out))
        todo &= ~(ok0 | ok1)
        k += 1
    return out.astype(dtype).reshape(shape)


def uniform_int(shape, minval, maxval, dtype, seed, seed2):
    if minval >= maxval:
        raise ValueError("minval must be less than maxval")
    if dtype == "int32" and (minval < -2**31 or maxval - 1 > 2**31 - 1):
        raise ValueError("does not fit int32")
    n = _size(shape)
    b = blocks(seed, seed2, -(-n // 2))
    x = np.stack([b[:, 1] << np.uint64(32) | b[:, 0], b[:, 3] << np.uint64(32) | b[:, 2]], axis=1).reshape(-1)[:n]
    r = np.uint64((maxval - minval) & 0xFFFFFFFFFFFFFFFF)
    v = (np.uint64(minval & 0xFFFFFFFFFFFFFFFF) + x % r)  # wraps mod 2**64 as the kernel does
    return v.astype(np.int64).astype(dtype).reshape(shape)


def shuffle(x, seed, seed2):
    if x.ndim == 0:
        raise ValueError("rank 0")
    n = x.shape[0]
    perm = list(range(n))
    if x.size and n > 1:
        b = blocks(seed, seed2, n)
        for k in range(n - 1, 0, -1):
            r = int(b[k, 1]) << 32 | int(b[k, 0])
            j = r % (k + 1)
            perm[k], perm[j] = perm[j], perm[k]
    return x[perm] if x.size else x.copy()


# ---- hypothesis generators for tests/test_bad_input.py (dtype comes from the dtype attr)

def _shape(draw):
    return draw(st.lists(st.one_of(st.integers(0, 5), st.just(-1), st.sampled_from([2**40, 2**62])), max_size=3))


def _seeds(draw):
    return {"seed": draw(st.integers(-2**63, 2**63 - 1)), "seed2": draw(st.integers(-2**63, 2**63 - 1))}


def float_gen(draw, dtype):
    return (_shape(draw),), {"dtype": dtype, **_seeds(draw)}


def int_gen(draw, dtype):
    lo = draw(st.one_of(st.integers(-10, 10), st.integers(-2**62, 2**62)))
    hi = draw(st.one_of(st.integers(-10, 10), st.just(lo + 1), st.integers(-2**62, 2**62)))
    return (_shape(draw), lo, hi), {"dtype": dtype, **_seeds(draw)}


def _empty_ok(fn, empty_of):
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Empty:
            return empty_of(args[0], kwargs["dtype"])
    return run


def make(array, shapes, empty_of):
    """The ORACLES entries; `array`, `shapes` and `empty_of` are robustness_oracles' helpers."""

    def shuffle_gen(draw, dtype):
        return (array(draw, dtype, draw(shapes())),), _seeds(draw)

    def function_gen(draw, dtype):
        xs = [array(draw, dtype, draw(shapes())) for _ in range(draw(st.integers(1, 2)))]
        y = array(draw, draw(st.sampled_from(["float32", "float64", "int32", "int64", "bool"])), draw(shapes()))
        return (xs, y), {"key": draw(st.integers(0, 2**40)), "index": draw(st.integers(0, 3))}

    def python_function(xs, y, key, index):
        return y.copy()

    return {
        "RandomUniform": (float_gen, _empty_ok(uniform, empty_of)),
        "RandomStandardNormal": (float_gen, _empty_ok(standard_normal, empty_of)),
        "TruncatedNormal": (float_gen, _empty_ok(truncated_normal, empty_of)),
        "RandomUniformInt": (int_gen, _empty_ok(uniform_int, empty_of)),
        "RandomShuffle": (shuffle_gen, shuffle),
        "PythonFunction": (function_gen, python_function),
    }
