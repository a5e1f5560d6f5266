"""Convolution layers (NCHW): Conv1d, Conv2d. Weights start as PyTorch's do (uniform, bound 1 / sqrt(fan_in)).

In eval mode, with no gradient to record, a float32 one-group Conv2d runs Conv2DPacked over its filter packed
once (PackConv2DFilter: the GEMM's panels and the Winograd transform, as the ONNX importer packs constant
weights) with the bias fused, where a pack saves work (_pack_pays); elsewhere FusedConv2D (the bias fused). The pack is remade when the weight or bias is replaced or written in place by
opforge (an optimizer step, load_state_dict, the Tensor in-place methods: _write_generation.py);
OPFORGE_NN_PACK_CONV=0 turns it off.
"""

import os

import numpy as np

from opforge import _write_generation
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


_PACK = os.environ.get("OPFORGE_NN_PACK_CONV", "1") != "0"
_NO_BIAS = np.zeros(0, np.float32)


def _packable(x, w, b):
    """Concrete float32 values no gradient is recorded for (eval under no_grad, or weights without grad)."""
    from opforge import Tensor
    from opforge.autodiff import state
    vs = (x, w) if b is None else (x, w, b)
    if state.grad_enabled() and any(getattr(v, "requires_grad", False) for v in vs):
        return False
    return all(isinstance(v, (np.ndarray, Tensor)) and v.dtype == np.float32 for v in vs) and len(w.shape) == 4


def _pack_pays(ws, stride, dilation):
    """Whether a prepacked filter saves per-call work: a 3x3 stride-1 filter with 16+ channels each way (the
    Winograd transform is made once), or more than 64 outputs (the GEMM packs its rows of A on each call; up to
    64 it reads the filter in place). Else the pack costs memory and saves nothing (one thread, CPU time: the
    digits CNN's 1->16 and 16->32 convolutions at batch 256 ran 0.8-0.95x FusedConv2D's speed packed)."""
    o, c, kh, kw = (int(d) for d in ws)
    winograd = kh == kw == 3 and list(stride) == [1, 1] and list(dilation) == [1, 1] and o >= 16 and c >= 16
    return winograd or o > 64


@register_layer
class Conv2d(_ConvNd):
    """2-D convolution over [N, C, H, W]; padding an int, a pair, 4 ints (top, left, bottom, right), 'same' or 'valid'."""

    def forward(self, x):
        c = self.config
        w, b = self._weights["weight"], self._weights.get("bias")
        if not self.training and c["groups"] == 1 and _PACK and _packable(x, w, b):
            if _pack_pays(w.shape, c["stride"], c["dilation"]):
                return self._packed_forward(x, w, b)
            if b is not None:  # nothing a pack saves: the bias in the GEMM's epilogue at least
                from opforge import ops as P
                pads = F._pads(c["padding"], F._shape(x), list(w.shape[2:]), c["stride"], c["dilation"], "conv2d")
                return P.fused_conv2d(x, w, b, strides=c["stride"], pads=pads, dilations=c["dilation"])
        return F.conv2d(x, w, b, c["stride"], c["padding"], c["dilation"], c["groups"])

    def _packed_forward(self, x, w, b):
        from opforge import ops as P
        c = self.config
        k = self.__dict__.get("_pack")  # (weight, bias, generation, blob) it was made from
        gen = _write_generation.generation
        if k is None or k[0] is not w or k[1] is not b or k[2] != gen:
            from opforge import _pywrap_internal as _pw
            _pw.mode_push("eager", None)  # a graph being built gets the convolution, never the packing
            try:
                blob = P.pack_conv2d_filter(w)
            finally:
                _pw.mode_pop("eager", None)
            k = self.__dict__["_pack"] = (w, b, gen, blob)
        ws = [int(d) for d in w.shape]
        s, d = c["stride"], c["dilation"]
        pads = F._pads(c["padding"], F._shape(x), ws[2:], s, d, "conv2d")
        return P.conv2d_packed(x, k[3], b if b is not None else _NO_BIAS, filter_shape=ws, strides=s, pads=pads,
                               dilations=d)


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
