"""ONNX Pad and Resize (nearest with integer upscaling, linear on the two spatial axes of 4-D input).

Pad's pads (and axes) must be constants; negative pads (cropping) become a
Slice after the Pad and need static dims. Resize linear takes the coordinate
transformation modes half_pixel, pytorch_half_pixel, align_corners and
asymmetric (what torchvision and YOLO-style exports use).
"""

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx._node import FLOAT, INT, INTS, STRING, converter, shape_of

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


def _resize_target(n, shape):
    """(out_h, out_w, scales or []) of a 4-D Resize from its scales or sizes input (constants)."""
    if n.has(3):
        sizes = n.static_ints(3, "sizes")
        if len(sizes) != 4 or list(sizes[:2]) != list(shape[:2]):
            raise n.fail(f"sizes {sizes}: only H and W of a 4-D input may change", UnimplementedError)
        return sizes[2], sizes[3], []
    scales = [float(v) for v in n.static(2, "scales").reshape(-1)] if n.has(2) else []
    if len(scales) != 4 or scales[:2] != [1.0, 1.0] or min(scales[2:]) <= 0:
        raise n.fail(f"scales {scales}: only H and W of a 4-D input may change", UnimplementedError)
    return int(np.floor(shape[2] * scales[2])), int(np.floor(shape[3] * scales[3])), scales[2:]


def _resize_nearest(n, x, shape, oh, ow):
    """Integer upscaling, in the coordinate modes where it is pixel repetition."""
    from opforge.nn.functional_vision import upsample_nearest
    if oh % shape[2] or ow % shape[3] or oh < shape[2] or ow < shape[3]:
        raise n.fail(f"output size {[oh, ow]}: mode 'nearest' supports integer upscaling of {list(shape[2:])} only",
                     UnimplementedError)
    sh, sw = oh // shape[2], ow // shape[3]
    coord = n.attr("coordinate_transformation_mode", "half_pixel")
    near = n.attr("nearest_mode", "round_prefer_floor")
    # With out index i = q * s + r, the source is q (repetition) when:
    ok = ((coord == "asymmetric" and near == "floor")
          or (coord in ("half_pixel", "pytorch_half_pixel") and near in ("round_prefer_floor", "round_prefer_ceil"))
          or (coord == "asymmetric" and near == "round_prefer_floor" and max(sh, sw) <= 2))
    if not ok:
        raise n.fail(f"coordinate_transformation_mode {coord!r} with nearest_mode {near!r} and scale "
                     f"{[sh, sw]} is not supported", UnimplementedError)
    return upsample_nearest(x, [sh, sw])


_LINEAR_COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")


@converter("Resize", (11, 13, 18, 19), {"mode": STRING, "coordinate_transformation_mode": STRING,
                                         "nearest_mode": STRING, "cubic_coeff_a": FLOAT, "exclude_outside": INT,
                                         "extrapolation_value": FLOAT})
def _resize(n):
    mode = n.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise n.fail(f"mode {mode!r}: only 'nearest' and 'linear' are supported", UnimplementedError)
    x = n.input(0)
    shape = shape_of(x)
    if len(shape) != 4 or any(d is None for d in shape):
        raise n.fail(f"X must be 4-D with static dims, got {list(shape)}", UnimplementedError)
    oh, ow, scales = _resize_target(n, shape)
    if mode == "nearest":
        return _resize_nearest(n, x, shape, oh, ow)
    coord = n.attr("coordinate_transformation_mode", "half_pixel")
    if coord not in _LINEAR_COORDS:
        raise n.fail(f"coordinate_transformation_mode {coord!r} is not supported for mode 'linear' "
                     f"({', '.join(_LINEAR_COORDS)})", UnimplementedError)
    if n.attr("exclude_outside", 0):
        raise n.fail("exclude_outside=1 is not supported", UnimplementedError)
    if oh < 1 or ow < 1:
        raise n.fail(f"the output size {[oh, ow]} is empty")
    return P.resize_bilinear(x, size=[oh, ow], coordinate_mode=coord, scales=scales)
