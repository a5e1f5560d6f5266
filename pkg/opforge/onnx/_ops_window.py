"""ONNX LpPool and Col2Im, composed of opforge ops over index
arrays computed at import (static shapes): any number of spatial dims.

LpPool sums |x|^p over each window: the zero-padded input gathered once per
kernel offset (strides and dilations in the indices), then the p-th root.
Col2Im adds each column back into the image with one ScatterElements (add).
"""

import itertools

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx import _take
from opforge.onnx._node import INT, INTS, STRING, converter, dtype_of, shape_of


def _static(n, x):
    shape = shape_of(x)
    if any(d is None for d in shape):
        raise n.fail(f"needs static dims, got {list(shape)}", UnimplementedError)
    return shape


def _window_plan(n, spatial, kernel):
    """(out sizes, pads begin, pads end, strides, dilations) from the pooling attributes."""
    k = len(kernel)
    strides = n.attr("strides", [1] * k)
    dil = n.attr("dilations", [1] * k)
    pads = n.attr("pads", [0] * 2 * k)
    if len(strides) != k or len(dil) != k or len(pads) != 2 * k:
        raise n.fail(f"strides {strides}, dilations {dil} and pads {pads} must match kernel_shape {kernel}")
    if min(strides + dil + kernel) < 1 or min(pads) < 0:
        raise n.fail("kernel_shape, strides and dilations must be positive and pads non-negative")
    begin, end = list(pads[:k]), list(pads[k:])
    auto = n.attr("auto_pad", "NOTSET")
    span = [d * (kk - 1) + 1 for d, kk in zip(dil, kernel)]
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-s // st) for s, st in zip(spatial, strides)]
        total = [max((o - 1) * st + sp - s, 0) for o, st, sp, s in zip(out, strides, span, spatial)]
        small = [t // 2 for t in total]
        begin = [t - s for t, s in zip(total, small)] if auto == "SAME_LOWER" else small
        end = [t - b for t, b in zip(total, begin)]
    elif auto == "VALID":
        begin, end = [0] * k, [0] * k
        out = [(s - sp) // st + 1 for s, sp, st in zip(spatial, span, strides)]
    elif auto == "NOTSET":
        rnd = np.ceil if n.attr("ceil_mode", 0) else np.floor
        out = [int(rnd((s + b + e - sp) / st)) + 1 for s, b, e, sp, st in zip(spatial, begin, end, span, strides)]
        if n.attr("ceil_mode", 0):  # a last window must start inside the (left-padded) input
            out = [o - 1 if (o - 1) * st >= s + b else o for o, st, s, b in zip(out, strides, spatial, begin)]
    else:
        raise n.fail(f"auto_pad {auto!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    if min(out) < 1:
        raise n.fail(f"the windows do not fit the input: output size {out}")
    # Windows may reach past the given padding (ceil_mode): pad the end further with zeros.
    end = [max(e, (o - 1) * st + sp - s - b) for e, o, st, sp, s, b in zip(end, out, strides, span, spatial, begin)]
    return out, begin, end, strides, dil


def _lp(n, x, p):
    dt = dtype_of(x)
    if dt.kind != "f":
        raise n.fail(f"X of {dt} is not supported (floats only)")
    return P.mul(x, x) if p == 2 else P.pow(P.abs(x), np.array(p, dt))


def _root(v, p):
    return P.sqrt(v) if p == 2 else P.pow(v, np.array(1.0 / p, dtype_of(v)))


def _check_lp(n):
    if n.attr("p", 2) < 1:
        raise n.fail(f"p must be >= 1, got {n.attr('p')}")


@converter("LpPool", (2, 11, 18, 22), {"p": INT, "pads": INTS, "auto_pad": STRING, "ceil_mode": INT,
                                        "dilations": INTS, "strides": INTS, "kernel_shape": INTS}, check=_check_lp)
def _lp_pool(n):
    x = n.input(0)
    shape = _static(n, x)
    kernel = n.attr("kernel_shape")
    if not kernel or len(kernel) != len(shape) - 2:
        raise n.fail(f"kernel_shape {kernel} must have one entry per spatial dim of X {list(shape)}")
    p = n.attr("p", 2)
    out, begin, end, strides, dil = _window_plan(n, shape[2:], kernel)
    y = _lp(n, x, p)
    if max(begin + end) > 0:
        y = P.pad(y, pads=[0, 0] + begin + [0, 0] + end)
    total = None
    for offset in itertools.product(*[range(k) for k in kernel]):
        w = y
        for a, (o, d, st, size) in enumerate(zip(offset, dil, strides, out)):
            w = _take.take(w, (o * d + st * np.arange(size)).astype(np.int64), a + 2)
        total = w if total is None else P.add(total, w)
    return _root(total, p)


@converter("Col2Im", (18,), {"strides": INTS, "pads": INTS, "dilations": INTS})
def _col2im(n):
    x = n.input(0)
    image = n.static_ints(1, "image_shape")
    block = n.static_ints(2, "block_shape")
    k = len(image)
    if len(block) != k or k < 1:
        raise n.fail(f"image_shape {image} and block_shape {block} must have one entry per spatial dim")
    strides, dil = n.attr("strides", [1] * k), n.attr("dilations", [1] * k)
    pads = n.attr("pads", [0] * 2 * k)
    batch, rows, cols = _static(n, x)
    kvol = int(np.prod(block))
    if rows % kvol:
        raise n.fail(f"input dim 1 ({rows}) must be a multiple of prod(block_shape) ({kvol})")
    channels = rows // kvol
    padded = [s + pads[i] + pads[k + i] for i, s in enumerate(image)]
    grid = [(pd - (d * (b - 1) + 1)) // st + 1 for pd, d, b, st in zip(padded, dil, block, strides)]
    if int(np.prod(grid)) != cols:
        raise n.fail(f"input dim 2 ({cols}) must be the number of blocks {grid} in the padded image {padded}")
    # Destination of each (kernel offset, block position) in the flat padded image.
    offs = np.stack(np.meshgrid(*[np.arange(b) for b in block], indexing="ij"), -1).reshape(-1, k)
    pos = np.stack(np.meshgrid(*[np.arange(g) for g in grid], indexing="ij"), -1).reshape(-1, k)
    coords = offs[:, None, :] * np.array(dil) + pos[None, :, :] * np.array(strides)  # [kvol, cols, k]
    flat = np.ravel_multi_index(tuple(coords[..., i] for i in range(k)), padded).reshape(-1).astype(np.int64)
    index = np.broadcast_to(flat, (batch, channels, kvol * cols)).copy()
    dt = dtype_of(x)
    updates = P.reshape(x, shape=[batch, channels, kvol * cols])
    img = P.scatter_elements(np.zeros((batch, channels, int(np.prod(padded))), dt), index, updates,
                             axis=2, reduction="add")
    img = P.reshape(img, shape=[batch, channels] + padded)
    if max(pads) > 0:
        img = P.slice(img, begin=[0, 0] + list(pads[:k]), size=[batch, channels] + list(image))
    return img
