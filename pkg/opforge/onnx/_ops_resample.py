"""ONNX Pad and Resize (every mode, coordinate transformation, axes and antialias form).

Pad's pads (and axes) must be constants; negative pads (cropping) become a
Slice after the Pad and need static dims. Resize needs static shapes and
constant scales/sizes/roi: it is separable, so each resized axis is a
gather (nearest) or a MatMul with a weight matrix computed at import from
the ONNX formulas (linear, cubic, antialias, exclude_outside); integer
nearest upscaling and 4-D bilinear keep their own kernels.
"""

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx import _take
from opforge.onnx._node import FLOAT, INT, INTS, STRING, converter, dtype_of, shape_of

_PAD_MODES = ("constant", "reflect", "edge", "wrap")


@converter("Pad", (2, 11, 13, 18, 19, 21, 23, 24, 25), {"mode": STRING, "pads": INTS, "value": FLOAT})
def _pad(n):
    x = n.input(0)
    shape = shape_of(x)
    rank = len(shape)
    mode = n.attr("mode", "constant")
    if mode not in _PAD_MODES:
        raise n.fail(f"mode {mode!r} is not one of {', '.join(_PAD_MODES)}")
    if n.version < 11:
        pads, value = list(n.attr("pads", [])), n.attr("value", 0.0)
    else:
        pads = n.static_ints(1, "pads")
        value = 0.0
        if n.has(2):
            v = n.static(2, "constant_value").reshape(-1)
            value = float(v[0]) if v.size else 0.0
    axes = list(range(rank))
    if n.version >= 18 and n.has(3):
        axes = [n.axis(a, rank, "axes") for a in n.static_ints(3, "axes")]
    if len(pads) != 2 * len(axes):
        raise n.fail(f"pads {pads} must have 2 entries per padded axis ({len(axes)})")
    begin, end = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[i + len(axes)]
    y = P.pad(x, pads=[max(0, p) for p in begin + end], mode=mode, constant_value=value)
    if min(begin + end) >= 0:
        return y
    if any(d is None for d in shape):
        raise n.fail("negative pads (cropping) need static dims", UnimplementedError)
    ys = shape_of(y)
    start = [max(0, -b) for b in begin]
    size = [ys[a] - start[a] - max(0, -end[a]) for a in range(rank)]
    if min(size) < 0:
        raise n.fail(f"pads {pads} crop more than the input {list(shape)} holds")
    return P.slice(y, begin=start, size=size)


_LINEAR_COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
_COORDS = _LINEAR_COORDS + ("half_pixel_symmetric", "tf_crop_and_resize")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize_plan(n, shape):
    """(scales, output sizes, roi) per axis of X, from scales or sizes (constants) and axes."""
    rank = len(shape)
    axes = [n.axis(a, rank, "axes") for a in n.attr("axes", list(range(rank)))]
    if len(set(axes)) != len(axes):
        raise n.fail(f"axes {n.attr('axes')} repeat an axis")
    roi = [0.0] * rank + [1.0] * rank
    roi_given = n.has(1) and n.static(1, "roi").size
    if roi_given:
        given = [float(v) for v in n.static(1, "roi").reshape(-1)]
        if len(given) != 2 * len(axes):
            raise n.fail(f"roi {given} must have 2 entries per resized axis ({len(axes)})")
        for i, a in enumerate(axes):
            roi[a], roi[rank + a] = given[i], given[len(axes) + i]
    scales_in = 2
    sizes = n.static_ints(3, "sizes") if n.has(3) else []
    if sizes:
        if n.has(scales_in) and n.static(scales_in, "scales").size:
            raise n.fail("only one of scales and sizes may be given")
        if len(sizes) != len(axes):
            raise n.fail(f"sizes {sizes} must have one entry per resized axis ({len(axes)})")
        out = list(shape)
        for i, a in enumerate(axes):
            out[a] = sizes[i]
        scales = [out[a] / shape[a] for a in range(rank)]
        policy = n.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            if policy not in ("not_larger", "not_smaller"):
                raise n.fail(f"keep_aspect_ratio_policy {policy!r} is not one of stretch, not_larger, not_smaller")
            pick = min if policy == "not_larger" else max
            scale = pick(scales[a] for a in axes)
            scales = [scale if a in axes else 1.0 for a in range(rank)]
            out = [int(scale * shape[a] + 0.5) if a in axes else shape[a] for a in range(rank)]
        return scales, out, roi
    given = [float(v) for v in n.static(scales_in, "scales").reshape(-1)] if n.has(scales_in) else []
    if len(given) != len(axes) or min(given, default=1.0) <= 0:
        raise n.fail(f"scales {given} must hold one positive entry per resized axis ({len(axes)})")
    scales = [1.0] * rank
    for i, a in enumerate(axes):
        scales[a] = given[i]
    return scales, [int(np.floor(scales[a] * shape[a])) for a in range(rank)], roi


def _cubic(d, a):
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _coeffs(n, mode, ratio, scale):
    """Per output position (rows), the weights of its len-k window of neighbours (ONNX Resize's
    formulas); ratio is in (0, 1], the distance past the left neighbour."""
    antialias = n.attr("antialias", 0) and scale < 1
    r = ratio[:, None]
    if mode == "nearest":
        near = n.attr("nearest_mode", "round_prefer_floor")
        whole = r == 1.0
        right = {"round_prefer_floor": r > 0.5, "round_prefer_ceil": r >= 0.5,
                 "floor": np.zeros_like(r, bool), "ceil": np.ones_like(r, bool)}[near] | whole
        return np.concatenate([~right, right], axis=1).astype(np.float64)
    if mode == "linear":
        if not antialias:
            return np.concatenate([1 - r, r], axis=1)
        start = int(np.floor(-1 / scale) + 1)
        w = np.clip(1 - np.abs((np.arange(start, 2 - start)[None, :] - r) * scale), 0, 1)
    else:
        a = n.attr("cubic_coeff_a", -0.75)
        if not antialias:
            return _cubic(np.concatenate([r + 1, r, 1 - r, 2 - r], axis=1), a)
        start = int(np.floor(-2 / scale) + 1)
        w = _cubic((np.arange(start, 2 - start)[None, :] - r) * scale, a)
    return w / w.sum(axis=1, keepdims=True)


def _axis_weights(n, mode, size, out, scale, lo_hi):
    """(out x size) weights of one axis, and the output positions tf_crop_and_resize extrapolates."""
    coord = n.attr("coordinate_transformation_mode", "half_pixel")
    width = scale * size  # the real-valued output width the formulas use
    y = np.arange(out, dtype=np.float64)
    outside = None
    if coord == "align_corners":
        x = np.zeros(out) if width == 1 else y * (size - 1) / (width - 1)
    elif coord == "asymmetric":
        x = y / scale
    elif coord == "tf_crop_and_resize":
        lo, hi = lo_hi
        x = np.full(out, (hi - lo) * (size - 1) / 2) if width == 1 else y * (hi - lo) * (size - 1) / (width - 1)
        x = x + lo * (size - 1)
        outside = (x < 0) | (x > size - 1)
    elif coord == "pytorch_half_pixel":
        x = np.full(out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    elif coord == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    else:  # half_pixel_symmetric
        x = size / 2 * (1 - out / width) + (y + 0.5) / scale - 0.5
    left = np.floor(x)
    ratio = np.where(x == left, 1.0, x - left)
    w = _coeffs(n, mode, ratio, scale)
    k = w.shape[1]
    # The k neighbours nearest x (ties to the smaller index), as the reference picks them.
    pad = int(np.ceil(k / 2))
    xp = x + pad
    p = np.floor(xp).astype(np.int64)
    frac = xp - p
    if k % 2 == 0:
        first = p + np.where(frac == 0, -(k // 2), -(k // 2) + 1)
    else:
        first = p + np.where(frac <= 0.5, -((k - 1) // 2), -((k - 1) // 2) + 1)
    idx = first[:, None] + np.arange(k)[None, :] - pad
    if n.attr("exclude_outside", 0):
        w = np.where((idx < 0) | (idx >= size), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    m = np.zeros((out, size))
    np.add.at(m, (np.repeat(np.arange(out), k), np.clip(idx, 0, size - 1).reshape(-1)), w.reshape(-1))
    return m, outside


def _resize_general(n, x, mode, shape, scales, out, roi):
    """Separable resize, one axis at a time: a gather for nearest, a weight matrix otherwise."""
    dt = dtype_of(x)
    if mode != "nearest" and dt.kind != "f":
        raise n.fail(f"mode {mode!r} of {dt} is not supported (floats only)", UnimplementedError)
    rank = len(shape)
    mask = np.ones(out, dtype=bool)
    for a in range(rank):
        if out[a] == shape[a] and scales[a] == 1.0 and n.attr("coordinate_transformation_mode") != \
                "tf_crop_and_resize":
            continue  # an axis left alone (every mode maps it to itself)
        w, outside = _axis_weights(n, mode, shape[a], out[a], scales[a], (roi[a], roi[rank + a]))
        if outside is not None and outside.any():
            mask &= ~outside.reshape([-1 if i == a else 1 for i in range(rank)])
        if mode == "nearest":
            x = _take.take(x, np.argmax(w, axis=1).astype(np.int64), a)
        elif np.array_equal(w, np.eye(*w.shape)):
            continue
        else:
            x = _take.apply_matrix(x, w, a)
    if not mask.all():
        x = P.select(mask, x, np.array(n.attr("extrapolation_value", 0.0), dtype=dt))
    return x


def _resize_nearest(n, x, shape, oh, ow):
    """Integer upscaling, in the coordinate modes where it is pixel repetition; None otherwise."""
    from opforge.nn.functional_vision import upsample_nearest
    if oh % shape[2] or ow % shape[3] or oh < shape[2] or ow < shape[3]:
        return None
    sh, sw = oh // shape[2], ow // shape[3]
    coord = n.attr("coordinate_transformation_mode", "half_pixel")
    near = n.attr("nearest_mode", "round_prefer_floor")
    # With out index i = q * s + r, the source is q (repetition) when:
    ok = ((coord == "asymmetric" and near == "floor")
          or (coord in ("half_pixel", "pytorch_half_pixel") and near in ("round_prefer_floor", "round_prefer_ceil"))
          or (coord == "asymmetric" and near == "round_prefer_floor" and max(sh, sw) <= 2))
    return upsample_nearest(x, [sh, sw]) if ok else None


def _check_resize(n):
    mode = n.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise n.fail(f"mode {mode!r} is not one of nearest, linear, cubic")
    coord = n.attr("coordinate_transformation_mode", "half_pixel")
    if coord not in _COORDS:
        raise n.fail(f"coordinate_transformation_mode {coord!r} is not one of {', '.join(_COORDS)}")
    if n.attr("nearest_mode", "round_prefer_floor") not in _NEAREST:
        raise n.fail(f"nearest_mode {n.attr('nearest_mode')!r} is not one of {', '.join(_NEAREST)}")


@converter("Resize", (11, 13, 18, 19), {
    "mode": STRING, "coordinate_transformation_mode": STRING, "nearest_mode": STRING, "cubic_coeff_a": FLOAT,
    "exclude_outside": INT, "extrapolation_value": FLOAT, "antialias": INT, "axes": INTS,
    "keep_aspect_ratio_policy": STRING}, check=_check_resize)
def _resize(n):
    mode = n.attr("mode", "nearest")
    x = n.input(0)
    shape = shape_of(x)
    if any(d is None for d in shape):
        raise n.fail(f"X needs static dims, got {list(shape)}", UnimplementedError)
    scales, out, roi = _resize_plan(n, shape)
    coord = n.attr("coordinate_transformation_mode", "half_pixel")
    plain = (len(shape) == 4 and out[:2] == list(shape[:2]) and min(out) > 0 and not n.attr("antialias", 0)
             and not n.attr("exclude_outside", 0))
    if plain and mode == "nearest":
        y = _resize_nearest(n, x, shape, out[2], out[3])
        if y is not None:
            return y
    if plain and mode == "linear" and coord in _LINEAR_COORDS and dtype_of(x).kind == "f":
        by_scale = [] if n.has(3) and n.static(3, "sizes").size else scales[2:]
        return P.resize_bilinear(x, size=out[2:], coordinate_mode=coord, scales=by_scale)
    return _resize_general(n, x, mode, shape, scales, out, roi)
