"""test_bad_input oracles for PackMatMulWeight and FusedMatMulPacked
(cpp/ops/packed_matmul_ops.cc).

The blob is built here in numpy, independently of the C++ packer: the
128-byte header (packed_oracles.header) and the float32 GEMM's B panels of
the ISA in use ([panel][k][nr], zero past n; the tensor sized for 32-wide
panels whatever the ISA), or for n <= nr / 2 the weight's [n, k] rows.
Consumers' draws get blobs whose weight this
module remembers by their bytes; a hostile edit makes the blob unknown and
the oracle raises, as the op must.
"""
import ctypes

import numpy as np
from hypothesis import strategies as st

from opforge.testing.check.inputs import array, quiet
from packed_oracles import HEADER, _hostile, _n, _rows, _up, header

# The float32 GEMM's microkernel panel width per ISA (micro_*.cc).
PANEL_WIDTH = {"avx512": 32, "avx2": 16, "generic": 16}
_WEIGHTS = {}  # blob bytes -> the weight [k, n]


def sgemm_isa():
    """The float32 GEMM microkernel in use: "avx512", "avx2" or "generic" (OPFORGE_SIMD caps it)."""
    from opforge import _pywrap_internal
    fn = ctypes.CDLL(_pywrap_internal.__file__)._ZN7opforge4gemm8SgemmIsaEv
    fn.restype = ctypes.c_char_p
    return fn().decode()


def pack_float(b, transpose_b=False, isa=None):
    """PackMatMulWeight's bytes for the ISA in use (or `isa`)."""
    w = np.asarray(b, np.float32).T if transpose_b else np.asarray(b, np.float32)
    k, n = w.shape
    if k < 1 or n < 1:
        raise ValueError("empty weight")
    isa = isa or sgemm_isa()
    nr = PANEL_WIDTH[isa]
    rows = 2 * n <= nr  # a narrow weight is stored as its [n, k] rows (flag 1)
    if rows:
        body = np.ascontiguousarray(w.T).tobytes()
    else:
        pad = np.zeros((k, _up(n, nr)), np.float32)
        pad[:, :n] = w
        body = pad.reshape(k, -1, nr).transpose(1, 0, 2).tobytes()
    blob = header(3, "sgemm-" + isa, 0, nr, 1, 0, k, n, len(body), int(rows)) + body
    return np.frombuffer(blob.ljust(HEADER + 4 * k * _up(n, 32), b"\0"), np.uint8).copy()


def pack_float_gen(draw, dtype):
    shape = (draw(st.integers(0, 5)), draw(st.integers(0, 40)))
    return (array(draw, dtype, shape, finite=True),), {"transpose_b": draw(st.booleans())}


def fused_mat_mul_packed_gen(draw, dtype):
    k, n = draw(st.integers(1, 6)), draw(st.integers(1, 40))
    b = array(draw, np.float32, (k, n), small=True, finite=True)
    blob = pack_float(b)
    _WEIGHTS[blob.tobytes()] = b
    a = _rows(draw, dtype, k, small=True, finite=True)
    bias = array(draw, dtype, (n,), small=True, finite=True) if draw(st.booleans()) else np.zeros(0, dtype)
    return (a, _hostile(draw, blob), bias), {"n": _n(draw, n),
                                             "activation": draw(st.sampled_from(["none", "relu", "sigmoid"]))}


def fused_mat_mul_packed(a, packed, bias, n, activation="none"):
    b = _WEIGHTS.get(np.asarray(packed).tobytes())
    if b is None:
        raise ValueError("argument 'packed' is not a packed weight of this op")
    if a.shape[-1] != b.shape[0] or n != b.shape[1] or bias.size not in (0, n):
        raise ValueError("shapes")
    y = a.astype(np.float64) @ b.astype(np.float64)
    if bias.size:
        y = y + bias
    if activation == "relu":
        y = np.maximum(y, 0)
    elif activation == "sigmoid":
        y = 1 / (1 + np.exp(-y))
    return y.astype(np.float32)


PACKED_MATMUL_ORACLES = {
    "PackMatMulWeight": (pack_float_gen, quiet(pack_float)),
    "FusedMatMulPacked": (fused_mat_mul_packed_gen, quiet(fused_mat_mul_packed)),
}
