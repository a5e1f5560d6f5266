"""test_bad_input oracles for the packed-weight ops (cpp/ops/packed_weight_ops.cc).

The blobs are built here in numpy, independently of the C++ packers: the
128-byte header (FNV-1a checksum included) and the panel layout of the
8-bit GEMM in use (qmicrokernel.h: groups of `kgroup` depths per column,
`nr` columns per panel, depth blocks of 1024) or the float16 float32
panels. So the Pack*Weight oracles compare bytes, and the consumers' draws
get blobs whose weight this module remembers (`_WEIGHTS`, by the blob's
bytes); a blob drawn with a hostile edit (truncated, a header byte flipped,
the other format) is unknown here, and the oracle raises, as the op must.
"""
import struct

import numpy as np
from hypothesis import strategies as st

from opforge.testing.check.inputs import array, quiet

HEADER = 128
# isa -> (mr, nr, kgroup, wide), as the microkernels declare them (qmicro_*.cc).
LAYOUTS = {"avx512vnni": (12, 32, 4, 0), "avx2": (6, 16, 2, 1), "generic": (4, 16, 4, 0)}
_WEIGHTS = {}  # blob bytes -> ("int8", b, b_zero_point) or ("half", b [k, n])


def _up(v, to):
    return (v + to - 1) // to * to


def _fnv1a(data):
    h = 2166136261
    for byte in data:
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h


def header(fmt, layout, mr, nr, kgroup, wide, k, n, payload, flags):
    head = struct.pack("<4I16s4i2qQI", 0x4B50464F, 1, fmt, HEADER, layout.encode(), mr, nr, kgroup, wide, k, n,
                       payload, flags)
    return head + struct.pack("<I", _fnv1a(head)) + bytes(HEADER - len(head) - 4)


def _isa():
    import opforge.quantization as q
    return q.gemm_isa()


def pack_int8(b, zb):
    """PackMatMulIntegerWeight's bytes for the ISA in use."""
    k, n = b.shape
    if k < 1 or n < 1:
        raise ValueError("empty weight")
    isa = _isa()
    mr, nr, kg, wide = LAYOUTS[isa]
    signed = b.dtype == np.int8
    bs = b.astype(np.int64) - (0 if signed else 128)  # u8 flipped to s8: the sign bit XOR
    z = np.broadcast_to(np.asarray(zb, np.int64).reshape(-1), (n,)) - (0 if signed else 128)
    colsum = (bs.sum(axis=0) % 2 ** 32).astype(np.uint32)
    panels = []
    for pc in range(0, k, 1024):
        kc = min(1024, k - pc)
        blk = np.zeros((_up(kc, kg), _up(n, nr)), np.int64)
        blk[:kc, :n] = bs[pc:pc + kc]
        # [group][column][t] within each panel of nr columns
        blk = blk.reshape(-1, kg, _up(n, nr) // nr, nr).transpose(2, 0, 3, 1)
        panels.append(blk.astype(np.int16 if wide else np.int8).tobytes())
    sums = _up(4 * n, 64)
    body = (z.astype(np.int32).tobytes().ljust(sums, b"\0") + colsum.tobytes().ljust(sums, b"\0")
            + b"".join(panels))
    total = HEADER + 2 * sums + 2 * _up(n, 32) * _up(k, 4)
    blob = header(1, isa, mr, nr, kg, wide, k, n, len(body), int(signed)) + body
    return np.frombuffer(blob.ljust(total, b"\0"), np.uint8).copy()


def pack_half(b, transpose_b=False):
    """PackHalfMatMulWeight's bytes."""
    w = np.asarray(b).T if transpose_b else np.asarray(b)
    k, n = w.shape
    if k < 1 or n < 1:
        raise ValueError("empty weight")
    pad = np.zeros((k, _up(n, 32)), np.float32)
    pad[:, :n] = w.astype(np.float32)
    body = pad.reshape(k, -1, 32).transpose(1, 0, 2).tobytes()
    return np.frombuffer(header(2, "f32x32", 0, 32, 1, 0, k, n, len(body), 0) + body, np.uint8).copy()


def _hostile(draw, blob):
    """Mostly the blob; sometimes truncated or with a header byte changed. (Not `integers(0, 9) == 0`:
    hypothesis draws a lower bound far more often than one time in ten, and half the blobs were broken.)"""
    kind = draw(st.sampled_from(["blob"] * 8 + ["truncated", "flipped"]))
    if kind == "truncated":
        return blob[:draw(st.integers(0, len(blob) - 1))].copy()
    if kind == "flipped":
        bad = blob.copy()
        bad[draw(st.integers(0, 79))] ^= np.uint8(1 << draw(st.integers(0, 7)))
        return bad
    return blob


def _lookup(blob, kind):
    w = _WEIGHTS.get(np.asarray(blob).tobytes())
    if w is None or w[0] != kind:
        raise ValueError("argument 'packed' is not a packed weight of this op")
    return w[1:]


def pack_int_gen(draw, dtype):
    k, n = draw(st.integers(0, 5)), draw(st.integers(0, 5))
    b = array(draw, dtype, (k, n))
    info = np.iinfo(dtype)
    per_col = draw(st.booleans()) and n > 1
    zb = np.asarray(draw(st.lists(st.integers(info.min, info.max), min_size=n if per_col else 1,
                                  max_size=n if per_col else 1)), dtype).reshape((n,) if per_col else ())
    return (b, zb), {}


def _int_weight(draw):
    tb = draw(st.sampled_from([np.uint8, np.int8]))
    k, n = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    b = array(draw, tb, (k, n))
    zb = np.asarray(draw(st.integers(np.iinfo(tb).min, np.iinfo(tb).max)), tb)
    blob = pack_int8(b, zb)
    _WEIGHTS[blob.tobytes()] = ("int8", b, zb)
    return b, _hostile(draw, blob)


def _rows(draw, dtype, k, **kw):
    k = k + 1 if draw(st.integers(0, 9)) == 0 else k  # sometimes the wrong depth
    return array(draw, dtype, draw(st.sampled_from([(), (2,)])) + (draw(st.integers(0, 3)), k), **kw)


def _n(draw, n):
    return n + 1 if draw(st.integers(0, 9)) == 0 else n


def mat_mul_integer_packed_gen(draw, dtype):
    b, blob = _int_weight(draw)
    a = _rows(draw, dtype, b.shape[0])
    za = np.asarray(draw(st.integers(np.iinfo(dtype).min, np.iinfo(dtype).max)), dtype)
    return (a, za, blob), {"n": _n(draw, b.shape[1])}


def mat_mul_integer_packed(a, a_zero_point, packed, n):
    b, zb = _lookup(packed, "int8")
    if a.shape[-1] != b.shape[0] or n != b.shape[1]:
        raise ValueError("shapes")
    prod = (a.astype(np.int64) - int(a_zero_point)) @ (b.astype(np.int64) - np.asarray(zb, np.int64))
    return prod.astype(np.int32)


def dynamic_quantize_mat_mul_gen(draw, dtype):
    b, blob = _int_weight(draw)
    k, n = b.shape
    x = _rows(draw, dtype, k, small=draw(st.booleans()))
    scales = [0.5, 0.01, 2.0] + ([0.0, np.nan] if draw(st.integers(0, 9)) == 0 else [])
    sb = np.asarray([draw(st.sampled_from(scales)) for _ in range(n if draw(st.booleans()) else 1)], np.float32)
    bias = array(draw, np.float32, (n,), small=True, finite=True) if draw(st.booleans()) else np.zeros(0, np.float32)
    return (x, blob, sb.reshape(()) if sb.size == 1 and draw(st.booleans()) else sb, bias), \
        {"n": _n(draw, n), "activation": draw(st.sampled_from(["none", "relu"]))}


def dynamic_quantize_mat_mul(x, packed, b_scale, bias, n, activation="none"):
    from quant_oracles import dynamic_quantize_linear
    b, zb = _lookup(packed, "int8")
    if x.shape[-1] != b.shape[0] or n != b.shape[1]:
        raise ValueError("shapes")
    if b_scale.size not in (1, n) or bias.size not in (0, n):
        raise ValueError("shapes")
    if not np.all(np.isfinite(b_scale)) or np.any(b_scale == 0):
        raise ValueError("scale")
    xq, xs, xz = dynamic_quantize_linear(x)
    acc = ((xq.astype(np.int64) - int(xz)) @ (b.astype(np.int64) - np.asarray(zb, np.int64))).astype(np.int32)
    y = acc.astype(np.float32) * (np.float32(xs) * b_scale.reshape(-1)).astype(np.float32)
    if bias.size:
        y = y + bias
    return np.maximum(y, np.float32(0)) if activation == "relu" else y


def pack_half_gen(draw, dtype):
    shape = (draw(st.integers(0, 5)), draw(st.integers(0, 40)))
    return (array(draw, dtype, shape, finite=True),), {"transpose_b": draw(st.booleans())}


def half_mat_mul_packed_gen(draw, dtype):
    k, n = draw(st.integers(1, 6)), draw(st.integers(1, 40))
    b = array(draw, np.float16, (k, n), small=True, finite=True)
    blob = pack_half(b)
    _WEIGHTS[blob.tobytes()] = ("half", b)
    a = _rows(draw, dtype, k, small=True, finite=True)
    bias = array(draw, dtype, (n,), small=True, finite=True) if draw(st.booleans()) else np.zeros(0, dtype)
    return (a, _hostile(draw, blob), bias), {"n": _n(draw, n), "activation": draw(st.sampled_from(["none", "relu"]))}


def half_mat_mul_packed(a, packed, bias, n, activation="none"):
    b, = _lookup(packed, "half")
    if a.shape[-1] != b.shape[0] or n != b.shape[1] or bias.size not in (0, n):
        raise ValueError("shapes")
    y = a.astype(np.float32) @ b.astype(np.float32)
    if bias.size:
        y = y + bias.astype(np.float32)
    y = np.maximum(y, np.float32(0)) if activation == "relu" else y
    return y.astype(a.dtype)  # float32 math; test_half_kernels rounds float32 answers itself


PACKED_ORACLES = {
    "PackMatMulIntegerWeight": (pack_int_gen, quiet(pack_int8)),
    "MatMulIntegerPacked": (mat_mul_integer_packed_gen, quiet(mat_mul_integer_packed)),
    "DynamicQuantizeMatMul": (dynamic_quantize_mat_mul_gen, quiet(dynamic_quantize_mat_mul)),
    "PackHalfMatMulWeight": (pack_half_gen, quiet(pack_half)),
    "HalfMatMulPacked": (half_mat_mul_packed_gen, quiet(half_mat_mul_packed)),
}
