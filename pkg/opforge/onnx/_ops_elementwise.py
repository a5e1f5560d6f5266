"""Elementwise ONNX operators: arithmetic, math, comparison, logic, selection.

ONNX's multidirectional broadcasting (opset >= 7) is numpy's, which is what
opforge's binary ops do. Before opset 7, shapes had to match unless
`broadcast=1`, which aligns B with A at `axis` (default: trailing) and
broadcasts B only: `_legacy_operand` implements exactly that.
"""

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx._node import FLOAT, INT, converter, dtype_of, shape_of

def _div(x, y):
    dt = dtype_of(x)
    if dt == np.int32:
        # ONNX integer division truncates; float64 holds every int32 and its
        # correctly rounded quotient never crosses an integer, and Cast truncates.
        wide = np.dtype(np.float64)
        return P.cast(P.div(P.cast(x, dtype=wide), P.cast(y, dtype=wide)), dtype=dt)
    if dt == np.int64:
        return _div_int64(x, y)
    return P.div(x, y)


def _div_int64(x, y):
    """Truncating int64 division: a float64 estimate, then one exact integer correction.

    The estimate is off by at most one while the quotient is below 2**52 in
    magnitude; the remainder x - q*y (exact in int64) says which way to fix it.
    """
    wide, dt = np.dtype(np.float64), np.dtype(np.int64)
    q = P.cast(P.div(P.cast(x, dtype=wide), P.cast(y, dtype=wide)), dtype=dt)
    r = P.sub(x, P.mul(q, y))
    sx, step = P.sign(x), P.mul(P.sign(x), P.sign(y))
    zero = np.zeros((), dt)
    too_small = P.logical_and(P.greater_equal(P.abs(r), P.abs(y)), P.equal(P.sign(r), sx))
    too_big = P.logical_and(P.not_equal(r, zero), P.equal(P.sign(r), P.neg(sx)))
    return P.add(q, P.select(too_small, step, P.select(too_big, P.neg(step), zero)))


# opforge's arithmetic kernels cover int32/int64; the narrow integer dtypes
# compute in int64 and cast back, which wraps modulo 2**bits exactly as the
# native operation would (and int64 holds every quotient and extreme of them).
_NARROW = {np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.uint32)}
_I64, _U64 = np.dtype(np.int64), np.dtype(np.uint64)
_TOP = np.array(np.iinfo(np.int64).min, dtype=np.int64)


def _widened(fn, order=False):
    """fn over int64 for the narrow integer dtypes (and uint64: Add, Sub, Mul wrap alike in
    int64; with order=True, Max/Min compare keys with the top bit flipped, which orders
    uint64 as int64)."""
    def apply(*values):
        dt = dtype_of(values[0])
        if dt in _NARROW:
            return P.cast(fn(*[P.cast(v, dtype=_I64) for v in values]), dtype=dt)
        if dt == _U64:
            if order:
                keys = [P.add(P.cast(v, dtype=_I64), _TOP) for v in values]
                return P.cast(P.sub(fn(*keys), _TOP), dtype=dt)
            return P.cast(fn(*[P.cast(v, dtype=_I64) for v in values]), dtype=dt)
        return fn(*values)
    return apply


def _div_any(x, y):
    if dtype_of(x) == _U64:
        raise UnimplementedError("Div of uint64 is not supported (int64 cannot hold every quotient)")
    return _widened(_div)(x, y)


_BINARY = {"Add": _widened(P.add), "Sub": _widened(P.sub), "Mul": _widened(P.mul), "Div": _div_any}
_UNARY = {"Neg": P.neg, "Abs": P.abs, "Exp": P.exp, "Log": P.log, "Sqrt": P.sqrt,
          "Tanh": P.tanh, "Sigmoid": P.sigmoid, "Relu": P.relu}
_COMPARE = {"Equal": (P.equal, (7, 11, 13, 19)), "Less": (P.less, (7, 9, 13)),
            "Greater": (P.greater, (7, 9, 13)), "LessOrEqual": (P.less_equal, (12, 16)),
            "GreaterOrEqual": (P.greater_equal, (12, 16))}


def _binary(fn):
    return lambda n: fn(n.input(0), n.input(1))


def _legacy_operand(n, a, b):
    """B reshaped for a pre-opset-7 binary op (broadcast/axis attrs), or an error."""
    sa, sb = shape_of(a), shape_of(b)
    if not n.attr("broadcast", 0):
        if sa != sb:
            raise n.fail(f"shapes {list(sa)} and {list(sb)} differ and attribute broadcast is 0")
        return b
    axis = n.attr("axis")
    start = len(sa) - len(sb) if axis is None else n.axis(axis, len(sa))
    if start < 0 or start + len(sb) > len(sa) or any(
            d != 1 and d != sa[start + i] for i, d in enumerate(sb)):
        raise n.fail(f"B of shape {list(sb)} does not broadcast onto A of shape {list(sa)}"
                     + ("" if axis is None else f" at axis {axis}"))
    return P.reshape(b, shape=list(sb) + [1] * (len(sa) - start - len(sb)))


def _binary_any_version(fn):
    def convert(n):
        a, b = n.input(0), n.input(1)
        if n.version < 7:
            b = _legacy_operand(n, a, b)
        return fn(a, b)
    return convert


def _same_shapes(n, values):
    """Variadic ops before opset 8 did not broadcast."""
    if n.version < 8 and len({shape_of(v) for v in values}) > 1:
        raise n.fail(f"inputs must have one shape before opset 8, got {[list(shape_of(v)) for v in values]}")
    return values


def _unary(fn):
    return lambda n: fn(n.input(0))


for _name, _fn in _BINARY.items():
    converter(_name, (1, 6, 7, 13, 14), {"broadcast": INT, "axis": INT})(_binary_any_version(_fn))
for _name, _ufn in _UNARY.items():  # not _fn: that one takes two inputs
    # Version 1 only differs by the consumed_inputs hint.
    converter(_name, (1, 6, 13, 14) if _name == "Relu" else (1, 6, 13))(_unary(_ufn))
converter("Sin", (7, 22))(_unary(P.sin))
converter("Cos", (7, 22))(_unary(P.cos))
for _name, (_fn, _versions) in _COMPARE.items():
    converter(_name, _versions)(_binary(_fn))
converter("And", (7,))(_binary(P.logical_and))
converter("Or", (7,))(_binary(P.logical_or))
converter("Xor", (7,))(_binary(P.not_equal))
converter("Not", (1,))(_unary(P.logical_not))
converter("Where", (9, 16))(lambda n: P.select(n.input(0), n.input(1), n.input(2)))


@converter("Pow", (1, 7, 12, 13, 15), {"broadcast": INT, "axis": INT})
def _pow(n):
    x, y = n.input(0), n.input(1)
    if n.version < 7:
        y = _legacy_operand(n, x, y)
    tx, ty = dtype_of(x), dtype_of(y)
    if tx == ty:
        return P.pow(x, y)
    # Since opset 12 the exponent may have another type; the result has the base's.
    if tx.kind == "f":
        return P.pow(x, P.cast(y, dtype=tx))
    wide = np.dtype(np.float64)
    return P.cast(P.pow(P.cast(x, dtype=wide), P.cast(y, dtype=wide)), dtype=tx)


def _fold(fn, values):
    out = values[0]
    for v in values[1:]:
        out = fn(out, v)
    return out


@converter("Max", (1, 6, 8, 12, 13))
def _max(n):
    vals = _same_shapes(n, n.inputs())
    return P.identity(vals[0]) if len(vals) == 1 else _fold(_widened(P.maximum, order=True), vals)


@converter("Min", (1, 6, 8, 12, 13))
def _min(n):
    vals = _same_shapes(n, n.inputs())
    return P.identity(vals[0]) if len(vals) == 1 else _fold(_widened(P.minimum, order=True), vals)


@converter("Sum", (1, 6, 8, 13))
def _sum(n):
    vals = _same_shapes(n, n.inputs())
    return P.identity(vals[0]) if len(vals) == 1 else _fold(P.add, vals)


@converter("Mean", (1, 6, 8, 13))
def _mean(n):
    vals = _same_shapes(n, n.inputs())
    total = P.identity(vals[0]) if len(vals) == 1 else _fold(P.add, vals)
    return P.div(total, np.array(len(vals), dtype=dtype_of(vals[0])))


@converter("Reciprocal", (1, 6, 13))
def _reciprocal(n):
    x = n.input(0)
    return P.div(np.array(1, dtype=dtype_of(x)), x)


@converter("LeakyRelu", (6, 16), {"alpha": FLOAT})
def _leaky_relu(n):
    x = n.input(0)
    alpha = np.array(n.attr("alpha", 0.01), dtype=dtype_of(x))
    return P.select(P.greater_equal(x, np.array(0, dtype=dtype_of(x))), x, P.mul(x, alpha))


@converter("Clip", (1, 6, 11, 12, 13), {"min": FLOAT, "max": FLOAT})
def _clip(n):
    x = n.input(0)
    dt = dtype_of(x)
    if n.version < 11:
        lo = np.array(n.attr("min", -3.4028234663852886e38), dtype=dt)
        hi = np.array(n.attr("max", 3.4028234663852886e38), dtype=dt)
    else:
        if n.has_attr("min") or n.has_attr("max"):
            raise n.fail("min/max are inputs since opset 11, not attributes")
        lo = n.input(1) if n.has(1) else None
        hi = n.input(2) if n.has(2) else None
    # min first, then max, as ONNX defines it (min > max gives max everywhere).
    if lo is not None:
        x = _widened(P.maximum, order=True)(x, lo)
    if hi is not None:
        x = _widened(P.minimum, order=True)(x, hi)
    return x if lo is not None or hi is not None else P.identity(x)
