"""numpy references for the conv / pool ops: they raise ValueError where the ops raise InvalidArgumentError."""
import numpy as np


def _check_window(strides, pads, dilations):
    if len(strides) != 2 or min(strides) < 1:
        raise ValueError("strides")
    if len(dilations) != 2 or min(dilations) < 1:
        raise ValueError("dilations")
    if len(pads) != 4 or min(pads) < 0:
        raise ValueError("pads")


def conv_out(x_shape, f_shape, strides, pads, dilations, groups):
    _check_window(strides, pads, dilations)
    if len(x_shape) != 4 or len(f_shape) != 4 or groups < 1:
        raise ValueError("rank")
    n, c, h, w = x_shape
    o, cg, kh, kw = f_shape
    if c % groups or o % groups or cg * groups != c:
        raise ValueError("groups")
    out = []
    for size, k, s, d, pb, pe in ((h, kh, strides[0], dilations[0], pads[0], pads[2]),
                                  (w, kw, strides[1], dilations[1], pads[1], pads[3])):
        eff = (k - 1) * d + 1
        if k == 0 or eff > size + pb + pe:
            raise ValueError("kernel larger than the padded input")
        out.append((size + pb + pe - eff) // s + 1)
    return (n, o, out[0], out[1])


def _taps(xp, a, b, oh, ow, strides, dilations):
    """xp[:, :, a*dh + i*sh, b*dw + j*sw] for all (i, j)."""
    sh, sw = strides
    dh, dw = dilations
    return xp[:, :, a * dh: a * dh + sh * (oh - 1) + 1: sh, b * dw: b * dw + sw * (ow - 1) + 1: sw]


def conv2d(x, filter, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1):  # noqa: A002
    n, o, oh, ow = conv_out(x.shape, filter.shape, strides, pads, dilations, groups)
    cg, kh, kw = filter.shape[1:]
    og = o // groups
    y = np.zeros((n, o, oh, ow), np.float64)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    for g in range(groups):
        xs, ws = xp[:, g * cg:(g + 1) * cg], filter[g * og:(g + 1) * og].astype(np.float64)
        for a in range(kh):
            for b in range(kw):
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", _taps(xs, a, b, oh, ow, strides, dilations),
                                                       ws[:, :, a, b])
    return y.astype(x.dtype)


def _check_dy(dy, want):
    if dy.shape != tuple(want):
        raise ValueError("dy shape")


def conv2d_backprop_input(x, filter, dy, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1):  # noqa: A002
    _check_dy(dy, conv_out(x.shape, filter.shape, strides, pads, dilations, groups))
    n, c, h, w = x.shape
    o, cg, kh, kw = filter.shape
    og, oh, ow = o // groups, dy.shape[2], dy.shape[3]
    dxp = np.zeros((n, c, h + pads[0] + pads[2], w + pads[1] + pads[3]))
    for g in range(groups):
        ws, dys = filter[g * og:(g + 1) * og].astype(np.float64), dy[:, g * og:(g + 1) * og].astype(np.float64)
        for a in range(kh):
            for b in range(kw):
                _taps(dxp[:, g * cg:(g + 1) * cg], a, b, oh, ow, strides, dilations)[...] += np.einsum(
                    "nohw,oc->nchw", dys, ws[:, :, a, b])
    return dxp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + w].astype(x.dtype)


def conv2d_backprop_filter(x, filter, dy, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1):  # noqa: A002
    _check_dy(dy, conv_out(x.shape, filter.shape, strides, pads, dilations, groups))
    o, cg, kh, kw = filter.shape
    og, oh, ow = o // groups, dy.shape[2], dy.shape[3]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    df = np.zeros(filter.shape)
    for g in range(groups):
        xs, dys = xp[:, g * cg:(g + 1) * cg], dy[:, g * og:(g + 1) * og].astype(np.float64)
        for a in range(kh):
            for b in range(kw):
                df[g * og:(g + 1) * og, :, a, b] = np.einsum("nchw,nohw->oc",
                                                             _taps(xs, a, b, oh, ow, strides, dilations), dys)
    return df.astype(x.dtype)


def pool_out(x_shape, ksize, strides, pads, dilations, ceil_mode):
    _check_window(strides, pads, dilations)
    if len(x_shape) != 4:
        raise ValueError("rank")
    if len(ksize) != 2 or min(ksize) < 1:
        raise ValueError("ksize")
    out = []
    for i in range(2):
        size, k, s, d, pb, pe = x_shape[2 + i], ksize[i], strides[i], dilations[i], pads[i], pads[i + 2]
        eff = (k - 1) * d + 1
        if pb >= eff or pe >= eff or eff > size + pb + pe:
            raise ValueError("window")
        o = (size + pb + pe - eff + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (o - 1) * s >= size + pb:
            o -= 1
        out.append(o)
    return tuple(x_shape[:2]) + tuple(out)


def _windows(x, ksize, strides, pads, dilations, out_hw, fill):
    """[n, c, oh, ow, kh * kw] window values, `fill` outside the input; and their rows/cols."""
    oh, ow = out_hw
    eh = (oh - 1) * strides[0] + (ksize[0] - 1) * dilations[0] + 1
    ew = (ow - 1) * strides[1] + (ksize[1] - 1) * dilations[1] + 1
    h, w = x.shape[2:]
    bottom, right = max(0, eh - h - pads[0]), max(0, ew - w - pads[1])
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], bottom), (pads[1], right)), constant_values=fill)
    taps = [_taps(xp, a, b, oh, ow, strides, dilations) for a in range(ksize[0]) for b in range(ksize[1])]
    return np.stack(taps, axis=-1)


def max_pool2d(x, ksize, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), ceil_mode=False):
    shape = pool_out(x.shape, ksize, strides, pads, dilations, ceil_mode)
    win = _windows(x, ksize, strides, pads, dilations, shape[2:], -np.inf)
    with np.errstate(invalid="ignore"):
        return win.max(axis=-1).astype(x.dtype)


def _avg_divisor(x_shape, ksize, strides, pads, ceil_mode, count_include_pad, out_hw):
    h, w = x_shape[2:]
    ones = np.zeros((1, 1, h + pads[0] + pads[2], w + pads[1] + pads[3]))
    if count_include_pad:
        ones[...] = 1
    else:
        ones[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + w] = 1
    return _windows(ones, ksize, strides, (0, 0, 0, 0), (1, 1), out_hw, 0.0).sum(-1)


def avg_pool2d(x, ksize, strides=(1, 1), pads=(0, 0, 0, 0), ceil_mode=False, count_include_pad=False):
    shape = pool_out(x.shape, ksize, strides, pads, (1, 1), ceil_mode)
    s = _windows(x, ksize, strides, pads, (1, 1), shape[2:], 0.0).sum(-1)
    return (s / _avg_divisor(x.shape, ksize, strides, pads, ceil_mode, count_include_pad, shape[2:])).astype(x.dtype)


def adaptive_avg_pool2d(x, output_size):
    if x.ndim != 4 or len(output_size) != 2 or min(output_size) < 1:
        raise ValueError("bad input")
    if x.size and (x.shape[2] == 0 or x.shape[3] == 0):
        raise ValueError("empty spatial axis")
    n, c, h, w = x.shape
    oh, ow = output_size
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        h0, h1 = i * h // oh, -(-(i + 1) * h // oh)
        for j in range(ow):
            w0, w1 = j * w // ow, -(-(j + 1) * w // ow)
            if n * c:
                y[:, :, i, j] = x[:, :, h0:h1, w0:w1].astype(np.float64).mean(axis=(2, 3))
    return y.astype(x.dtype)
