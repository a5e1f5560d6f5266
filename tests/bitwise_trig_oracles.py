"""test_bad_input oracles for the bitwise and trig ops (robustness_oracles.py merges them into ORACLES)."""
import numpy as np
from hypothesis import strategies as st

from opforge.testing.check.inputs import NP_NAMES, array, broadcastable_shapes, numpy_dtype, quiet, shapes


def _binary(fn):
    def gen(draw, dtype):
        a, b = broadcastable_shapes(draw, 2)
        return (array(draw, dtype, a), array(draw, dtype, b)), {}
    return gen, quiet(fn)


def _unary(fn):
    def gen(draw, dtype):
        return (array(draw, dtype, draw(shapes())),), {}
    return gen, quiet(fn)


def _shift_gen(draw, dtype):
    a, b = broadcastable_shapes(draw, 2)
    direction = draw(st.sampled_from(["LEFT", "RIGHT"])) if draw(st.integers(0, 9)) else "UP"
    return (array(draw, dtype, a), array(draw, dtype, b)), {"direction": direction}


@quiet
def bit_shift(x, n, direction):
    if direction not in ("LEFT", "RIGHT"):
        raise ValueError("direction")
    x, n = np.broadcast_arrays(x, n)
    bits = x.dtype.itemsize * 8
    unsigned = np.dtype(f"uint{bits}")
    ok = (n >= 0) & (n < bits)
    k = np.where(ok, n, 0).astype(unsigned)
    if direction == "LEFT":
        out = np.left_shift(x.view(unsigned) if x.flags.c_contiguous else x.astype(unsigned), k).astype(x.dtype)
        return np.where(ok, out, np.zeros((), x.dtype))
    out = np.right_shift(x, k.astype(x.dtype))
    fill = np.where(x < 0, -1, 0).astype(x.dtype) if x.dtype.kind == "i" else np.zeros((), x.dtype)
    return np.where(ok, out, fill)


def _bitcast_gen(draw, dtype):
    return (array(draw, dtype, draw(shapes())),), {"dtype": draw(st.sampled_from(NP_NAMES))}


@quiet
def bit_cast(x, dtype):
    target = numpy_dtype(dtype)
    if target.itemsize != x.dtype.itemsize:
        raise ValueError("width")
    return x.copy(order="C").view(target)


BITWISE_TRIG_ORACLES = {
    "BitwiseAnd": _binary(np.bitwise_and), "BitwiseOr": _binary(np.bitwise_or),
    "BitwiseXor": _binary(np.bitwise_xor), "BitwiseNot": _unary(np.invert),
    "BitShift": (_shift_gen, bit_shift), "BitCast": (_bitcast_gen, bit_cast),
    "Asin": _unary(np.arcsin), "Acos": _unary(np.arccos), "Atan": _unary(np.arctan),
    "Asinh": _unary(np.arcsinh), "Acosh": _unary(np.arccosh), "Atanh": _unary(np.arctanh),
}
