"""Convolution, pooling, normalization and activation functions (NCHW), re-exported by opforge.nn.functional.

Each is a composition of registered ops, so the gradient tape and graphs
record it. Sizes follow PyTorch's arguments; `padding` may be an int, a
pair (height, width), four ints (top, left, bottom, right, ONNX's order),
'valid' or 'same' (ONNX's SAME_UPPER: the odd pixel goes at the end).
"""

from opforge import errors as _errors
from opforge import ops as _ops


def _pair(v, what, fn):
    if isinstance(v, int):
        return [v, v]
    v = [int(i) for i in v]
    if len(v) == 1:
        return v * 2
    if len(v) != 2:
        raise _errors.InvalidArgumentError(f"{fn}: {what} must be an int or a pair, got {v}")
    return v


def same_pads(size, kernel, stride, dilation, upper=True):
    """(begin, end) pads that make out = ceil(size / stride) (ONNX SAME_UPPER, or SAME_LOWER)."""
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - size)
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


def _pads(padding, x_shape, kernel, stride, dilation, fn):
    """Four pads (top, left, bottom, right) from PyTorch/ONNX-style padding."""
    if isinstance(padding, str):
        mode = padding.lower()
        if mode == "valid":
            return [0, 0, 0, 0]
        if mode == "same":
            if any(d is None or d < 0 for d in x_shape[2:]):
                raise _errors.InvalidArgumentError(f"{fn}: padding='same' needs known spatial dims, got {x_shape}")
            (t, b), (l, r) = (same_pads(x_shape[2 + i], kernel[i], stride[i], dilation[i]) for i in range(2))
            return [t, l, b, r]
        raise _errors.InvalidArgumentError(f"{fn}: padding must be 'same', 'valid' or ints, got {padding!r}")
    if isinstance(padding, int):
        return [padding] * 4
    p = [int(i) for i in padding]
    if len(p) == 2:
        return [p[0], p[1], p[0], p[1]]
    if len(p) == 4:
        return p
    raise _errors.InvalidArgumentError(f"{fn}: padding must be an int, 2 or 4 ints, 'same' or 'valid', got {padding}")


def _shape(x):
    return tuple(getattr(x, "shape", ()))


def _channel(v, c):
    """A per-channel vector [C] as [1, C, 1, 1] for broadcasting over NCHW."""
    return _ops.reshape(v, shape=[1, c, 1, 1])


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation), x [N, C, H, W], weight [O, C / groups, kh, kw]."""
    ws = _shape(weight)
    if len(ws) != 4:
        raise _errors.InvalidArgumentError(f"conv2d: weight must be 4-D [out, in / groups, kh, kw], got shape {ws}")
    s, d = _pair(stride, "stride", "conv2d"), _pair(dilation, "dilation", "conv2d")
    pads = _pads(padding, _shape(x), ws[2:], s, d, "conv2d")
    y = _ops.conv2d(x, weight, strides=s, pads=pads, dilations=d, groups=int(groups))
    return y if bias is None else _ops.add(y, _channel(bias, ws[0]))


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution, x [N, C, L], weight [O, C / groups, k]: Conv2D over a height of 1."""
    xs, ws = _shape(x), _shape(weight)
    if len(xs) != 3 or len(ws) != 3:
        raise _errors.InvalidArgumentError(
            f"conv1d: x must be 3-D [N, C, L] and weight 3-D [O, C / groups, k], got {xs} and {ws}")
    if isinstance(padding, str):
        pad = padding if padding.lower() == "valid" else None
        if pad is None:
            lo, hi = same_pads(xs[2], ws[2], int(stride), int(dilation))
            pad = [0, lo, 0, hi]
    else:
        p = [int(padding)] * 2 if isinstance(padding, int) else [int(i) for i in padding]
        pad = [0, p[0], 0, p[-1]]
    y = conv2d(_ops.reshape(x, shape=[xs[0], xs[1], 1, xs[2]]), _ops.reshape(weight, shape=[ws[0], ws[1], 1, ws[2]]),
               bias, stride=[1, int(stride)], padding=pad, dilation=[1, int(dilation)], groups=groups)
    ys = _shape(y)
    return _ops.reshape(y, shape=[ys[0], ys[1], ys[3]])


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-D transposed convolution, x [N, C, H, W], weight [C, O / groups, kh, kw] (PyTorch's argument order).

    `padding` (an int, a pair or 4 ints top, left, bottom, right) is removed
    from the full output; `output_padding` adds rows / columns at the end.
    """
    ws = _shape(weight)
    if len(ws) != 4:
        raise _errors.InvalidArgumentError(
            f"conv_transpose2d: weight must be 4-D [in, out / groups, kh, kw], got shape {ws}")
    if isinstance(padding, str):
        raise _errors.InvalidArgumentError("conv_transpose2d: padding must be ints, not a string")
    s, d = _pair(stride, "stride", "conv_transpose2d"), _pair(dilation, "dilation", "conv_transpose2d")
    pads = _pads(padding, _shape(x), ws[2:], s, d, "conv_transpose2d")
    op = _pair(output_padding, "output_padding", "conv_transpose2d")
    y = _ops.conv_transpose2d(x, weight, strides=s, pads=pads, dilations=d, groups=int(groups), output_padding=op)
    return y if bias is None else _ops.add(y, _channel(bias, ws[1] * int(groups)))


_TORCH_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "edge": "edge",
                    "circular": "wrap", "wrap": "wrap"}


def pad(x, pad, mode="constant", value=0.0):  # noqa: A002 (PyTorch's names)
    """torch.nn.functional.pad: `pad` pairs (begin, end) from the last axis backwards; mode 'constant',
    'reflect', 'replicate' (ONNX 'edge') or 'circular' (ONNX 'wrap'). One Pad op, with a gradient."""
    rank = len(_shape(x))
    p = [int(v) for v in pad]
    if len(p) % 2 or len(p) // 2 > rank:
        raise _errors.InvalidArgumentError(f"pad: pad must hold (begin, end) pairs for at most {rank} axes, got {p}")
    if mode not in _TORCH_PAD_MODES:
        raise _errors.InvalidArgumentError(f"pad: mode must be one of {sorted(_TORCH_PAD_MODES)}, got {mode!r}")
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(p) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = p[2 * i], p[2 * i + 1]
    return _ops.pad(x, pads=begins + ends, mode=_TORCH_PAD_MODES[mode], constant_value=float(value))


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    k = _pair(kernel_size, "kernel_size", "max_pool2d")
    s = k if stride is None else _pair(stride, "stride", "max_pool2d")
    d = _pair(dilation, "dilation", "max_pool2d")
    pads = _pads(padding, _shape(x), k, s, d, "max_pool2d")
    return _ops.max_pool2d(x, ksize=k, strides=s, pads=pads, dilations=d, ceil_mode=bool(ceil_mode))


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    k = _pair(kernel_size, "kernel_size", "avg_pool2d")
    s = k if stride is None else _pair(stride, "stride", "avg_pool2d")
    pads = _pads(padding, _shape(x), k, s, [1, 1], "avg_pool2d")
    return _ops.avg_pool2d(x, ksize=k, strides=s, pads=pads, ceil_mode=bool(ceil_mode),
                           count_include_pad=bool(count_include_pad))


def adaptive_avg_pool2d(x, output_size):
    return _ops.adaptive_avg_pool2d(x, output_size=_pair(output_size, "output_size", "adaptive_avg_pool2d"))


def global_avg_pool2d(x):
    """Mean over height and width, keeping them as 1s: [N, C, 1, 1]."""
    return _ops.mean(x, axis=[2, 3], keepdims=True)


def global_max_pool2d(x):
    return _ops.max(x, axis=[2, 3], keepdims=True)


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Batch normalization over every axis but 1 of [N, C, ...] input, as torch.nn.functional.batch_norm.

    One BatchNorm op (and one BatchNormGrad in backward). In training the batch
    statistics normalise x and the running statistics (numpy arrays or Tensors,
    updated in place; None: not tracked) move toward them by `momentum`, with
    the unbiased variance as PyTorch. In eval the running statistics are used.
    """
    import numpy as np
    xs = _shape(x)
    if len(xs) < 2:
        raise _errors.InvalidArgumentError(f"batch_norm: x must be [N, C, ...], got shape {xs}")
    c = xs[1]
    dt = _np_dtype(x)
    if not training and (running_mean is None or running_var is None):
        raise _errors.InvalidArgumentError("batch_norm: eval mode needs running_mean and running_var")
    args = [weight if weight is not None else np.ones(c, dt), bias if bias is not None else np.zeros(c, dt),
            running_mean if running_mean is not None else np.zeros(c, dt),
            running_var if running_var is not None else np.ones(c, dt)]
    y, bm, bv = _ops.batch_norm(x, *args, epsilon=float(eps), training=bool(training))
    if training and running_mean is not None:
        count = int(np.prod([d for i, d in enumerate(xs) if i != 1]))
        rm, rv = _np_view(running_mean), _np_view(running_var)
        rm *= 1 - momentum
        rm += momentum * np.asarray(bm.numpy(), rm.dtype)
        rv *= 1 - momentum
        rv += (momentum * count / max(count - 1, 1)) * np.asarray(bv.numpy(), rv.dtype)
    return y


def _np_view(t):
    a = t.numpy() if hasattr(t, "numpy") else t
    if not a.flags.writeable:
        raise _errors.InvalidArgumentError("batch_norm: the running statistics must be writable")
    return a


def _np_dtype(x):
    import numpy as np
    dt = getattr(x, "dtype", None)
    return np.dtype(getattr(dt, "name", dt)) if dt is not None else np.asarray(x).dtype


def clip(x, min=None, max=None):  # noqa: A002 (PyTorch's names)
    if min is not None:
        x = _ops.maximum(x, float(min))
    if max is not None:
        x = _ops.minimum(x, float(max))
    return x


def relu6(x):
    return clip(x, 0.0, 6.0)


def leaky_relu(x, negative_slope=0.01):
    """x where x >= 0, else negative_slope * x."""
    return _ops.select(_ops.greater_equal(x, 0.0), x, _ops.mul(x, float(negative_slope)))


def hardsigmoid(x, alpha=1.0 / 6, beta=0.5):
    """max(0, min(1, alpha * x + beta)); PyTorch's default is alpha 1/6, ONNX's 0.2."""
    return clip(_ops.add(_ops.mul(x, float(alpha)), float(beta)), 0.0, 1.0)


def hardswish(x):
    return _ops.mul(x, hardsigmoid(x))


def silu(x):
    return _ops.mul(x, _ops.sigmoid(x))


def flatten(x, start_dim=1):
    """Collapses the axes from start_dim on into one, e.g. [N, C, H, W] -> [N, C * H * W]."""
    xs = _shape(x)
    start = start_dim + len(xs) if start_dim < 0 else start_dim
    rest = 1
    for d in xs[start:]:
        rest *= d
    return _ops.reshape(x, shape=list(xs[:start]) + [rest])


def upsample_nearest(x, scale_factor):
    """Nearest-neighbour upsampling of [N, C, H, W] by integer factors (each pixel repeated), with gradients.

    out[n, c, i, j] = x[n, c, i // sh, j // sw]: a reshape, a broadcast multiply by ones and a reshape.
    """
    sh, sw = _pair(scale_factor, "scale_factor", "upsample_nearest")
    xs = _shape(x)
    if len(xs) != 4 or sh < 1 or sw < 1:
        raise _errors.InvalidArgumentError(
            f"upsample_nearest: x must be 4-D and the scale factors integers >= 1, got shape {xs}, {[sh, sw]}")
    import numpy as np
    n, c, h, w = xs
    dt = getattr(x, "dtype", None)
    ones = np.ones((1, 1, 1, sh, 1, sw), dtype=np.dtype(dt.name) if dt is not None else np.asarray(x).dtype)
    y = _ops.mul(_ops.reshape(x, shape=[n, c, h, 1, w, 1]), ones)
    return _ops.reshape(y, shape=[n, c, h * sh, w * sw])


def interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """torch.nn.functional.interpolate for 4-D input: mode 'nearest' (integer upscaling, by factor or output
    size) or 'bilinear' (any size; align_corners as PyTorch, default False: ONNX's half_pixel)."""
    xs = _shape(x)
    if mode == "bilinear":
        if len(xs) != 4 or (size is None) == (scale_factor is None):
            raise _errors.InvalidArgumentError(
                f"interpolate: bilinear needs 4-D x and exactly one of size and scale_factor, got shape {xs}")
        scales = []
        if size is None:
            sf = [float(scale_factor)] * 2 if isinstance(scale_factor, (int, float)) else [float(v) for v in scale_factor]
            size = [int(xs[2] * sf[0]), int(xs[3] * sf[1])]
            scales = sf
        size = _pair(size, "size", "interpolate")
        return _ops.resize_bilinear(x, size=size, scales=[] if align_corners else scales,
                                    coordinate_mode="align_corners" if align_corners else "half_pixel")
    if mode != "nearest":
        raise _errors.UnimplementedError(f"interpolate: mode {mode!r} is not supported ('nearest' or 'bilinear')")
    if size is not None:
        size = _pair(size, "size", "interpolate")
        if len(xs) != 4 or any(o % i for o, i in zip(size, xs[2:])):
            raise _errors.UnimplementedError(f"interpolate: size {size} must be an integer multiple of {xs[2:]}")
        scale_factor = [o // i for o, i in zip(size, xs[2:])]
    return upsample_nearest(x, scale_factor)


__all__ = ["conv2d", "conv1d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "global_avg_pool2d",
           "global_max_pool2d", "batch_norm", "clip", "relu6", "leaky_relu", "hardsigmoid", "hardswish", "silu",
           "flatten", "same_pads", "upsample_nearest", "interpolate", "conv_transpose2d", "pad"]
