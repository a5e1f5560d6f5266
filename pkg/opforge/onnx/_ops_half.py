"""float16 Gemm (a Linear layer) over a weight packed once; float16 Conv over a weight widened once.

A float16 Gemm with a constant weight, alpha = beta = 1, no transA and a
1-D bias (or none), optionally with its following Relu (fuse_activations),
imports as HalfMatMulPacked: the weight widened once into float32 panels
(PackHalfMatMulWeight), the activations widened while packed, float32
accumulation and one rounding after the bias and the activation. Anything
else returns None and the caller goes its general way.
"""
import numpy as np

from opforge import ops as P
from opforge.onnx._node import dtype_of, shape_of
from opforge.quantization._functional import pack_eagerly

_F16 = np.dtype(np.float16)


def _const(ctx, i):
    v = ctx.known(i)
    if v is None and ctx.has(i):
        v = ctx._env.get(ctx._inputs[i])
    return v if isinstance(v, np.ndarray) else None


def widened_weight(n, x):
    """Conv node `n`'s weight as float32 when x is float16 and the weight a float16 constant, else None.

    The convolution then runs in float32 between two Casts: the same math as
    the float16 kernel (widen, float32 kernel, round once), but the weight is
    widened once at import instead of on every call (11.7M values for ResNet-18).
    """
    w = _const(n, 1)
    if dtype_of(x) != _F16 or w is None or w.dtype != _F16:
        return None
    return w.astype(np.float32)


def widen_bias(n, b):
    """The float16 bias b (input 2 of n) as float32: converted here when constant, else a Cast."""
    c = _const(n, 2)
    return c.astype(np.float32) if c is not None else P.cast(b, dtype="float32")


def half_gemm(n, activation=None):
    """HalfMatMulPacked for Gemm node context `n`, or None when the node does not qualify."""
    a, w = n.input(0), _const(n, 1)
    if (dtype_of(a) != _F16 or w is None or w.dtype != _F16 or w.ndim != 2 or len(shape_of(a)) != 2
            or n.attr("transA", 0) or n.attr("alpha", 1.0) != 1.0 or n.attr("beta", 1.0) != 1.0
            or activation not in (None, "relu")):
        return None
    trans_b = bool(n.attr("transB", 0))
    k, cols = (w.shape[1], w.shape[0]) if trans_b else w.shape
    if shape_of(a)[1] != k:
        return None
    if n.has(2):
        bias = n.input(2)
        if dtype_of(bias) != _F16 or list(shape_of(bias)) != [cols]:
            return None
    else:
        bias = np.zeros(0, np.float16)
    packed = pack_eagerly(P.pack_half_mat_mul_weight, np.ascontiguousarray(w), transpose_b=trans_b)
    return P.half_mat_mul_packed(a, packed, bias, n=int(cols), activation=activation or "none")
