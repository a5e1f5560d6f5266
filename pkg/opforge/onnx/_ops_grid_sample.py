"""ONNX GridSample (opsets 16, 20, 22) composed of opforge ops, any number of
spatial dims: the grid's normalized coordinates are mapped to pixels, fixed
by the padding mode (zeros, border, reflection) as ONNX's reference does,
and each of the 1, 2^k or 4^k taps (nearest, linear, cubic) is one
GatherElements from the flattened image, weighted and summed."""

import itertools

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx import _take
from opforge.onnx._node import INT, STRING, converter, dtype_of, shape_of

_MODES = {16: {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"},
          20: {"linear": "linear", "nearest": "nearest", "cubic": "cubic"}}
_I64 = np.dtype(np.int64)


def _mode(n):
    modes = _MODES[16 if n.version < 20 else 20]
    m = n.attr("mode", "bilinear" if n.version < 20 else "linear")
    if m not in modes:
        raise n.fail(f"mode {m!r} is not one of {', '.join(modes)}")
    return modes[m]


def _check(n):
    _mode(n)
    if n.attr("padding_mode", "zeros") not in ("zeros", "border", "reflection"):
        raise n.fail(f"padding_mode {n.attr('padding_mode')!r} is not one of zeros, border, reflection")


def _reflect(v, lo, hi):
    """Folds v into [lo, hi] by reflecting at the near border (ONNX's _gs_reflect)."""
    dt = dtype_of(v)
    c = lambda x: np.array(x, dt)  # noqa: E731
    span = hi - lo
    if span <= 0:
        return P.add(P.mul(v, c(0)), c(lo))
    below = P.less(v, c(lo))
    dx = P.select(below, P.sub(c(lo), v), P.sub(v, c(hi)))
    k = P.floor(P.div(dx, c(span)))
    r = P.sub(dx, P.mul(k, c(span)))
    even = P.equal(P.sub(k, P.mul(c(2), P.floor(P.div(k, c(2))))), c(0))
    low_side = P.select(even, P.add(c(lo), r), P.sub(c(hi), r))
    high_side = P.select(even, P.sub(c(hi), r), P.add(c(lo), r))
    out = P.select(below, low_side, high_side)
    return P.select(P.logical_or(below, P.greater(v, c(hi))), out, v)


def _cubic(t, dt):
    a = -0.75
    c = lambda x: np.array(x, dt)  # noqa: E731

    def near(x):  # |x| <= 1
        return P.add(P.mul(P.mul(P.sub(P.mul(c(a + 2), x), c(a + 3)), x), x), c(1))

    def far(x):  # 1 < |x| < 2
        return P.sub(P.mul(P.add(P.mul(P.sub(P.mul(c(a), x), c(5 * a)), x), c(8 * a)), x), c(4 * a))
    return [far(P.add(t, c(1))), near(t), near(P.sub(c(1), t)), far(P.sub(c(2), t))]


@converter("GridSample", (16, 20, 22), {"mode": STRING, "padding_mode": STRING, "align_corners": INT},
           check=_check)
def _grid_sample(n):
    x, grid = n.input(0), n.input(1)
    xs, gs = shape_of(x), shape_of(grid)
    if None in xs or None in gs:
        raise n.fail(f"X and grid need static dims, got {list(xs)} and {list(gs)}", UnimplementedError)
    k = len(xs) - 2
    if k < 1 or len(gs) != k + 2 or gs[-1] != k or gs[0] != xs[0]:
        raise n.fail(f"grid of shape {list(gs)} does not fit X of shape {list(xs)}")
    if n.version < 20 and k != 2:
        raise n.fail("GridSample before opset 20 takes 4-D input")
    dt, gdt = dtype_of(x), dtype_of(grid)
    if dt.kind != "f" or gdt.kind != "f":
        raise n.fail(f"X and grid must be floats, got {dt} and {gdt}", UnimplementedError)
    mode, pad = _mode(n), n.attr("padding_mode", "zeros")
    align = bool(n.attr("align_corners", 0))
    batch, chans, dims = xs[0], xs[1], list(xs[2:])
    outs = list(gs[1:-1])
    m = int(np.prod(outs))
    g = P.reshape(grid, shape=[batch, m, k])
    c = lambda v: np.array(v, gdt)  # noqa: E731
    taps = []  # per spatial dim: [(index [N, M] int64, weight [N, M] or None, valid [N, M] bool or None)]
    for i, d in enumerate(dims):
        v = _take.take(g, np.array(k - 1 - i, np.int64), 2)  # the grid lists x (the last dim) first
        v = P.mul(P.add(v, c(1)), c((d - 1) / 2)) if align else P.div(P.sub(P.mul(P.add(v, c(1)), c(d)), c(1)), c(2))
        if mode == "nearest":
            v = P.round(v)
        lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
        if pad == "border":
            outside = P.logical_or(P.less(v, c(lo)), P.greater(v, c(hi)))
            v = P.select(outside, P.minimum(P.maximum(v, c(0)), c(d - 1)), v)
        elif pad == "reflection":
            v = _reflect(v, lo, hi)
        if mode == "nearest":
            points = [(P.cast(v, dtype=_I64), None)]
        else:
            x0 = P.floor(v)
            t = P.sub(v, x0)
            base = P.cast(x0, dtype=_I64)
            if mode == "linear":
                points = [(base, P.sub(c(1), t)), (P.add(base, np.int64(1)), t)]
            else:
                points = [(P.add(base, np.int64(j - 1)), w) for j, w in enumerate(_cubic(t, gdt))]
        fixed = []
        for idx, w in points:
            if pad == "zeros":
                valid = P.logical_and(P.greater_equal(idx, np.int64(0)), P.less(idx, np.int64(d)))
                idx = P.minimum(P.maximum(idx, np.int64(0)), np.int64(d - 1))
                fixed.append((idx, w, valid))
            elif pad == "border":
                fixed.append((P.minimum(P.maximum(idx, np.int64(0)), np.int64(d - 1)), w, None))
            else:
                r = _reflect(P.cast(idx, dtype=gdt), lo, hi)
                fixed.append((P.minimum(P.maximum(P.cast(r, dtype=_I64), np.int64(0)), np.int64(d - 1)), w, None))
        taps.append(fixed)
    flat_x = P.reshape(x, shape=[batch, chans, int(np.prod(dims))])
    strides = [int(np.prod(dims[i + 1:])) for i in range(k)]
    total = None
    for combo in itertools.product(*taps):
        flat, weight, valid = None, None, None
        for (idx, w, ok), st in zip(combo, strides):
            term = P.mul(idx, np.int64(st)) if st != 1 else idx
            flat = term if flat is None else P.add(flat, term)
            if w is not None:
                weight = w if weight is None else P.mul(weight, w)
            if ok is not None:
                valid = ok if valid is None else P.logical_and(valid, ok)
        if valid is not None:
            weight = P.select(valid, weight if weight is not None else c(1), c(0))
        index = P.add(P.reshape(flat, shape=[batch, 1, m]), np.zeros((1, chans, 1), np.int64))
        val = P.gather_elements(flat_x, index, axis=2)
        if weight is not None:
            w = weight if gdt == dt else P.cast(weight, dtype=dt)
            val = P.mul(val, P.reshape(w, shape=[batch, 1, m]))
        total = val if total is None else P.add(total, val)
    return P.reshape(total, shape=[batch, chans] + outs)
