"""test_bad_input oracles for the conv / pool ops (robustness_oracles.py merges them into ORACLES).

Shapes are small, values finite and small (the GEMM and numpy sum in
different orders, so overflow and inf - inf would differ); attrs are
sometimes invalid (negative pads, zero strides, groups that do not divide).
"""
import numpy as np
from hypothesis import strategies as st

import vision_reference as ref
from opforge.testing.check.inputs import array, quiet


def _mostly(draw, valid, anything):
    """A draw of `valid` three times in four, else of `anything`: with an even
    choice per attr, a window op's four attrs were all valid in about one draw
    of 16, and after the shape's own checks the pool ops ran in 0.5 % of draws."""
    return draw(anything if draw(st.integers(0, 3)) == 0 else valid)


def _window_attrs(draw, n_pad=4):
    strides = _mostly(draw, st.lists(st.integers(1, 3), min_size=2, max_size=2),
                      st.lists(st.integers(-1, 3), min_size=0, max_size=3))
    pads = _mostly(draw, st.lists(st.integers(0, 2), min_size=n_pad, max_size=n_pad),
                   st.lists(st.integers(-1, 2), min_size=0, max_size=5))
    dil = _mostly(draw, st.lists(st.integers(1, 2), min_size=2, max_size=2),
                  st.lists(st.integers(-1, 2), min_size=0, max_size=3))
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
        ksize = _mostly(draw, st.lists(st.integers(1, 3), min_size=2, max_size=2),
                        st.lists(st.integers(-1, 3), min_size=0, max_size=3))
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


# ConvTranspose2D, Pad, BatchNorm, ResizeBilinear (vision_reference_more.py)
import vision_reference_more as ref2  # noqa: E402


def convt_gen(draw, dtype):
    groups = draw(st.integers(1, 3))
    c = groups * draw(st.integers(0, 2)) + draw(st.sampled_from([0, 0, 0, 1]))
    x_shape = (draw(st.integers(0, 2)), c, draw(st.integers(0, 4)), draw(st.integers(0, 4)))
    f_shape = (c + draw(st.sampled_from([0, 0, 0, 1])), draw(st.integers(0, 2)), draw(st.integers(0, 3)),
               draw(st.integers(0, 3)))
    if draw(st.integers(0, 9)) == 0:
        x_shape = x_shape[:draw(st.integers(0, 3))]
    strides, pads, dil = _window_attrs(draw)
    op = draw(st.lists(st.integers(-1, 2), min_size=2, max_size=2) | st.lists(st.integers(0, 1), max_size=3))
    x, f = array(draw, dtype, x_shape, small=True, finite=True), array(draw, dtype, f_shape, small=True, finite=True)
    return (x, f), {"strides": strides, "pads": pads, "dilations": dil, "groups": groups, "output_padding": op}


def pad_gen(grad):
    def gen(draw, dtype):
        shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
        mode = draw(st.sampled_from(["constant", "reflect", "edge", "wrap", "symmetric"]))
        pads = draw(st.lists(st.integers(-1, 3), min_size=2 * len(shape), max_size=2 * len(shape))
                    | st.lists(st.integers(0, 2), max_size=5))
        x = array(draw, dtype, shape, small=grad, finite=grad)
        kw = {"pads": pads, "mode": mode}
        if not grad:
            kw["constant_value"] = draw(st.sampled_from([0.0, 1.0, -2.0, 0.5, 1e10]))
            return (x,), kw
        try:
            y_shape = ref2.pad(np.zeros(shape), pads, mode).shape
        except ValueError:
            y_shape = (1,)
        return (x, array(draw, dtype, y_shape, small=True, finite=True)), kw
    return gen


def bn_gen(draw, dtype):
    shape = tuple(draw(st.lists(st.integers(0, 3), max_size=4)))
    c = shape[1] if len(shape) > 1 else draw(st.integers(0, 2))
    vec = [array(draw, dtype, (c + draw(st.sampled_from([0, 0, 0, 0, 1])),), small=True, finite=True)
           for _ in range(3)]
    var = (np.abs(array(draw, dtype, (c,), small=True, finite=True)) + 0.5).astype(dtype)
    x = array(draw, dtype, shape, small=True, finite=True)
    return (x, *vec, var), {"epsilon": draw(st.sampled_from([1e-5, 0.1, 0.0])), "training": draw(st.booleans())}


def bn_grad_gen(draw, dtype):
    (x, scale, _, mean, var), kw = bn_gen(draw, dtype)
    dy = array(draw, dtype, x.shape if draw(st.integers(0, 5)) else x.shape + (1,), small=True, finite=True)
    c = scale.shape[0]
    dbm, dbv = (array(draw, dtype, (c,), small=True, finite=True) for _ in range(2))
    return (dy, x, scale, mean, var, dbm, dbv), kw


def bn_grad(dy, x, scale, mean, variance, dbatch_mean, dbatch_var, epsilon, training):
    """The formulas of BatchNormGrad's doc, in float64."""
    ref2.batch_norm(x, scale, scale, mean, variance, epsilon)  # the same checks
    for v in (dbatch_mean, dbatch_var):
        if v.shape != scale.shape:
            raise ValueError("vector")
    if dy.shape != x.shape:
        raise ValueError("dy shape")
    c = x.shape[1]
    axes = tuple(i for i in range(x.ndim) if i != 1)
    view = (1, c) + (1,) * (x.ndim - 2)
    m_count = x.size // c if c else 0
    xd, g = x.astype(np.float64), dy.astype(np.float64)
    m, r = mean.astype(np.float64).reshape(view), 1 / np.sqrt(variance.astype(np.float64) + epsilon).reshape(view)
    sr = scale.astype(np.float64).reshape(view) * r
    sdy, sdyc = g.sum(axes).reshape(view), (g * (xd - m)).sum(axes).reshape(view)
    if training:
        dx = (sr * (g - sdy / max(m_count, 1) - (xd - m) * r * r * sdyc / max(m_count, 1))
              + (dbatch_mean.reshape(view) + 2 * dbatch_var.reshape(view) * (xd - m)) / max(m_count, 1))
        dmean = dvar = np.zeros(c)
    else:
        dx = g * sr
        dmean = (dbatch_mean.reshape(view) - sr * sdy).reshape(c)
        dvar = (dbatch_var.reshape(view) - 0.5 * sr * r * r * sdyc).reshape(c)
    out = (dx, (sdyc * r).reshape(c), sdy.reshape(c), dmean, dvar)
    return tuple(np.asarray(o).astype(x.dtype) for o in out)


def resize_gen(grad):
    def gen(draw, dtype):
        x_shape = (draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.integers(0, 4)), draw(st.integers(0, 4)))
        if draw(st.integers(0, 9)) == 0:
            x_shape = x_shape[:draw(st.integers(0, 3))]
        size = draw(st.lists(st.integers(1, 5), min_size=2, max_size=2) | st.lists(st.integers(-1, 3), max_size=3))
        mode = draw(st.sampled_from(["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "nearest"]))
        scales = draw(st.sampled_from([[], [], [1.5, 0.75], [0.0, 1.0], [2.0]]))
        x = array(draw, dtype, x_shape, small=True, finite=True)
        kw = {"size": size, "coordinate_mode": mode, "scales": scales}
        if not grad:
            return (x,), kw
        ok = len(x_shape) == 4 and len(size) == 2 and min(size) >= 1
        y_shape = tuple(x_shape[:2]) + tuple(size) if ok else (1, 1, 1, 1)
        return (x, array(draw, dtype, y_shape, small=True, finite=True)), kw
    return gen


def resize_grad(x, dy, size, coordinate_mode, scales):
    y = ref2.resize_bilinear(x, size, coordinate_mode, scales)
    if dy.shape != y.shape:
        raise ValueError("dy shape")
    # The adjoint, column by column of the (linear) resize's matrix.
    flat = np.zeros(x.size)
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = 1
        flat[i] = np.vdot(ref2.resize_bilinear(e.reshape(x.shape), size, coordinate_mode, scales), dy.astype(np.float64))
    return flat.reshape(x.shape).astype(x.dtype)


VISION_ORACLES.update({
    "ConvTranspose2D": (convt_gen, quiet(ref2.conv_transpose2d)),
    "Pad": (pad_gen(False), quiet(ref2.pad)),
    "PadGrad": (pad_gen(True), quiet(ref2.pad_grad)),
    "BatchNorm": (bn_gen, quiet(ref2.batch_norm)),
    "BatchNormGrad": (bn_grad_gen, quiet(bn_grad)),
    "ResizeBilinear": (resize_gen(False), quiet(ref2.resize_bilinear)),
    "ResizeBilinearGrad": (resize_gen(True), quiet(resize_grad)),
})
VISION_SUMS |= {"ConvTranspose2D", "PadGrad", "BatchNorm", "BatchNormGrad", "ResizeBilinear", "ResizeBilinearGrad"}
VISION_PRODUCTS |= {"ConvTranspose2D", "BatchNorm", "BatchNormGrad"}


def fused_conv_gen(draw, dtype):
    (x, f), kw = conv_gen(draw, dtype)
    o = f.shape[0] if len(f.shape) else 1
    b = array(draw, dtype, (o + draw(st.sampled_from([0, 0, 0, 0, 1])),), small=True, finite=True)
    kw["activation"] = draw(st.sampled_from(["none", "relu", "sigmoid", "silu", "gelu"]))
    return (x, f, b), kw


def fused_conv2d(x, filter, bias, activation="none", **kw):  # noqa: A002
    y = ref.conv2d(x, filter, **kw).astype(np.float64)
    if activation not in ("none", "relu", "sigmoid", "silu") or bias.shape != (y.shape[1],):
        raise ValueError("activation or bias")
    z = y + bias.reshape(1, -1, 1, 1)
    out = {"none": z, "relu": np.maximum(z, 0), "sigmoid": 1 / (1 + np.exp(-z)), "silu": z / (1 + np.exp(-z))}
    return out[activation].astype(x.dtype)


VISION_ORACLES["FusedConv2D"] = (fused_conv_gen, quiet(fused_conv2d))
VISION_SUMS |= {"FusedConv2D"}
VISION_PRODUCTS |= {"FusedConv2D"}
