"""test_bad_input oracles for the quantization ops (robustness_oracles.py merges them into ORACLES).

numpy computes what ONNX specifies, in the same float32 steps as the kernels
(x / scale, round half to even, saturate; requantization by a float32
multiplier), so answers match exactly. Scales are sometimes 0, NaN or
infinite (the ops must raise); shapes are small and sometimes empty.
"""
import numpy as np
from hypothesis import strategies as st

from opforge.testing.check.inputs import array, quiet

_SCALES = [0.5, 0.25, 2.0, 0.1, 3.0, 1e-3]
_BAD = [0.0, np.nan, np.inf]


def _scale(draw, n=None):
    vals = st.sampled_from(_SCALES + (_BAD if draw(st.integers(0, 9)) == 0 else []))
    if n is None:
        return np.float32(draw(vals))
    return np.array([draw(vals) for _ in range(n)], np.float32)


def _check_scale(*scales):
    for s in scales:
        s = np.asarray(s)
        if not np.all(np.isfinite(s)) or np.any(s == 0):
            raise ValueError("scale must be finite and non-zero")


def _q(t, z, dtype):
    info = np.iinfo(dtype)
    v = np.rint(t).astype(np.float64) + np.asarray(z, np.float64)
    v = np.where(np.isnan(v), info.min, v)
    return np.clip(v, info.min, info.max).astype(dtype)


def _zp(draw, dtype, shape):
    info = np.iinfo(dtype)
    return np.asarray(draw(st.lists(st.integers(info.min, info.max), min_size=int(np.prod(shape)),
                                    max_size=int(np.prod(shape)))), dtype).reshape(shape)


def _int(draw, dtype, shape):
    return array(draw, dtype, shape)


def _shape(draw, rank_min=1, rank_max=3):
    return tuple(draw(st.lists(st.integers(0, 4), min_size=rank_min, max_size=rank_max)))


def _view(s, ndim, axis):
    if s.ndim == 0 or s.size == 1:
        return s.reshape(())
    v = [1] * ndim
    v[axis] = -1
    return s.reshape(v)


def quantize_gen(draw, dtype):
    shape = _shape(draw)
    x = array(draw, dtype, shape)
    qt = draw(st.sampled_from([np.uint8, np.int8, np.uint16, np.int16]))
    if draw(st.booleans()) and shape and shape[-1] > 1:
        axis = draw(st.sampled_from([-1, len(shape) - 1]))
        return (x, _scale(draw, shape[-1]), _zp(draw, qt, (shape[-1],))), {"axis": axis}
    return (x, _scale(draw), _zp(draw, qt, ())), {}


def quantize_linear(x, y_scale, y_zero_point, axis=1):
    _check_scale(y_scale)
    return _q(x / _view(y_scale, x.ndim, axis), _view(y_zero_point, x.ndim, axis), y_zero_point.dtype)


def dequantize_gen(draw, dtype):
    dtype = np.dtype(dtype)
    shape = _shape(draw)
    x = _int(draw, dtype, shape)
    if dtype == np.int32:  # onnxruntime's int32 input: small values, zero point 0
        x = (x % 1000).astype(np.int32)
    if draw(st.booleans()) and shape and shape[0] > 1:
        z = _zp(draw, dtype, (shape[0],)) if dtype != np.int32 else np.zeros(shape[0], np.int32)
        return (x, _scale(draw, shape[0]), z), {"axis": 0}
    return (x, _scale(draw), _zp(draw, dtype, ()) if dtype != np.int32 else np.int32(7)), {}


def dequantize_linear(x, x_scale, x_zero_point, axis=1):
    _check_scale(x_scale)
    # x - zero_point in int32, wrapping as the kernel (and onnxruntime) do; 8/16-bit never wraps.
    d = (x.astype(np.int64) - _view(np.asarray(x_zero_point), x.ndim, axis).astype(np.int64))
    d = d.astype(np.int32).astype(np.float32)
    return (d * _view(x_scale, x.ndim, axis)).astype(np.float32)


def dynamic_gen(draw, dtype):
    return (array(draw, dtype, _shape(draw), small=draw(st.booleans())),), {}


def dynamic_quantize_linear(x):
    if not np.all(np.isfinite(x)):
        raise ValueError("NaN or infinite")
    lo = np.float32(min(0.0, float(x.min()) if x.size else 0.0))
    hi = np.float32(max(0.0, float(x.max()) if x.size else 0.0))
    s = np.float32(1) if hi == lo else np.float32((hi - lo) / np.float32(255))
    z = _q(np.float32(0) - lo / s, 0, np.uint8)
    return _q(x / s, z, np.uint8), np.asarray(s, np.float32), np.asarray(z, np.uint8)


def matmul_integer_gen(draw, dtype):
    m, k, n = (draw(st.integers(0, 5)) for _ in range(3))
    tb = draw(st.sampled_from([np.uint8, np.int8]))
    batch = draw(st.sampled_from([(), (2,)]))
    a, b = _int(draw, dtype, batch + (m, k)), _int(draw, tb, (k, n))
    za = _zp(draw, dtype, (m,) if draw(st.booleans()) and not batch and m > 1 else ())
    zb = _zp(draw, tb, (n,) if draw(st.booleans()) and n > 1 else ())
    return (a, b, za, zb), {}


def _mm(a, b, za, zb):
    za = np.asarray(za, np.int64)
    if za.ndim == 1:
        za = za[:, None]
    return np.matmul(a.astype(np.int64) - za, b.astype(np.int64) - np.asarray(zb, np.int64))


def mat_mul_integer(a, b, a_zero_point, b_zero_point):
    return _mm(a, b, a_zero_point, b_zero_point).astype(np.int32)


def qlinear_matmul_gen(draw, dtype):
    (a, b, za, zb), _ = matmul_integer_gen(draw, dtype)
    ty = draw(st.sampled_from([np.uint8, np.int8]))
    sa = _scale(draw, za.size) if za.ndim else _scale(draw)
    sb = _scale(draw, zb.size) if zb.ndim else _scale(draw)
    return (a, sa, za, b, sb, zb, _scale(draw), _zp(draw, ty, ())), {}


def _requant(acc, mult, zy):
    return _q(acc.astype(np.float32) * mult, zy, zy.dtype)


def q_linear_mat_mul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    _check_scale(a_scale, b_scale, y_scale)
    sa = np.asarray(a_scale, np.float32)
    sa = sa[:, None] if sa.ndim == 1 else sa
    mult = (sa * np.asarray(b_scale, np.float32) / np.float32(y_scale)).astype(np.float32)
    return _requant(_mm(a, b, a_zero_point, b_zero_point).astype(np.int32), mult, y_zero_point)


def conv_integer_gen(draw, dtype):
    groups = draw(st.integers(1, 2))
    c, o = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pads = draw(st.lists(st.integers(0, 1), min_size=4, max_size=4))
    strides = draw(st.lists(st.integers(1, 2), min_size=2, max_size=2))
    h, w = kh + draw(st.integers(0, 3)), kw + draw(st.integers(0, 3))
    tw = draw(st.sampled_from([np.uint8, np.int8]))
    x, f = _int(draw, dtype, (draw(st.integers(0, 2)), c, h, w)), _int(draw, tw, (o, c // groups, kh, kw))
    wz = _zp(draw, tw, (o,) if draw(st.booleans()) and o > 1 else ())
    return (x, f, _zp(draw, dtype, ()), wz), {"strides": strides, "pads": pads, "groups": groups}


def _conv(x, w, xz, wz, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.full((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]), int(xz), np.int64)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    xp -= int(xz)
    wz = np.asarray(wz, np.int64)
    wf = w.astype(np.int64) - (wz.reshape(-1, 1, 1, 1) if wz.ndim else wz)
    oh = (xp.shape[2] - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (xp.shape[3] - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    y = np.zeros((n, o, oh, ow), np.int64)
    og = o // groups
    for g in range(groups):
        for a in range(kh):
            for b in range(kw):
                r0, c0 = a * dilations[0], b * dilations[1]
                patch = xp[:, g * cg:(g + 1) * cg, r0:r0 + strides[0] * (oh - 1) + 1:strides[0],
                           c0:c0 + strides[1] * (ow - 1) + 1:strides[1]]
                y[:, g * og:(g + 1) * og] += np.einsum("ncij,oc->noij", patch, wf[g * og:(g + 1) * og, :, a, b])
    return y


def conv_integer(x, w, x_zero_point, w_zero_point, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1):
    return _conv(x, w, x_zero_point, w_zero_point, strides, pads, dilations, groups).astype(np.int32)


def qlinear_conv_gen(draw, dtype):
    (x, f, xz, wz), kw = conv_integer_gen(draw, dtype)
    ty = draw(st.sampled_from([np.uint8, np.int8]))
    o = f.shape[0]
    ws = _scale(draw, o) if wz.ndim else _scale(draw)
    bias = np.asarray(draw(st.lists(st.integers(-1000, 1000), min_size=o, max_size=o)), np.int32)
    return (x, _scale(draw), xz, f, ws, wz, _scale(draw), _zp(draw, ty, ()), bias), kw


def q_linear_conv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, bias,
                  strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1):
    _check_scale(x_scale, w_scale, y_scale)
    acc = _conv(x, w, x_zero_point, w_zero_point, strides, pads, dilations, groups) + bias.reshape(1, -1, 1, 1)
    ws = np.asarray(w_scale, np.float32)
    mult = (np.float32(x_scale) * (ws.reshape(1, -1, 1, 1) if ws.ndim else ws) / np.float32(y_scale))
    return _requant(acc.astype(np.int32), mult.astype(np.float32), y_zero_point)


QUANT_ORACLES = {
    "QuantizeLinear": (quantize_gen, quiet(quantize_linear)),
    "DequantizeLinear": (dequantize_gen, quiet(dequantize_linear)),
    "DynamicQuantizeLinear": (dynamic_gen, quiet(dynamic_quantize_linear)),
    "MatMulInteger": (matmul_integer_gen, quiet(mat_mul_integer)),
    "QLinearMatMul": (qlinear_matmul_gen, quiet(q_linear_mat_mul)),
    "ConvInteger": (conv_integer_gen, quiet(conv_integer)),
    "QLinearConv": (qlinear_conv_gen, quiet(q_linear_conv)),
}
