"""test_bad_input oracles for PackConv2DFilter, Conv2DPacked, Conv2DPackedAdd and Conv2DPackedConcat
(cpp/ops/packed_conv_ops.cc).

The blobs are built here in numpy, independently of the C++ packer: the
128-byte header of packed_oracles.py (format 3) and the float32 GEMM's A
panels (kc-deep blocks of 256, mr-high panels of the microkernel in use).
The filters drawn here are too small for the Winograd transform (fewer than
16 channels), so every blob is exact bytes. Conv2DPacked's draws get blobs
whose filter this module remembers; a hostile one (truncated, a header byte
flipped) is unknown, and the oracle raises, as the op must.
"""
import numpy as np
from hypothesis import strategies as st

import vision_reference as ref
from opforge.testing.check.inputs import array, quiet
from packed_oracles import HEADER, _hostile, header
from vision_oracles import _WINDOW, _broken, _rank, _spatial, _window_attrs

MR = {"avx512": 12, "avx2": 6, "generic": 4}  # the f32 microkernels' rows (cpp/kernels/gemm/micro_*.cc)
_FILTERS = {}  # blob bytes -> filter


def panel_layout():
    """The float32 GEMM microkernel whose panels PackConv2DFilter writes ("avx512", "avx2" or "generic")."""
    import ctypes

    from opforge import _pywrap_internal
    fn = ctypes.CDLL(_pywrap_internal.__file__)._ZN7opforge4conv11PanelLayoutEv
    fn.restype = ctypes.c_char_p
    return fn().decode()


NR = {"avx512": 32, "avx2": 16, "generic": 16}  # their columns: a columns=True blob's panels are nr filters wide


def pack_conv(f, winograd=True, columns=False):
    """PackConv2DFilter's bytes for a filter without the Winograd transform (under 16 channels or not 3x3)."""
    f = np.asarray(f)
    if f.ndim != 4 or min(f.shape) < 1 or f.dtype.type is not np.float32:
        raise ValueError("filter")
    o, c, kh, kw = f.shape
    if winograd and kh == kw == 3 and o >= 16 and c >= 16:
        raise NotImplementedError("the Winograd transform is not exact in numpy")
    layout = panel_layout()
    mr, k = MR[layout], c * kh * kw
    r = NR[layout] if columns else mr  # filters per panel
    mp = (o + r - 1) // r * r
    a = np.zeros((mp, k), np.float32)
    a[:o] = f.reshape(o, k)
    body = b"".join(a[:, pc:pc + 256].reshape(mp // r, r, -1).transpose(0, 2, 1).tobytes()
                    for pc in range(0, k, 256))
    total = HEADER + 4 * ((o + 31) if columns else (o + 15)) * k
    blob = header(3, layout, mr, NR[layout] if columns else 0, kh, kw, k, o, len(body), 8 if columns else 0) + body
    return np.frombuffer(blob.ljust(total, b"\0"), np.uint8).copy()


def pack_gen(draw, dtype):
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=4, max_size=4)))
    if draw(st.integers(0, 9)) == 0:
        shape = shape[:draw(st.integers(0, 3))]
    return (array(draw, dtype, shape),), {"winograd": draw(st.booleans()), "columns": draw(st.booleans())}


def conv_packed_gen(draw, dtype):
    f_shape = (draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    f = array(draw, dtype, f_shape, small=True, finite=True)
    blob = pack_conv(f, columns=draw(st.booleans()))
    _FILTERS[blob.tobytes()] = f
    bad = _broken(draw, _WINDOW + ("channels", "bias", "filter_shape"))
    c = f_shape[1] + (draw(st.sampled_from([0, 1])) if bad == "channels" else 0)
    strides, pads, dil = _window_attrs(draw, bad)
    x_shape = _rank(draw, bad, (draw(st.integers(0, 2)), c) + _spatial(draw, bad, f_shape[2:], pads, dil))
    o = f_shape[0]
    bias = array(draw, dtype, (draw(st.sampled_from([0, o + 1])) if bad == "bias" else o,), small=True, finite=True)
    fs = list(f_shape)
    if bad == "filter_shape":
        fs[draw(st.integers(0, 3))] += 1
    kw = {"filter_shape": fs, "strides": strides, "pads": pads, "dilations": dil,
          "activation": draw(st.sampled_from(["none", "relu", "sigmoid", "silu", "hardswish", "gelu"]))}
    return (array(draw, dtype, x_shape, small=True, finite=True), _hostile(draw, blob), bias), kw


def conv_packed_add_gen(draw, dtype):
    """Conv2DPacked's draws plus a residual: mostly the output's shape, sometimes one dim off or another rank."""
    (x, blob, bias), kw = conv_packed_gen(draw, dtype)
    f = _FILTERS.get(np.asarray(blob).tobytes())
    shape = [1, 1, 1, 1]
    try:  # the output's shape where the attrs are well formed (the drawn ones may not be)
        (s0, s1), (d0, d1), p = kw["strides"], kw["dilations"], kw["pads"]
        n, _, h, w = np.shape(x)
        shape = [n, f.shape[0], (h + p[0] + p[2] - d0 * (f.shape[2] - 1) - 1) // max(s0, 1) + 1,
                 (w + p[1] + p[3] - d1 * (f.shape[3] - 1) - 1) // max(s1, 1) + 1]
        shape = [max(d, 0) for d in shape]
    except (ValueError, TypeError, AttributeError, IndexError):
        pass
    bad = draw(st.sampled_from([None] * 8 + ["dim", "rank"]))
    if bad == "dim":
        shape[draw(st.integers(0, 3))] += 1
    elif bad == "rank":
        shape = shape[:3]
    return (x, blob, bias, array(draw, dtype, tuple(shape), small=True, finite=True)), kw


def conv2d_packed_add(x, packed, bias, residual, filter_shape, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
                      activation="none"):
    if activation not in ("none", "relu", "sigmoid", "silu", "hardswish"):
        raise ValueError("activation")
    y = conv2d_packed(x, packed, bias, filter_shape, strides, pads, dilations, "none", _linear=True)
    if residual.shape != y.shape:
        raise ValueError("argument 'residual' must have the output's shape")
    return _act(y + residual, activation).astype(x.dtype)


def _act(z, activation):
    return {"none": z, "relu": np.maximum(z, 0), "sigmoid": 1 / (1 + np.exp(-z)), "silu": z / (1 + np.exp(-z)),
            "hardswish": z * np.clip(z / 6 + 0.5, 0, 1)}[activation]


def conv2d_packed(x, packed, bias, filter_shape, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
                  activation="none", _linear=False):
    f = _FILTERS.get(np.asarray(packed).tobytes())
    if f is None or list(filter_shape) != list(f.shape):
        raise ValueError("argument 'packed' is not a packed filter of this shape")
    y = ref.conv2d(x, f, strides=strides, pads=pads, dilations=dilations, groups=1).astype(np.float64)
    if activation not in ("none", "relu", "sigmoid", "silu", "hardswish") or bias.size not in (0, y.shape[1]):
        raise ValueError("activation or bias")
    z = y + (bias.reshape(1, -1, 1, 1) if bias.size else 0.0)
    if _linear:
        return z
    out = {"none": z, "relu": np.maximum(z, 0), "sigmoid": 1 / (1 + np.exp(-z)), "silu": z / (1 + np.exp(-z)),
           "hardswish": z * np.clip(z / 6 + 0.5, 0, 1)}
    return out[activation].astype(x.dtype)


def conv_packed_concat_gen(draw, dtype):
    """Conv2DPacked's draws as one filter, or the same filter twice (the same window, so one output size); the
    per-filter attrs repeated, sometimes one list short; the bias all filters' or another length."""
    (x, blob, bias), kw = conv_packed_gen(draw, dtype)
    times = draw(st.integers(1, 2))
    fs, s, p, d = (list(kw[k]) * times for k in ("filter_shape", "strides", "pads", "dilations"))
    if draw(st.integers(0, 9)) == 0:
        s = s[:-1]
    if bias.size and times == 2 and draw(st.integers(0, 3)):
        bias = np.concatenate([bias, bias])
    return (x, [blob] * times, bias), {"filter_shapes": fs, "strides": s, "pads": p, "dilations": d,
                                        "activation": kw["activation"]}


def conv2d_packed_concat(x, packed, bias, filter_shapes, strides, pads, dilations, activation="none"):
    n = len(packed)
    if len(filter_shapes) != 4 * n or len(strides) != 2 * n or len(pads) != 4 * n or len(dilations) != 2 * n:
        raise ValueError("per-filter attrs")
    total = sum(filter_shapes[4 * i] for i in range(n))
    if bias.size not in (0, total):
        raise ValueError("bias")
    outs, off = [], 0
    for i in range(n):
        o = filter_shapes[4 * i]
        outs.append(conv2d_packed(x, packed[i], bias[off:off + o] if bias.size else bias, filter_shapes[4 * i:4 * i + 4],
                                  strides[2 * i:2 * i + 2], pads[4 * i:4 * i + 4], dilations[2 * i:2 * i + 2],
                                  activation))
        off += o
    if len({y.shape[2:] for y in outs}) != 1:
        raise ValueError("one output size")
    return np.concatenate(outs, axis=1)


PACKED_CONV_ORACLES = {
    "Conv2DPackedConcat": (conv_packed_concat_gen, quiet(conv2d_packed_concat)),
    "PackConv2DFilter": (pack_gen, quiet(pack_conv)),
    "Conv2DPacked": (conv_packed_gen, quiet(conv2d_packed)),
    "Conv2DPackedAdd": (conv_packed_add_gen, quiet(conv2d_packed_add)),
}
