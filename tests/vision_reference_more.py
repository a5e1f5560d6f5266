"""numpy references for ConvTranspose2D, Pad, BatchNorm and ResizeBilinear: they raise ValueError where the ops
raise InvalidArgumentError (vision_reference.py holds Conv2D's and the pools')."""
import numpy as np

from vision_reference import _check_window


def conv_transpose_out(x_shape, f_shape, strides, pads, dilations, groups, output_padding):
    _check_window(strides, pads, dilations)
    if len(output_padding) != 2 or min(output_padding) < 0 or any(o >= s for o, s in zip(output_padding, strides)):
        raise ValueError("output_padding")
    if len(x_shape) != 4 or len(f_shape) != 4 or groups < 1:
        raise ValueError("rank")
    n, c, h, w = x_shape
    if c % groups or f_shape[0] != c:
        raise ValueError("channels")
    out = []
    for i, size in enumerate((h, w)):
        k = f_shape[2 + i]
        if size == 0 or k == 0:
            raise ValueError("empty")
        o = (size - 1) * strides[i] - pads[i] - pads[i + 2] + dilations[i] * (k - 1) + output_padding[i] + 1
        if o < 1:
            raise ValueError("pads")
        out.append(o)
    return (n, f_shape[1] * groups, out[0], out[1])


def conv_transpose2d(x, filter, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1,  # noqa: A002
                     output_padding=(0, 0)):
    """Each input pixel scatters filter-weighted copies into a full output, which is then cropped by pads."""
    n, o, oh, ow = conv_transpose_out(x.shape, filter.shape, strides, pads, dilations, groups, output_padding)
    c, og, kh, kw = filter.shape
    cg, h, w = c // groups, x.shape[2], x.shape[3]
    full = np.zeros((n, o, max(oh + pads[0] + pads[2], (h - 1) * strides[0] + (kh - 1) * dilations[0] + 1),
                     max(ow + pads[1] + pads[3], (w - 1) * strides[1] + (kw - 1) * dilations[1] + 1)))
    for g in range(groups):
        xs, fs = x[:, g * cg:(g + 1) * cg].astype(np.float64), filter[g * cg:(g + 1) * cg].astype(np.float64)
        for a in range(kh):
            for b in range(kw):
                r0, c0 = a * dilations[0], b * dilations[1]
                full[:, g * og:(g + 1) * og, r0:r0 + strides[0] * (h - 1) + 1:strides[0],
                     c0:c0 + strides[1] * (w - 1) + 1:strides[1]] += np.einsum("nchw,co->nohw", xs, fs[:, :, a, b])
    return full[:, :, pads[0]:pads[0] + oh, pads[1]:pads[1] + ow].astype(x.dtype)


_NP_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def pad(x, pads, mode="constant", constant_value=0.0):
    r = x.ndim
    if mode not in _NP_MODES or len(pads) != 2 * r or (pads and min(pads) < 0):
        raise ValueError("pads or mode")
    for a in range(r):
        b, e, d = pads[a], pads[a + r], x.shape[a]
        if b or e:
            if mode == "reflect" and max(b, e) > d - 1:
                raise ValueError("reflect")
            if mode in ("edge", "wrap") and d == 0:
                raise ValueError("empty")
            if mode == "wrap" and max(b, e) > d:
                raise ValueError("wrap")
    if x.dtype.kind == "i":
        info = np.iinfo(x.dtype)
        if not (constant_value == np.floor(constant_value) and info.min <= constant_value <= info.max):
            raise ValueError("constant_value")
    if r == 0:
        return x.copy()
    width = [(pads[a], pads[a + r]) for a in range(r)]
    if mode == "constant":
        return np.pad(x, width, constant_values=np.array(constant_value).astype(x.dtype))
    return np.pad(x, width, mode=_NP_MODES[mode])


def pad_grad(x, dy, pads, mode="constant"):
    """The adjoint of pad: dy summed back onto the elements it was copied from."""
    y = pad(np.zeros(x.shape), pads, mode)
    if dy.shape != y.shape:
        raise ValueError("dy shape")
    idx = pad(np.arange(x.size, dtype=np.int64).reshape(x.shape) if x.size else np.zeros(x.shape, np.int64),
              pads, mode, constant_value=-1)
    dx = np.zeros(x.size)
    keep = idx >= 0
    np.add.at(dx, idx[keep], dy[keep].astype(np.float64))
    return dx.reshape(x.shape).astype(x.dtype)


def batch_norm(x, scale, offset, mean, variance, epsilon=1e-5, training=False):
    if x.ndim < 2 or epsilon < 0:
        raise ValueError("x rank")
    c = x.shape[1]
    for v in (scale, offset, mean, variance):
        if v.shape != (c,):
            raise ValueError("vector")
    axes = tuple(i for i in range(x.ndim) if i != 1)
    view = (1, c) + (1,) * (x.ndim - 2)
    xd = x.astype(np.float64)
    if training:
        # x0 + mean(x - x0) (x0: each channel's first element): a constant channel's mean exactly.
        x0 = xd[(0, slice(None)) + (0,) * (x.ndim - 2)].reshape(view) if x.size else 0.0
        m = (x0 + (xd - x0).mean(axes, keepdims=True)).reshape(c) if x.size else np.zeros(c)
        v = ((xd - m.reshape(view)) ** 2).mean(axes) if x.size else np.zeros(c)
    else:
        m, v = mean.astype(np.float64), variance.astype(np.float64)
    y = (xd - m.reshape(view)) / np.sqrt(v + epsilon).reshape(view) * scale.reshape(view) + offset.reshape(view)
    return y.astype(x.dtype), m.astype(x.dtype), v.astype(x.dtype)


_COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")


def _taps(mode, size_in, size_out, scale):
    o = np.arange(size_out, dtype=np.float64)
    if mode == "align_corners":
        u = o * (size_in - 1) / (size_out - 1) if size_out > 1 else np.zeros(size_out)
    elif mode == "asymmetric":
        u = o / scale
    elif mode == "pytorch_half_pixel" and size_out == 1:
        u = np.zeros(1)
    else:
        u = (o + 0.5) / scale - 0.5
    u = np.clip(u, 0, size_in - 1)
    i0 = np.floor(u).astype(np.int64)
    return i0, np.minimum(i0 + 1, size_in - 1), u - i0


def resize_bilinear(x, size, coordinate_mode="half_pixel", scales=()):
    if coordinate_mode not in _COORDS or len(size) != 2 or min(size) < 1:
        raise ValueError("attrs")
    if len(scales) not in (0, 2) or (scales and min(scales) <= 0) or x.ndim != 4 or 0 in x.shape[2:]:
        raise ValueError("scales or x")
    h, w = x.shape[2:]
    sh, sw = scales if scales else (size[0] / h, size[1] / w)
    r0, r1, wr = _taps(coordinate_mode, h, size[0], sh)
    c0, c1, wc = _taps(coordinate_mode, w, size[1], sw)
    xd = x.astype(np.float64)
    top = xd[:, :, r0][:, :, :, c0] * (1 - wc) + xd[:, :, r0][:, :, :, c1] * wc
    bottom = xd[:, :, r1][:, :, :, c0] * (1 - wc) + xd[:, :, r1][:, :, :, c1] * wc
    return (top * (1 - wr)[:, None] + bottom * wr[:, None]).astype(x.dtype)
