"""ONNX bitwise operators (BitwiseAnd/Or/Xor/Not, BitShift, BitCast) onto the
bitwise op group, and the inverse trigonometric and hyperbolic functions
onto the trig group."""

from opforge import ops as P
from opforge.onnx import _dtypes
from opforge.onnx._node import INT, STRING, converter, dtype_of

converter("BitwiseAnd", (18,))(lambda n: P.bitwise_and(n.input(0), n.input(1)))
converter("BitwiseOr", (18,))(lambda n: P.bitwise_or(n.input(0), n.input(1)))
converter("BitwiseXor", (18,))(lambda n: P.bitwise_xor(n.input(0), n.input(1)))
converter("BitwiseNot", (18,))(lambda n: P.bitwise_not(n.input(0)))


def _check_shift(n):
    if n.attr("direction") not in ("LEFT", "RIGHT"):
        raise n.fail(f"direction must be 'LEFT' or 'RIGHT', got {n.attr('direction')!r}")


# Version 11 takes unsigned types only, for which version 28's rules agree.
converter("BitShift", (11, 28), {"direction": STRING}, check=_check_shift)(
    lambda n: P.bit_shift(n.input(0), n.input(1), direction=n.attr("direction")))


@converter("BitCast", (26,), {"to": INT})
def _bitcast(n):
    to = _dtypes.to_numpy(n.attr("to"), f"node {n.where} attribute 'to'")
    x = n.input(0)
    if to.itemsize != dtype_of(x).itemsize:
        raise n.fail(f"to ({to}) must be as wide as the input ({dtype_of(x)})")
    return P.bit_cast(x, dtype=to)


for _name, _versions in (("Asin", (7, 22)), ("Acos", (7, 22)), ("Atan", (7, 22)),
                         ("Asinh", (9, 22)), ("Acosh", (9, 22)), ("Atanh", (9, 22))):
    converter(_name, _versions)((lambda fn: lambda n: fn(n.input(0)))(getattr(P, _name.lower())))
