"""Linear layers over a constant float32 weight as FusedMatMulPacked.

ONNX `Gemm` and `MatMul [-> Add] [-> activation]` nodes whose weight is a
graph constant get it packed once (PackMatMulWeight: the GEMM
microkernel's B panels, as onnxruntime prepacks its constant initializers);
each run then reads the panels in place instead of packing (or reading
strided) the weight on every call. The blob is made once per weight array
(eager runs call the converters again) and enters a compiled graph as a
constant. OPFORGE_ONNX_PACK_MATMUL=0 turns this off, for comparison.
"""
import os
import weakref

import numpy as np

from opforge import ops as P
from opforge.onnx._node import dtype_of, shape_of

_F32 = np.dtype(np.float32)
_ACTIVATIONS = ("none", "relu", "gelu", "silu", "sigmoid")
# id(weight) -> (weakref to it, transpose_b, blob): freed with the weight.
_packed: dict[int, tuple] = {}


def _blob(w, trans_b):
    from opforge.quantization._functional import pack_eagerly
    hit = _packed.get(id(w))
    if hit is not None and hit[0]() is w and hit[1] == trans_b:
        return hit[2]
    blob = pack_eagerly(P.pack_mat_mul_weight, np.ascontiguousarray(w), transpose_b=trans_b)
    key = id(w)
    _packed[key] = (weakref.ref(w), trans_b, blob)
    weakref.finalize(w, _packed.pop, key, None)
    return blob


def packed_linear(a, w, trans_b, bias, activation="none"):
    """activation(a @ op(w) + bias) on w packed once, or None where it does not qualify.

    a: the rows [..., k] (float32); w: the weight as a numpy array (a graph
    constant) or None; bias: [n] float32 or None.
    """
    if os.environ.get("OPFORGE_ONNX_PACK_MATMUL", "1") == "0":
        return None
    if (not isinstance(w, np.ndarray) or w.dtype != _F32 or w.ndim != 2 or w.size == 0
            or activation not in _ACTIVATIONS or dtype_of(a) != _F32):
        return None
    k, n = (w.shape[1], w.shape[0]) if trans_b else w.shape
    sa = list(shape_of(a))
    if not sa or sa[-1] != k:
        return None
    if bias is None:
        bias = np.zeros(0, np.float32)
    elif dtype_of(bias) != _F32 or list(shape_of(bias)) != [n]:
        return None
    return P.fused_mat_mul_packed(a, _blob(w, bool(trans_b)), bias, n=int(n), activation=activation)
