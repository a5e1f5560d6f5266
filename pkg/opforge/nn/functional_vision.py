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
    """Batch normalization over N, H, W of NCHW (or N of [N, C]) input, as torch.nn.functional.batch_norm.

    In training the batch statistics normalise x and the running statistics
    (numpy arrays or Tensors, updated in place) move toward them by
    `momentum`, with the unbiased variance as PyTorch. In eval, x * scale +
    shift with scale = weight / sqrt(running_var + eps).
    """
    xs = _shape(x)
    if len(xs) not in (2, 3, 4):
        raise _errors.InvalidArgumentError(f"batch_norm: x must be [N, C], [N, C, L] or [N, C, H, W], got {xs}")
    c = xs[1]
    axes = [0] + list(range(2, len(xs)))
    view = [1, c] + [1] * (len(xs) - 2)
    if training:
        mean = _ops.mean(x, axis=axes, keepdims=True)
        xc = _ops.sub(x, mean)
        var = _ops.mean(_ops.square(xc), axis=axes, keepdims=True)
        y = _ops.mul(xc, _ops.div(1.0, _ops.sqrt(_ops.add(var, eps))))
        if running_mean is not None:
            import numpy as np
            count = int(np.prod([xs[a] for a in axes]))
            bm = np.asarray(mean.numpy()).reshape(c)
            bv = np.asarray(var.numpy()).reshape(c) * (count / max(count - 1, 1))
            rm, rv = _np_view(running_mean), _np_view(running_var)
            rm *= 1 - momentum
            rm += momentum * bm
            rv *= 1 - momentum
            rv += momentum * bv
    else:
        inv = _ops.div(1.0, _ops.sqrt(_ops.add(running_var, eps)))
        y = _ops.mul(_ops.sub(x, _ops.reshape(running_mean, shape=view)), _ops.reshape(inv, shape=view))
    if weight is not None:
        y = _ops.mul(y, _ops.reshape(weight, shape=view))
    if bias is not None:
        y = _ops.add(y, _ops.reshape(bias, shape=view))
    return y


def _np_view(t):
    a = t.numpy() if hasattr(t, "numpy") else t
    if not a.flags.writeable:
        raise _errors.InvalidArgumentError("batch_norm: the running statistics must be writable")
    return a


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


def interpolate(x, size=None, scale_factor=None, mode="nearest"):
    """torch.nn.functional.interpolate for mode='nearest' and integer upscaling (by factor or output size)."""
    if mode != "nearest":
        raise _errors.UnimplementedError(f"interpolate: mode {mode!r} is not supported (only 'nearest')")
    xs = _shape(x)
    if size is not None:
        size = _pair(size, "size", "interpolate")
        if len(xs) != 4 or any(o % i for o, i in zip(size, xs[2:])):
            raise _errors.UnimplementedError(f"interpolate: size {size} must be an integer multiple of {xs[2:]}")
        scale_factor = [o // i for o, i in zip(size, xs[2:])]
    return upsample_nearest(x, scale_factor)


__all__ = ["conv2d", "conv1d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "global_avg_pool2d",
           "global_max_pool2d", "batch_norm", "clip", "relu6", "leaky_relu", "hardsigmoid", "hardswish", "silu",
           "flatten", "same_pads", "upsample_nearest", "interpolate"]
