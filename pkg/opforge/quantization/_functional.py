"""Quantize / dequantize helpers with their arguments checked in Python."""

import concurrent.futures

import numpy as np

from opforge import dtypes as _dtypes
from opforge import errors as _errors
from opforge import ops as _ops

_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767)}


def _check_scale(op, name, scale):
    s = np.asarray(scale.numpy() if hasattr(scale, "numpy") else scale, dtype=np.float64)
    bad = ~np.isfinite(s) | (s == 0)
    if bad.any():
        i = int(np.argmax(bad.reshape(-1)))
        raise _errors.InvalidArgumentError(
            f"{op}: argument '{name}' must be finite and non-zero, got {s.reshape(-1)[i]!r}"
            + (f" at index {i}" if s.size > 1 else ""))
    return np.asarray(s, np.float32)


def _zero_point(op, name, zero_point, dtype, shape):
    """zero_point as an array of `dtype` (its range checked), broadcast to the scale's shape."""
    if hasattr(zero_point, "numpy"):
        zero_point = zero_point.numpy()
    z = np.asarray(zero_point)
    if z.dtype.kind not in "iub":
        raise _errors.InvalidArgumentError(f"{op}: argument '{name}' must be integers, got {z.dtype}")
    lo, hi = _RANGES[dtype]
    out = (z < lo) | (z > hi)
    if out.any():
        v = z.reshape(-1)[int(np.argmax(out.reshape(-1)))]
        raise _errors.InvalidArgumentError(
            f"{op}: argument '{name}' = {int(v)} is outside the range of {dtype} [{lo}, {hi}]")
    try:
        return np.broadcast_to(z, shape).astype(dtype)
    except ValueError:
        raise _errors.InvalidArgumentError(
            f"{op}: argument '{name}' of shape {list(z.shape)} does not fit the scale's {list(shape)}") from None


def quantize_linear(x, scale, zero_point=0, dtype="uint8", axis=1):
    """saturate(round(x / scale) + zero_point) as `dtype` (uint8, int8, uint16, int16); per tensor or per `axis`.

    Rounds half to even and saturates as ONNX QuantizeLinear. A scale of zero,
    NaN or infinity, or a zero point outside `dtype`'s range, raises
    InvalidArgumentError naming the argument.
    """
    dtype = _dtypes.as_dtype(dtype).name
    if dtype not in _RANGES:
        raise _errors.InvalidArgumentError(f"QuantizeLinear: dtype must be uint8, int8, uint16 or int16, got {dtype}")
    s = _check_scale("QuantizeLinear", "y_scale", scale)
    z = _zero_point("QuantizeLinear", "y_zero_point", zero_point, dtype, s.shape)
    return _ops.quantize_linear(x, s, z, axis=axis)


def dequantize_linear(x, scale, zero_point=0, axis=1):
    """(x - zero_point) * scale in float32; x uint8, int8 or int32."""
    s = _check_scale("DequantizeLinear", "x_scale", scale)
    xd = getattr(x, "dtype", None)
    name = xd.name if hasattr(xd, "name") else np.dtype(xd).name
    if name == "int32":
        z = np.broadcast_to(np.asarray(zero_point, np.int32), s.shape).copy()
    else:
        z = _zero_point("DequantizeLinear", "x_zero_point", zero_point, name if name in _RANGES else "uint8", s.shape)
    return _ops.dequantize_linear(x, s, z, axis=axis)


def quantize_weight(w, axis=0):
    """Symmetric int8 quantization of a float weight, one scale per index of `axis`.

    Returns (int8 array, float32 scales) with w ~ q * scale; values map to
    [-127, 127] (never -128, so the negated range fits too). A row of zeros
    gets scale 1.
    """
    w = np.asarray(w.numpy() if hasattr(w, "numpy") else w, np.float32)
    if not np.isfinite(w).all():
        raise _errors.InvalidArgumentError("quantize_weight: argument 'w' holds NaN or infinite values")
    red = tuple(i for i in range(w.ndim) if i != axis % w.ndim)
    amax = np.abs(w).max(axis=red) if w.size else np.zeros(w.shape[axis], np.float32)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    view = [1] * w.ndim
    view[axis % w.ndim] = -1
    q = np.clip(np.rint(w / scale.reshape(view)), -127, 127).astype(np.int8)
    return q, scale


def pack_eagerly(fn, *args, **kwargs):
    """fn(*args) run eagerly even while a graph is being built: in a helper
    thread, whose mode stack (per thread) is empty. A weight is packed once
    (PackMatMulIntegerWeight, PackHalfMatMulWeight) and enters a graph as a
    constant, not as a node that would pack it again on every Session.run."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args, **kwargs).result()


def gemm_isa():
    """The 8-bit GEMM microkernel in use: "avx512vnni", "avx2" or "generic" (OPFORGE_SIMD caps it)."""
    import ctypes

    from opforge import _pywrap_internal
    fn = ctypes.CDLL(_pywrap_internal.__file__)._ZN7opforge5qgemm8QGemmIsaEv
    fn.restype = ctypes.c_char_p
    return fn().decode()
