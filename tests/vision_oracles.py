"""test_bad_input oracles for the conv / pool ops (robustness_oracles.py merges them into ORACLES).

Shapes are small, values finite and small (the GEMM and numpy sum in
different orders, so overflow and inf - inf would differ); attrs are
sometimes invalid (negative pads, zero strides, groups that do not divide).
"""
import numpy as np
from hypothesis import strategies as st

import vision_reference as ref
from opforge.testing.check.inputs import array, quiet


def _window_attrs(draw, n_pad=4):
    strides = draw(st.one_of(st.lists(st.integers(1, 3), min_size=2, max_size=2),
                             st.lists(st.integers(-1, 3), min_size=0, max_size=3)))
    pads = draw(st.one_of(st.lists(st.integers(0, 2), min_size=n_pad, max_size=n_pad),
                          st.lists(st.integers(-1, 2), min_size=0, max_size=5)))
    dil = draw(st.one_of(st.lists(st.integers(1, 2), min_size=2, max_size=2),
                         st.lists(st.integers(-1, 2), min_size=0, max_size=3)))
    return strides, pads, dil


def conv_gen(draw, dtype, backprop=None):
    groups = draw(st.integers(1, 3))
    c = groups * draw(st.integers(0, 2)) + draw(st.sampled_from([0, 0, 0, 1]))
    o = groups * draw(st.integers(0, 2)) + draw(st.sampled_from([0, 0, 0, 1]))
    x_shape = (draw(st.integers(0, 2)), c, draw(st.integers(0, 5)), draw(st.integers(0, 5)))
    f_shape = (o, c // groups + draw(st.sampled_from([0, 0, 0, 1])), draw(st.integers(0, 3)), draw(st.integers(0, 3)))
    if draw(st.integers(0, 9)) == 0:
        x_shape = x_shape[:draw(st.integers(0, 3))]
    strides, pads, dil = _window_attrs(draw)
    x, f = array(draw, dtype, x_shape, small=True, finite=True), array(draw, dtype, f_shape, small=True, finite=True)
    kw = {"strides": strides, "pads": pads, "dilations": dil, "groups": groups}
    if backprop is None:
        return (x, f), kw
    try:
        y_shape = ref.conv_out(x.shape, f.shape, strides, pads, dil, groups)
    except ValueError:
        y_shape = (1, 1, 1, 1)
    if draw(st.integers(0, 5)) == 0:
        y_shape = tuple(d + 1 for d in y_shape)
    return (x, f, array(draw, dtype, y_shape, small=True, finite=True)), kw


def pool_gen(op):
    def gen(draw, dtype):
        x_shape = (draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.integers(0, 5)), draw(st.integers(0, 5)))
        if draw(st.integers(0, 9)) == 0:
            x_shape = x_shape[:draw(st.integers(0, 3))]
        maxpool = op.startswith("MaxPool")
        x = array(draw, dtype, x_shape, small=not maxpool, finite=not maxpool)
        ksize = draw(st.one_of(st.lists(st.integers(1, 3), min_size=2, max_size=2),
                               st.lists(st.integers(-1, 3), min_size=0, max_size=3)))
        strides, pads, dil = _window_attrs(draw)
        kw = {"ksize": ksize, "strides": strides, "pads": pads, "ceil_mode": draw(st.booleans())}
        if maxpool:
            kw["dilations"] = dil
        else:
            kw["count_include_pad"] = draw(st.booleans())
        if not op.endswith("Grad"):
            return (x,), kw
        try:
            y_shape = ref.pool_out(x.shape, ksize, strides, pads, kw.get("dilations", [1, 1]), kw["ceil_mode"])
        except (ValueError, IndexError):
            y_shape = (1, 1, 1, 1)
        return (x, array(draw, dtype, y_shape, small=True, finite=True)), kw
    return gen


def adaptive_gen(grad):
    def gen(draw, dtype):
        x_shape = (draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.integers(0, 5)), draw(st.integers(0, 5)))
        if draw(st.integers(0, 9)) == 0:
            x_shape = x_shape[:draw(st.integers(0, 3))]
        out = draw(st.one_of(st.lists(st.integers(1, 4), min_size=2, max_size=2),
                             st.lists(st.integers(-1, 4), min_size=0, max_size=3)))
        x = array(draw, dtype, x_shape, small=True, finite=True)
        if not grad:
            return (x,), {"output_size": out}
        ok = len(x_shape) == 4 and len(out) == 2 and min(out) >= 1
        y_shape = tuple(x_shape[:2]) + tuple(out) if ok else (1, 1, 1, 1)
        return (x, array(draw, dtype, y_shape, small=True, finite=True)), {"output_size": out}
    return gen


def max_pool_grad(x, dy, ksize, strides, pads, dilations, ceil_mode):
    y_shape = ref.pool_out(x.shape, ksize, strides, pads, dilations, ceil_mode)
    if dy.shape != y_shape:
        raise ValueError("dy shape")
    # The gradient goes to the first maximum of each window, found by brute force.
    dx = np.zeros(x.shape, np.float64)
    n, c, oh, ow = y_shape
    for i in range(oh):
        for j in range(ow):
            best, arg = None, None
            for a in range(ksize[0]):
                ih = i * strides[0] - pads[0] + a * dilations[0]
                for b in range(ksize[1]):
                    iw = j * strides[1] - pads[1] + b * dilations[1]
                    if 0 <= ih < x.shape[2] and 0 <= iw < x.shape[3]:
                        v = x[:, :, ih, iw]
                        if best is None:
                            best, arg = v.copy(), np.full(v.shape, ih * x.shape[3] + iw)
                        else:
                            take = (v > best) | (np.isnan(v) & ~np.isnan(best))
                            best, arg = np.where(take, v, best), np.where(take, ih * x.shape[3] + iw, arg)
            if best is None:
                continue
            flat = dx.reshape(n, c, x.shape[2] * x.shape[3])
            for ni in range(n):
                for ci in range(c):
                    flat[ni, ci, arg[ni, ci]] += dy[ni, ci, i, j]
    return dx.astype(x.dtype)


def avg_pool_grad(x, dy, ksize, strides, pads, ceil_mode, count_include_pad):
    y_shape = ref.pool_out(x.shape, ksize, strides, pads, (1, 1), ceil_mode)
    if dy.shape != y_shape:
        raise ValueError("dy shape")
    div = ref._avg_divisor(x.shape, ksize, strides, pads, ceil_mode, count_include_pad, y_shape[2:])
    g = dy.astype(np.float64) / div
    h, w = x.shape[2:]
    dxp = np.zeros(x.shape[:2] + (h + pads[0] + pads[2] + ksize[0] + strides[0] * 2,
                                  w + pads[1] + pads[3] + ksize[1] + strides[1] * 2))
    for a in range(ksize[0]):
        for b in range(ksize[1]):
            ref._taps(dxp, a, b, y_shape[2], y_shape[3], strides, (1, 1))[...] += g
    return dxp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + w].astype(x.dtype)


def adaptive_grad(x, dy, output_size):
    y = ref.adaptive_avg_pool2d(x, output_size)
    if dy.shape != y.shape:
        raise ValueError("dy shape")
    n, c, h, w = x.shape
    oh, ow = output_size
    dx = np.zeros(x.shape)
    for i in range(oh):
        h0, h1 = i * h // oh, -(-(i + 1) * h // oh)
        for j in range(ow):
            w0, w1 = j * w // ow, -(-(j + 1) * w // ow)
            dx[:, :, h0:h1, w0:w1] += dy[:, :, i:i + 1, j:j + 1] / ((h1 - h0) * (w1 - w0))
    return dx.astype(x.dtype)


VISION_ORACLES = {
    "Conv2D": (conv_gen, quiet(ref.conv2d)),
    "Conv2DBackpropInput": (lambda d, t: conv_gen(d, t, "input"), quiet(ref.conv2d_backprop_input)),
    "Conv2DBackpropFilter": (lambda d, t: conv_gen(d, t, "filter"), quiet(ref.conv2d_backprop_filter)),
    "MaxPool2D": (pool_gen("MaxPool2D"), quiet(ref.max_pool2d)),
    "MaxPool2DGrad": (pool_gen("MaxPool2DGrad"), quiet(max_pool_grad)),
    "AvgPool2D": (pool_gen("AvgPool2D"), quiet(ref.avg_pool2d)),
    "AvgPool2DGrad": (pool_gen("AvgPool2DGrad"), quiet(avg_pool_grad)),
    "AdaptiveAvgPool2D": (adaptive_gen(False), quiet(ref.adaptive_avg_pool2d)),
    "AdaptiveAvgPool2DGrad": (adaptive_gen(True), quiet(adaptive_grad)),
}
VISION_SUMS = {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "AvgPool2D", "AvgPool2DGrad",
               "AdaptiveAvgPool2D", "AdaptiveAvgPool2DGrad", "MaxPool2DGrad"}
VISION_PRODUCTS = {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"}
