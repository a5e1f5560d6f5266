"""Convolution layers (NCHW): Conv1d, Conv2d. Weights start as PyTorch's do (uniform, bound 1 / sqrt(fan_in))."""

import numpy as np

from opforge import errors as _errors
from opforge.nn import functional_vision as F
from opforge.nn.layer import Layer, register_layer


def _tuple(v, n):
    return [int(v)] * n if isinstance(v, int) else [int(i) for i in v]


class _ConvNd(Layer):
    _dims = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, name=None, dtype="float32", seed=None):
        super().__init__(name, dtype)
        kind = type(self).__name__
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise _errors.InvalidArgumentError(
                f"{kind}: in_channels {in_channels} and out_channels {out_channels} must divide by groups {groups}")
        k = _tuple(kernel_size, self._dims)
        self.config = {"in_channels": int(in_channels), "out_channels": int(out_channels), "kernel_size": k,
                       "stride": _tuple(stride, self._dims), "dilation": _tuple(dilation, self._dims),
                       "padding": padding if isinstance(padding, str) else _tuple(padding, self._dims),
                       "groups": int(groups), "bias": bool(bias)}
        fan_in = in_channels // groups * int(np.prod(k))
        bound = 1.0 / np.sqrt(fan_in) if fan_in else 0.0
        rng = np.random.default_rng(seed)
        self.add_weight("weight", rng.uniform(-bound, bound, (out_channels, in_channels // groups, *k)))
        if bias:
            self.add_weight("bias", rng.uniform(-bound, bound, (out_channels,)))


@register_layer
class Conv2d(_ConvNd):
    """2-D convolution over [N, C, H, W]; padding an int, a pair, 4 ints (top, left, bottom, right), 'same' or 'valid'."""

    def forward(self, x):
        c = self.config
        return F.conv2d(x, self._weights["weight"], self._weights.get("bias"), c["stride"], c["padding"],
                        c["dilation"], c["groups"])


@register_layer
class Conv1d(_ConvNd):
    """1-D convolution over [N, C, L] (Conv2D over a height of 1)."""

    _dims = 1

    def forward(self, x):
        c = self.config
        pad = c["padding"] if isinstance(c["padding"], str) else c["padding"][0]
        return F.conv1d(x, self._weights["weight"], self._weights.get("bias"), c["stride"][0], pad,
                        c["dilation"][0], c["groups"])


@register_layer
class ConvTranspose2d(Layer):
    """2-D transposed convolution over [N, C, H, W]; weight [in, out / groups, kh, kw] as PyTorch's (and its init:
    uniform, bound 1 / sqrt(out / groups * kh * kw)). padding is an int, a pair or 4 ints (top, left, bottom, right)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, name=None, dtype="float32", seed=None):
        super().__init__(name, dtype)
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise _errors.InvalidArgumentError(
                f"ConvTranspose2d: in_channels {in_channels} and out_channels {out_channels} must divide by groups "
                f"{groups}")
        k = _tuple(kernel_size, 2)
        self.config = {"in_channels": int(in_channels), "out_channels": int(out_channels), "kernel_size": k,
                       "stride": _tuple(stride, 2), "padding": _tuple(padding, 2) if isinstance(padding, int)
                       else [int(p) for p in padding], "output_padding": _tuple(output_padding, 2),
                       "groups": int(groups), "bias": bool(bias), "dilation": _tuple(dilation, 2)}
        fan_in = out_channels // groups * int(np.prod(k))
        bound = 1.0 / np.sqrt(fan_in) if fan_in else 0.0
        rng = np.random.default_rng(seed)
        self.add_weight("weight", rng.uniform(-bound, bound, (in_channels, out_channels // groups, *k)))
        if bias:
            self.add_weight("bias", rng.uniform(-bound, bound, (out_channels,)))

    def forward(self, x):
        c = self.config
        return F.conv_transpose2d(x, self._weights["weight"], self._weights.get("bias"), c["stride"], c["padding"],
                                  c["output_padding"], c["groups"], c["dilation"])
