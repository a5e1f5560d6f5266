"""The blocked channel layout NCHWc inside imported CNNs (issue 23), as onnxruntime's NchwcTransformer: when
a conv runs blocked, and how values and filters are laid out (the pass itself: _nchwc_pass.py).

On by default for graphs with a depthwise conv (MobileNet, EfficientNet;
docs/nchwc.md has the numbers); OPFORGE_NCHWC=0 turns it off, =1 applies
it to every conv it can run. Other graphs (ResNet, SqueezeNet) get the
'mixed' layout on an Intel CPU (OPFORGE_NCHWC=mixed: on any): only the dense
convs whose shape mixed_wins picks run blocked. At import, each maximal region of float32 Convs (one group, or depthwise)
with the elementwise operators between them (Relu, HardSwish, HardSigmoid,
Sigmoid, Clip, Add and Mul of two blocked values, GlobalAveragePool) runs in
[N, ceil(C / B), H, W, B] (cpp/ops/nchwc_ops.cc): the filters are laid out
once here, a network's first conv reads the NCHW input directly, a Conv ->
Add (residual) pair becomes one conv, a squeeze-and-excitation Mul becomes
the scale input of the 1x1 conv reading it, and a value leaves the layout
(ReorderFromNchwc) only where something outside the region reads it. The
lanes past a layer's channel count hold values the next conv reads against
zero weights, and are dropped at the boundary.
"""
import os

import numpy as np

_BLOCK: list[int] = []


def mode():
    """'all' (OPFORGE_NCHWC=1: every conv the layout runs), 'off' (0), 'mixed' (=mixed: the dense layers the
    blocked kernel wins, see mixed_wins), else 'auto' (the default): graphs with a depthwise conv, their
    pointwise and depthwise convs and a first conv of few channels only; other graphs 'mixed' on an Intel
    CPU (measured there), unchanged elsewhere (Zen 5 was tuned without it)."""
    v = os.environ.get("OPFORGE_NCHWC", "")
    return "all" if v == "1" else "off" if v == "0" else "mixed" if v == "mixed" else "auto"


def intel_cpu():
    """The CPU's vendor is Intel (/proc/cpuinfo), unless OPFORGE_CONV_TUNING=amd or =intel says otherwise, as
    the conv kernels' own per-CPU settings (cpp/kernels/conv/conv_tuning.cc)."""
    forced = os.environ.get("OPFORGE_CONV_TUNING", "")
    if forced in ("amd", "intel"):
        return forced == "intel"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return "GenuineIntel" in line
    except OSError:
        pass
    return False


# Output pixels (all images of a call) up to which the 'mixed' layout runs a dense conv blocked; measured on
# ResNet-18 and SqueezeNet (Xeon, AVX-512). Where a call has more, the packed GEMM (several images' columns side
# by side) and Winograd (enough 4x4 tiles) beat the direct blocked kernel.
MIXED_STRIDED_PIXELS = 784  # 28x28 at batch 1
MIXED_STEM_PIXELS = 12544  # 112x112 at batch 1 (the one measured)
# A stride-1 conv runs blocked up to MIXED_SMALL_PIXELS in all and MIXED_SMALL_PLANE per image: 14x14 at
# batch 1, 7x7 and 13x13 at batch 8. Since the blocked kernel's rows over (block, tap) lists
# (nchwc_taps_isa.inc), ResNet-18 b8 runs its 7x7 stage blocked and SqueezeNet b8 its 13x13 fire module (two
# threads, chrt, interleaved with onnxruntime in one process, load 5-7: ResNet-18 b8 ort/opforge 1.00 -> 1.10x,
# SqueezeNet b8 1.02-1.06 -> 1.06-1.09x; b1 unchanged). Planes of 784 (ResNet's 28x28 and SqueezeNet's 27x27
# layers at batch 1) lost: ResNet b1 0.94x against 0.975x, SqueezeNet b1 0.81x against 0.90x.
MIXED_SMALL_PIXELS = 1352
# A stride-1 conv that expands few channels (C <= MIXED_EXPAND_IN, O >= 2C: SqueezeNet's fire expands) runs
# blocked up to MIXED_EXPAND_PIXELS output pixels per call: Winograd's and the GEMM's depth is C (x 9) there.
MIXED_EXPAND_IN = int(os.environ.get("OPFORGE_NCHWC_EXPAND_IN", 64))
MIXED_EXPAND_PIXELS = int(os.environ.get("OPFORGE_NCHWC_EXPAND_PIXELS", 2916))
MIXED_SMALL_PLANE = 196


def mixed_wins(w, strides, out_pixels, blocked_input, block, plane=None, stem_feeds_blocked=False):
    """Whether the 'mixed' layout runs this dense conv (filter w [O, C, kh, kw]; out_pixels: N * OH * OW, None
    where unknown; plane: OH * OW, out_pixels if not given) blocked. Measured per layer at batch 1 (Xeon, one thread, blocked against packed NCHW):
    ResNet-18's strided 3x3 convs 0.82-1.16 against 1.22-1.42 ms and 1x1 s2 0.105 against 0.16 ms; its 3x3 at
    7x7 2.5-2.6 against 2.7-2.9 ms, at 14x14 even (1.6-1.8 ms both), at 28x28 and 56x56 Winograd wins (1.4-1.6
    against 1.6); SqueezeNet's 13x13 layers 1.87 against 2.20 ms in all. At batch 8 the packed GEMM wins all
    but the convs to 7x7 (MIXED_SMALL_PIXELS). A 1x1 conv whose input is blocked already runs blocked (no
    reorder). An expand (MIXED_EXPAND_IN) runs blocked at batch 1. A stem (fewer than `block` input channels)
    runs blocked at batch 1 where stem_feeds_blocked: its output reaches, through Relu and MaxPool (blocked
    now), a conv that runs blocked, so no reorder follows it (SqueezeNet, one thread: 2.06 -> 1.85 ms)."""
    o, c, kh, kw = w.shape
    if out_pixels is None:
        return False
    if c < block:  # a stem (reads the NCHW input): blocked where its pool's output goes on blocked
        return stem_feeds_blocked and out_pixels <= MIXED_STEM_PIXELS
    if (kh, kw) == (1, 1) and blocked_input:
        return True
    if max(strides) > 1:
        return out_pixels <= MIXED_STRIDED_PIXELS
    if c <= MIXED_EXPAND_IN and o >= 2 * c and out_pixels <= MIXED_EXPAND_PIXELS:
        return True
    return out_pixels <= MIXED_SMALL_PIXELS and (out_pixels if plane is None else plane) <= MIXED_SMALL_PLANE


def block_size():
    """16 on AVX-512, else 8 (NchwcBlockSize; OPFORGE_NCHWC_BLOCK overrides, for tests)."""
    forced = os.environ.get("OPFORGE_NCHWC_BLOCK")
    if forced:
        return int(forced)
    if not _BLOCK:
        from opforge import ops as P
        from opforge.onnx import _compile
        with _compile.eager():
            _BLOCK.append(int(np.asarray(P.nchwc_block_size().numpy())))
    return _BLOCK[0]


def blocks(c, b):
    return -(-c // b)


def layout_filter(w, groups, block, nchw_input=False):
    """W [O, C / groups, kh, kw] laid out flat as Conv2DNchwc reads it (zeros past O and C)."""
    w = np.asarray(w, np.float32)
    o, cg, kh, kw = w.shape
    ob = blocks(o, block)
    if groups != 1:  # depthwise: [OB, kh, kw, B]
        pad = np.zeros((ob * block, kh, kw), np.float32)
        pad[:o] = w[:, 0]
        return np.ascontiguousarray(pad.reshape(ob, block, kh, kw).transpose(0, 2, 3, 1)).reshape(-1)
    if nchw_input:  # [OB, kh, kw, C, B]
        pad = np.zeros((ob * block, cg, kh, kw), np.float32)
        pad[:o] = w
        return np.ascontiguousarray(pad.reshape(ob, block, cg, kh, kw).transpose(0, 3, 4, 2, 1)).reshape(-1)
    ib = blocks(cg, block)  # [OB, IB, kh, kw, B in, B out]
    pad = np.zeros((ob * block, ib * block, kh, kw), np.float32)
    pad[:o, :cg] = w
    return np.ascontiguousarray(pad.reshape(ob, block, ib, block, kh, kw).transpose(0, 2, 4, 5, 3, 1)).reshape(-1)


def layout_bias(b, o, block):
    out = np.zeros(blocks(o, block) * block, np.float32)
    if b is not None:
        out[:o] = b
    return out


def to_nchwc(x, block):
    """numpy reference of ReorderToNchwc."""
    n, c, h, w = x.shape
    pad = np.zeros((n, blocks(c, block) * block, h, w), x.dtype)
    pad[:, :c] = x
    return np.ascontiguousarray(pad.reshape(n, -1, block, h, w).transpose(0, 1, 3, 4, 2))


def from_nchwc(x, c):
    """numpy reference of ReorderFromNchwc."""
    n, cb, h, w, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w)[:, :c])
