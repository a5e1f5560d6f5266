"""ONNX math beyond _ops_elementwise: the special group's ops, activations,
Mod, and the reductions composed of opforge ops (ReduceL1, ReduceL2,
ReduceLogSumExp, ReduceSumSquare).

Composite operators are written with existing wrappers, so they run eagerly
and in graphs alike and differentiate through the parts' gradients.
"""

import numpy as np

from opforge import ops as P
from opforge.onnx._node import FLOAT, INT, INTS, converter, dtype_of, shape_of
from opforge.onnx._ops_nn import _reduce


def _unary(fn):
    return lambda n: fn(n.input(0))


def _const(x, value):
    return np.array(value, dtype=dtype_of(x))


converter("Erf", (9, 13))(_unary(P.erf))
converter("Floor", (1, 6, 13))(_unary(P.floor))
converter("Ceil", (1, 6, 13))(_unary(P.ceil))
converter("Round", (11, 22))(_unary(P.round))
converter("Sign", (9, 13))(_unary(P.sign))
converter("IsNaN", (9, 13, 20))(_unary(P.is_nan))


@converter("IsInf", (10, 20), {"detect_negative": INT, "detect_positive": INT})
def _is_inf(n):
    x = n.input(0)
    inf = P.is_inf(x)
    neg, pos = n.attr("detect_negative", 1), n.attr("detect_positive", 1)
    if neg and pos:
        return inf
    if not neg and not pos:
        return P.logical_and(inf, np.zeros((), dtype=np.bool_))
    side = P.greater(x, _const(x, 0)) if pos else P.less(x, _const(x, 0))
    return P.logical_and(inf, side)


def _trunc(v):
    return P.mul(P.sign(v), P.floor(P.abs(v)))


@converter("Mod", (10, 13, 28), {"fmod": INT})
def _mod(n):
    x, y = n.input(0), n.input(1)
    dt = dtype_of(x)
    fmod = n.attr("fmod", 0)
    if dt.kind == "f" and not fmod and n.version < 28:
        raise n.fail("fmod must be 1 for floating point inputs before opset 28")
    if dt == np.int64:  # exact: the remainder of the truncating division, moved to y's sign unless fmod
        from opforge.onnx._ops_elementwise import _div_int64
        r = P.sub(x, P.mul(_div_int64(x, y), y))
        if fmod:
            return r
        zero = np.zeros((), dt)
        wrong = P.logical_and(P.not_equal(r, zero), P.not_equal(P.less(r, zero), P.less(y, zero)))
        return P.select(wrong, P.add(r, y), r)
    wide = np.dtype(np.float64) if dt.kind in "iu" else dt
    a, b = (P.cast(x, dtype=wide), P.cast(y, dtype=wide)) if wide != dt else (x, y)
    q = P.div(a, b)
    # fmod takes the dividend's sign (C fmod), otherwise the divisor's (Python %).
    r = P.sub(a, P.mul(_trunc(q) if fmod else P.floor(q), b))
    if dt.kind == "f":
        # A finite x over an infinite y: x (fmod, or x of y's sign, or 0), else y.
        zero = _const(x, 0)
        keep_x = P.logical_not(P.is_inf(a)) if fmod else P.logical_and(
            P.logical_not(P.is_inf(a)), P.logical_or(P.equal(a, zero),
                                                     P.equal(P.less(a, zero), P.less(b, zero))))
        inf_y = P.logical_and(P.is_inf(b), P.logical_not(P.is_inf(a)))
        r = P.select(inf_y, P.select(keep_x, a, b), r)
    return P.cast(r, dtype=dt) if wide != dt else r


# ---- activations -----------------------------------------------------------

def _softplus(x):
    # log(1 + exp(x)) without overflow: relu(x) + log(1 + exp(-|x|)).
    return P.add(P.relu(x), P.log(P.add(_const(x, 1), P.exp(P.neg(P.abs(x))))))


@converter("Elu", (1, 6, 22), {"alpha": FLOAT})
def _elu(n):
    x = n.input(0)
    alpha = _const(x, n.attr("alpha", 1.0))
    return P.select(P.less(x, _const(x, 0)), P.mul(alpha, P.sub(P.exp(x), _const(x, 1))), x)


@converter("Selu", (1, 6, 22), {"alpha": FLOAT, "gamma": FLOAT})
def _selu(n):
    x = n.input(0)
    alpha = _const(x, n.attr("alpha", 1.67326319217681884765625))
    gamma = _const(x, n.attr("gamma", 1.05070102214813232421875))
    neg = P.sub(P.mul(alpha, P.exp(x)), alpha)
    return P.mul(gamma, P.select(P.less_equal(x, _const(x, 0)), neg, x))


converter("Softplus", (1, 22))(_unary(_softplus))
converter("Mish", (18, 22))(lambda n: P.mul(n.input(0), P.tanh(_softplus(n.input(0)))))


@converter("PRelu", (1, 6, 7, 9, 16))
def _prelu(n):
    x, slope = n.input(0), n.input(1)
    xs, ss = shape_of(x), shape_of(slope)
    if n.version < 7 and len(ss) == 1 and len(xs) >= 2 and ss[0] == xs[1] != 1:
        # Before opset 7 a 1-D slope of size C was per channel (axis 1).
        slope = P.reshape(slope, shape=[ss[0]] + [1] * (len(xs) - 2))
    return P.select(P.less(x, _const(x, 0)), P.mul(x, slope), x)


# ---- reductions composed of Sum/Max ------------------------------------------

def _l1(x, axis, keepdims):
    return P.sum(P.abs(x), axis=axis, keepdims=keepdims)


def _l2(x, axis, keepdims):
    return P.sqrt(P.sum(P.square(x), axis=axis, keepdims=keepdims))


def _sum_square(x, axis, keepdims):
    return P.sum(P.square(x), axis=axis, keepdims=keepdims)


def _log_sum_exp(x, axis, keepdims):
    shape = shape_of(x)
    if any(shape[a] == 0 for a in axis):  # log(0): -inf over nothing, as ONNX defines it
        out = [1 if i in axis else d for i, d in enumerate(shape) if keepdims or i not in axis]
        return np.full(out, -np.inf, dtype=dtype_of(x))
    # max-shifted, so large inputs do not overflow exp.
    m = P.max(x, axis=axis, keepdims=True)
    s = P.log(P.sum(P.exp(P.sub(x, m)), axis=axis, keepdims=True))
    out = P.add(s, m)
    if not keepdims:
        shape = [d for i, d in enumerate(out.shape) if i not in axis]
        out = P.reshape(out, shape=[int(d) for d in shape])
    return out


_COMPOSED_REDUCE = {"ReduceL1": _l1, "ReduceL2": _l2, "ReduceSumSquare": _sum_square,
                    "ReduceLogSumExp": _log_sum_exp}
for _name, _fn in _COMPOSED_REDUCE.items():
    converter(_name, (1, 11, 13, 18) + ((28,) if _name == "ReduceLogSumExp" else ()), {"axes": INTS, "keepdims": INT, "noop_with_empty_axes": INT})(
        _reduce(_fn, 18))
