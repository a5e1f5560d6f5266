"""test_bad_input oracles for the conv / pool ops (robustness_oracles.py merges them into ORACLES).

Shapes are small, values finite and small (the GEMM and numpy sum in
different orders, so overflow and inf - inf would differ); attrs are
sometimes invalid (negative pads, zero strides, groups that do not divide).
"""
import numpy as np
from hypothesis import strategies as st

import vision_reference as ref
from opforge.testing.check.inputs import array, quiet


# The part of a draw (an attr, or "shape": sizes, ranks, channel counts)
# made invalid: none in three draws of four, so most draws reach the
# kernels. Breaking each attr independently (valid three times in four, and
# hypothesis draws an integer's lower bound more often than its share) left
# the window ops valid in 1-10 % of draws (MaxPool2D's bfloat16 kernel ran in
# 2 draws of 400). (None first: hypothesis leans towards a list's first item.)
_WINDOW = ("strides", "pads", "dilations", "shape")


def _broken(draw, parts):
    return draw(st.sampled_from((None,) * (3 * len(parts)) + tuple(parts)))


def _window_attrs(draw, bad):
    """strides, pads, dilations: valid unless `bad` names one, which is then drawn from anything."""
    strides = draw(st.lists(st.integers(-1, 3), min_size=0, max_size=3) if bad == "strides" else
                   st.lists(st.integers(1, 3), min_size=2, max_size=2))
    pads = draw(st.lists(st.integers(-1, 2), min_size=0, max_size=5) if bad == "pads" else
                st.lists(st.integers(0, 2), min_size=4, max_size=4))
    dil = draw(st.lists(st.integers(-1, 2), min_size=0, max_size=3) if bad == "dilations" else
               st.lists(st.integers(1, 2), min_size=2, max_size=2))
    return strides, pads, dil


def _spatial(draw, bad, kernel, pads, dil):
    """(h, w): at least the padded window where the attrs allow it, else (or if bad == "shape") anything small."""
    if bad is not None or len(kernel) != 2 or len(pads) != 4 or len(dil) != 2 or min(kernel) < 1:
        return draw(st.integers(0, 5)), draw(st.integers(0, 5))
    return tuple(max(1, (kernel[i] - 1) * dil[i] + 1 - pads[i] - pads[i + 2]) + draw(st.integers(0, 3))
                 for i in range(2))


def _rank(draw, bad, shape):
    """The shape, or (when the shape is the broken part, about one draw in three) a prefix of it."""
    return shape[:draw(st.integers(0, len(shape) - 1))] if bad == "shape" and draw(st.integers(0, 2)) == 0 else shape


def conv_gen(draw, dtype, backprop=None):
    bad = _broken(draw, _WINDOW + ("groups",))
    groups = draw(st.integers(1, 3))
    off = (lambda: draw(st.sampled_from([0, 0, 1]))) if bad == "groups" else (lambda: 0)
    c, o = groups * draw(st.integers(0, 2)) + off(), groups * draw(st.integers(0, 2)) + off()
    kernel = [draw(st.integers(0 if bad == "shape" else 1, 3)) for _ in range(2)]
    strides, pads, dil = _window_attrs(draw, bad)
    x_shape = _rank(draw, bad, (draw(st.integers(0, 2)), c) + _spatial(draw, bad, kernel, pads, dil))
    f_shape = (o, c // groups + off(), *kernel)
    x, f = array(draw, dtype, x_shape, small=True, finite=True), array(draw, dtype, f_shape, small=True, finite=True)
    kw = {"strides": strides, "pads": pads, "dilations": dil, "groups": groups}
    if backprop is None:
        return (x, f), kw
    try:
        y_shape = ref.conv_out(x.shape, f.shape, strides, pads, dil, groups)
    except ValueError:
        y_shape = (1, 1, 1, 1)
    if bad == "shape" and draw(st.booleans()):
        y_shape = tuple(d + 1 for d in y_shape)
    return (x, f, array(draw, dtype, y_shape, small=True, finite=True)), kw


def pool_gen(op):
    def gen(draw, dtype):
        bad = _broken(draw, _WINDOW + ("ksize",))
        maxpool = op.startswith("MaxPool")
        ksize = draw(st.lists(st.integers(-1, 3), min_size=0, max_size=3) if bad == "ksize" else
                     st.lists(st.integers(1, 3), min_size=2, max_size=2))
        strides, pads, dil = _window_attrs(draw, bad)
        if not maxpool:
            dil = [1, 1]
        if bad is None:  # a pool's pads stay inside its window
            pads = [min(p, (ksize[i % 2] - 1) * dil[i % 2]) for i, p in enumerate(pads)]
        x_shape = (draw(st.integers(0, 2)), draw(st.integers(0, 2))) + _spatial(draw, bad, ksize, pads, dil)
        x = array(draw, dtype, _rank(draw, bad, x_shape), small=not maxpool, finite=not maxpool)
        kw = {"ksize": ksize, "strides": strides, "pads": pads, "ceil_mode": draw(st.booleans())}
        if maxpool:
            kw["dilations"] = dil
        else:
            kw["count_include_pad"] = draw(st.booleans())
        if not op.endswith("Grad"):
            return (x,), kw
        try:
            y_shape = ref.pool_out(x.shape, ksize, strides, pads, dil, kw["ceil_mode"])
        except (ValueError, IndexError):
            y_shape = (1, 1, 1, 1)
        if bad == "shape" and draw(st.booleans()):
            y_shape = tuple(d + 1 for d in y_shape)
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
    bad = _broken(draw, _WINDOW + ("groups", "output_padding"))
    groups = draw(st.integers(1, 3))
    c = groups * draw(st.integers(0, 2)) + (draw(st.sampled_from([0, 0, 1])) if bad == "groups" else 0)
    kernel = [draw(st.integers(0 if bad == "shape" else 1, 3)) for _ in range(2)]
    strides, pads, dil = _window_attrs(draw, bad)
    # The output (h - 1) * s - pads + (k - 1) * d + 1 + output_padding is >= 1 when h is past the pads.
    hw = tuple(draw(st.integers(0, 4)) if bad is not None else
               -(-max(0, sum(pads[i::2]) - (k - 1) * d) // s) + 1 + draw(st.integers(0, 2))
               for i, k, d, s in zip(range(2), kernel, dil, strides))
    x_shape = _rank(draw, bad, (draw(st.integers(0, 2)), c) + hw)
    f_shape = (c + (draw(st.sampled_from([0, 0, 1])) if bad == "groups" else 0), draw(st.integers(0, 2)), *kernel)
    op = draw(st.lists(st.integers(-1, 2), min_size=2, max_size=2) | st.lists(st.integers(0, 1), max_size=3)
              if bad == "output_padding" or len(strides) != 2 or min(strides) < 1 else
              st.tuples(*(st.integers(0, s - 1) for s in strides)).map(list))
    x, f = array(draw, dtype, x_shape, small=True, finite=True), array(draw, dtype, f_shape, small=True, finite=True)
    return (x, f), {"strides": strides, "pads": pads, "dilations": dil, "groups": groups, "output_padding": op}


def pad_gen(grad):
    def gen(draw, dtype):
        bad = _broken(draw, ("pads", "shape", "mode"))
        shape = tuple(draw(st.lists(st.integers(0 if bad == "shape" else 1, 3), max_size=3)))
        mode = draw(st.sampled_from(["constant", "reflect", "edge", "wrap"] + (["symmetric"] if bad == "mode" else [])))
        if bad == "pads":
            pads = draw(st.lists(st.integers(-1, 3), min_size=2 * len(shape), max_size=2 * len(shape))
                        | st.lists(st.integers(0, 2), max_size=5))
        else:  # within what reflect (d - 1) and wrap (d) can take
            pads = [min(draw(st.integers(0, 2)), d - 1 if mode == "reflect" else d) for d in shape * 2]
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
    bad = _broken(draw, ("shape", "vector"))
    shape = tuple(draw(st.lists(st.integers(0, 3), min_size=0 if bad == "shape" else 2, max_size=4)))
    c = shape[1] if len(shape) > 1 else draw(st.integers(0, 2))
    vec = [array(draw, dtype, (c + (draw(st.sampled_from([0, 1])) if bad == "vector" else 0),), small=True, finite=True)
           for _ in range(3)]
    var = (np.abs(array(draw, dtype, (c,), small=True, finite=True)) + 0.5).astype(dtype)
    x = array(draw, dtype, shape, small=True, finite=True)
    return (x, *vec, var), {"epsilon": draw(st.sampled_from([1e-5, 0.1, 0.0])), "training": draw(st.booleans())}


def bn_grad_gen(draw, dtype):
    (x, scale, _, mean, var), kw = bn_gen(draw, dtype)
    dy = array(draw, dtype, x.shape if draw(st.sampled_from([True] * 5 + [False])) else x.shape + (1,), small=True,
               finite=True)
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
        bad = _broken(draw, ("shape", "size", "mode", "scales"))
        lo = 0 if bad == "shape" else 1
        x_shape = _rank(draw, bad, (draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.integers(lo, 4)),
                                    draw(st.integers(lo, 4))))
        size = draw(st.lists(st.integers(-1, 3), max_size=3) if bad == "size" else
                    st.lists(st.integers(1, 5), min_size=2, max_size=2))
        mode = draw(st.sampled_from(["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
                                    + (["nearest"] if bad == "mode" else [])))
        scales = draw(st.sampled_from([[0.0, 1.0], [2.0], [-1.0, 1.0]] if bad == "scales" else [[], [], [1.5, 0.75]]))
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
