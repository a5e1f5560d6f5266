"""Helpers the composed converters share: gather along any axis, apply a
matrix along an axis, reverse an axis. Index arrays here are numpy values
computed at import from static shapes."""

import numpy as np

from opforge import ops as P
from opforge.onnx._node import dtype_of, shape_of

_I32 = np.dtype(np.int32)
_NATIVE = {np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64)}


_CARRIER = {np.dtype(np.float16): np.float32, np.dtype(np.int8): np.int32, np.dtype(np.uint8): np.int32,
            np.dtype(np.int16): np.int32, np.dtype(np.uint16): np.int32, np.dtype(np.uint32): np.int64}


def moved(fn, x):
    """fn(x) for an op that only moves elements (gathers), through a dtype its kernels have:
    the narrow dtypes widen exactly and narrow back; uint64 is reinterpreted as int64."""
    dt = dtype_of(x)
    if dt == np.bool_:
        return P.not_equal(fn(P.cast(x, dtype=_I32)), np.zeros((), np.int32))
    if dt == np.uint64:
        return P.bit_cast(fn(P.bit_cast(x, dtype=np.dtype(np.int64))), dtype=dt)
    wide = _CARRIER.get(dt) or (np.float32 if dt.name == "bfloat16" else None)
    if wide is None:
        return fn(x)
    return P.cast(fn(P.cast(x, dtype=np.dtype(wide))), dtype=dt)


def moved2(fn, a, b):
    """fn(a, b) for an op that only moves elements of a and b (one dtype), like `moved`."""
    dt = dtype_of(a)
    if dt in _NATIVE:
        return fn(a, b)
    if dt == np.uint64:
        i64 = np.dtype(np.int64)
        return P.bit_cast(fn(P.bit_cast(a, dtype=i64), P.bit_cast(b, dtype=i64)), dtype=dt)
    wide = _CARRIER.get(dt) or (np.float32 if dt.name == "bfloat16" else None)
    if dt == np.bool_:
        wide = np.int32
    if wide is None:
        return fn(a, b)
    w = np.dtype(wide)
    y = fn(P.cast(a, dtype=w), P.cast(b, dtype=w))
    return P.not_equal(y, np.zeros((), w)) if dt == np.bool_ else P.cast(y, dtype=dt)


def take(x, idx, axis):
    """np.take(x, idx, axis) with non-negative indices (numpy array or int64 tensor)."""
    if dtype_of(x) not in _NATIVE:
        return moved(lambda v: take(v, idx, axis), x)
    if axis == 0:
        return P.gather(x, idx)
    rank, r = len(shape_of(x)), len(shape_of(idx))
    front = P.transpose(x, perm=[axis] + [i for i in range(rank) if i != axis])
    g = P.gather(front, idx)  # idx dims, then x's dims without axis
    perm = [r + k for k in range(axis)] + list(range(r)) + [r + k for k in range(axis, rank - 1)]
    return P.transpose(g, perm=perm)


def flip(x, axis):
    """x reversed along axis (whose size must be static)."""
    size = shape_of(x)[axis]
    return take(x, np.arange(size - 1, -1, -1, dtype=np.int64), axis)


def apply_matrix(x, w, axis):
    """y[..., i, ...] = sum_j w[i, j] x[..., j, ...] along axis: a MatMul with the axis moved last."""
    rank = len(shape_of(x))
    w = np.asarray(w, dtype=dtype_of(x))
    if axis == rank - 1:
        return P.mat_mul(x, w, transpose_b=True)
    perm = [i for i in range(rank) if i != axis] + [axis]
    y = P.mat_mul(P.transpose(x, perm=perm), w, transpose_b=True)
    back = list(np.argsort(perm))
    return P.transpose(y, perm=[int(i) for i in back])
