"""The NCHWc ops (cpp/ops/nchwc_ops.cc) against numpy and FusedConv2D: both blocks, every conv kind, bad input.

Every instruction set: the last test reruns the conv cases with OPFORGE_SIMD capped.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import opforge as of
from opforge import errors, ops as P

pytest.importorskip("onnx")
from opforge.onnx._layout_nchwc import from_nchwc, layout_bias, layout_filter, to_nchwc  # noqa: E402

ACTS = {"none": lambda v: v, "relu": lambda v: np.maximum(v, 0), "hardswish": lambda v: v * np.clip(v / 6 + 0.5, 0, 1),
        "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "silu": lambda v: v / (1 + np.exp(-v))}

# (n, c, h, w, o, k, stride, pads, dilation, depthwise, nchw input, residual, activation[, SE scale])
CASES = [
    (2, 40, 6, 7, 24, 1, 1, [0, 0, 0, 0], 1, False, False, True, "none", True),        # pointwise after an SE Mul
    (1, 20, 9, 8, 17, 3, 2, [1, 1, 0, 1], 1, False, False, False, "relu", True),       # dense 3x3 with a scale
    (2, 24, 3, 3, 40, 1, 1, [0, 0, 0, 0], 1, False, False, False, "silu", True),       # scale on x (x < filter)
    (1, 24, 13, 11, 40, 1, 1, [0, 0, 0, 0], 1, False, False, False, "none"),         # pointwise, C, O not blocks
    (2, 16, 7, 7, 96, 1, 1, [0, 0, 0, 0], 1, False, False, True, "relu"),            # pointwise + residual
    (2, 40, 9, 10, 40, 3, 2, [1, 1, 1, 1], 1, True, False, False, "hardswish"),      # depthwise stride 2
    (2, 37, 9, 10, 37, 5, 1, [2, 1, 2, 3], 2, True, False, True, "relu"),            # depthwise dilated, asym pads
    (1, 72, 5, 5, 72, 5, 2, [2, 2, 2, 2], 1, True, False, False, "silu"),            # tiny plane: all border
    (2, 24, 14, 14, 24, 3, 1, [1, 1, 1, 1], 1, True, False, False, "silu"),          # stride 1: x columns reused
    (1, 40, 7, 7, 40, 5, 1, [2, 2, 2, 2], 1, True, False, True, "relu"),             # stride 1, a 7-pixel row
    (1, 16, 16, 11, 16, 5, 1, [2, 1, 2, 3], 1, True, False, False, "none"),          # stride 1, asymmetric pads
    (1, 16, 6, 16, 16, 3, 1, [1, 1, 1, 1], 1, True, False, True, "sigmoid"),         # stride 1, residual, 2 tiles
    (1, 3, 17, 19, 16, 3, 2, [1, 1, 1, 1], 1, False, True, False, "hardswish"),      # a stem reading NCHW
    (1, 3, 30, 30, 32, 3, 2, [1, 1, 1, 1], 1, False, True, False, "relu"),           # a stem: 12-pixel tiles
    (1, 20, 7, 7, 24, 1, 1, [0, 0, 0, 0], 1, False, False, True, "silu"),           # two blocks (B = 16) at 12 pixels
    (2, 20, 12, 12, 30, 3, 1, [1, 0, 2, 1], 1, False, False, True, "sigmoid"),       # dense 3x3
    (1, 17, 1, 1, 9, 1, 1, [0, 0, 0, 0], 1, False, False, False, "relu"),            # an SE block's 1x1
    (1, 8, 4, 3, 8, 3, 1, [0, 0, 0, 0], 1, True, False, False, "none"),              # no interior column
    # Dense rows' edge columns two at a time (DensePair): left with right, two on one side, an odd one alone.
    (1, 40, 7, 7, 72, 3, 1, [1, 1, 1, 1], 1, False, False, True, "relu"),            # a 7x7 row: 1 + 5 + 1
    (1, 24, 7, 9, 40, 5, 1, [2, 2, 2, 2], 1, False, False, True, "none"),            # 2 + 5 + 2
    (2, 20, 9, 9, 24, 3, 1, [2, 3, 2, 1], 2, False, False, False, "hardswish"),      # dilated, asymmetric: 3 + 1
    (1, 32, 3, 3, 48, 3, 1, [1, 1, 1, 1], 1, False, False, True, "sigmoid"),         # all 3 columns but one edge
    (1, 48, 14, 14, 64, 3, 2, [1, 1, 1, 1], 1, False, False, False, "relu"),         # stride 2: one edge, alone
    (1, 32, 27, 28, 48, 3, 2, [1, 1, 1, 1], 1, False, False, True, "relu"),          # 1 edge + 13: pairs with the 13th
]


def _case(args, block, rng):
    n, c, h, w, o, k, s, p, d, dw, nchw, res, act = args[:13]
    scaled = len(args) > 13 and args[13]
    groups = c if dw else 1
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((o, c // groups, k, k)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    attrs = dict(strides=[s, s], pads=p, dilations=[d, d])
    sc = rng.uniform(0, 1, (n, c, 1, 1)).astype(np.float32) if scaled else None
    want = P.fused_conv2d(x * sc if scaled else x, wt, b, activation="none", groups=groups,
                          **attrs).numpy().astype(np.float64)
    r = rng.standard_normal(want.shape).astype(np.float32) if res else None
    if res:
        want = want + r
    want = ACTS[act](want)
    xin = x if nchw else P.reorder_to_nchwc(x, block=block)
    y = P.conv2d_nchwc(xin, layout_filter(wt, groups, block, nchw), layout_bias(b, o, block),
                       to_nchwc(r, block) if res else np.zeros(0, np.float32),
                       to_nchwc(sc, block) if scaled else np.zeros(0, np.float32), filter_shape=list(wt.shape),
                       block=block, groups=groups, activation=act, input_layout="nchw" if nchw else "nchwc", **attrs)
    got = from_nchwc(y.numpy(), o)
    return got, want


@pytest.mark.parametrize("block", [8, 16])
def test_conv_matches_fused_conv2d(block):
    rng = np.random.default_rng(block)
    for args in CASES:
        got, want = _case(args, block, rng)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * max(1, np.abs(want).max()), err_msg=str(args))


@pytest.mark.parametrize("block", [8, 16])
def test_reorders_and_global_average_pool(block):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 21, 5, 7)).astype(np.float32)
    bx = P.reorder_to_nchwc(x, block=block).numpy()
    np.testing.assert_array_equal(bx, to_nchwc(x, block))
    assert bx.shape == (2, -(-21 // block), 5, 7, block) and not bx[:, -1, ..., 21 % block:].any()
    np.testing.assert_array_equal(P.reorder_from_nchwc(bx, channels=21, block=block).numpy(), x)
    g = P.global_average_pool_nchwc(bx, block=block).numpy()
    np.testing.assert_allclose(from_nchwc(g, 21), x.mean((2, 3), keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("block", [8, 16])
@pytest.mark.parametrize("shape", [(1, 64, 23, 23), (3, 37, 17, 19), (2, 4, 1, 3)])
def test_reorders_over_pixel_chunks(block, shape):
    """The reorders' units are (image, block, 256 pixels): several chunks per plane, a last chunk and a block of
    lanes that are not multiples of the 4 x 4 transposes (cpp/kernels/nchwc/nchwc_reorder.cc), exactly."""
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    bx = P.reorder_to_nchwc(x, block=block).numpy()
    np.testing.assert_array_equal(bx, to_nchwc(x, block))
    np.testing.assert_array_equal(P.reorder_from_nchwc(bx, channels=shape[1], block=block).numpy(), x)


def test_block_size_follows_the_isa():
    assert int(P.nchwc_block_size().numpy()) in (8, 16)


def _conv(**kw):
    args = dict(x=np.zeros((1, 1, 4, 4, 8), np.float32), filter=np.zeros(8 * 9, np.float32),
                bias=np.zeros(8, np.float32), residual=np.zeros(0, np.float32), scale=np.zeros(0, np.float32),
                filter_shape=[8, 1, 3, 3],
                block=8, groups=8)
    args.update(kw)
    return P.conv2d_nchwc(args.pop("x"), args.pop("filter"), args.pop("bias"), args.pop("residual"),
                          args.pop("scale"), **args)


@pytest.mark.parametrize("kw, words", [
    (dict(block=12), "'block'"),
    (dict(filter=np.zeros(10, np.float32)), "'filter'"),
    (dict(bias=np.zeros(3, np.float32)), "'bias'"),
    (dict(residual=np.zeros((1, 1, 4, 4, 8), np.float32)), "'residual'"),
    (dict(x=np.zeros((1, 2, 4, 4, 8), np.float32)), "'x'"),
    (dict(x=np.zeros((1, 1, 4, 4, 16), np.float32)), "'x'"),
    (dict(x=np.zeros((1, 8, 4, 4), np.float32)), "'x'"),
    (dict(groups=3), "'groups'"),
    (dict(scale=np.ones((1, 1, 1, 1, 8), np.float32)), "'scale'"),
    (dict(scale=np.ones((2, 1, 1, 1, 8), np.float32), groups=1, filter=np.zeros(8 * 8 * 9, np.float32)), "'scale'"),
    (dict(groups=1), "'filter'"),
    (dict(input_layout="nchw"), "'groups'"),
    (dict(input_layout="nhwc"), "'input_layout'"),
    (dict(filter_shape=[8, 1, 3]), "'filter_shape'"),
    (dict(strides=[0, 1]), "stride"),
    (dict(pads=[-1, 0, 0, 0]), "pad"),
    (dict(activation="gelu"), "'activation'"),
    (dict(x=np.zeros((1, 1, 2, 2, 8), np.float32)), "larger"),
])
def test_bad_conv_input_names_the_argument(kw, words):
    with pytest.raises(errors.InvalidArgumentError, match="Conv2DNchwc") as e:
        _conv(**kw)
    assert words in str(e.value).lower() or words in str(e.value)


def test_bad_reorder_and_pool_input():
    with pytest.raises(errors.InvalidArgumentError, match="'block'"):
        P.reorder_to_nchwc(np.zeros((1, 3, 2, 2), np.float32), block=4)
    with pytest.raises(errors.InvalidArgumentError, match="'x'"):
        P.reorder_to_nchwc(np.zeros((3, 2, 2), np.float32), block=8)
    with pytest.raises(errors.InvalidArgumentError, match="channel blocks"):
        P.reorder_from_nchwc(np.zeros((1, 2, 2, 2, 8), np.float32), channels=3, block=8)
    with pytest.raises(errors.InvalidArgumentError, match="'channels'"):
        P.reorder_from_nchwc(np.zeros((1, 1, 2, 2, 8), np.float32), channels=0, block=8)
    with pytest.raises(errors.InvalidArgumentError, match="lanes"):
        P.global_average_pool_nchwc(np.zeros((1, 1, 2, 2, 8), np.float32), block=16)
    with pytest.raises(errors.InvalidArgumentError, match="no pixels"):
        P.global_average_pool_nchwc(np.zeros((1, 1, 0, 2, 8), np.float32), block=8)
    with pytest.raises(errors.OpError):
        P.reorder_to_nchwc(np.zeros((1, 3, 2, 2), np.float64), block=8)


def check_cases(cases, blocks):
    """Every case at every block size against FusedConv2D (the subprocess scripts here and in
    test_nchwc_taps.py call it under another dispatch or CPU tuning)."""
    for block in blocks:
        rng = np.random.default_rng(block)
        for args in cases:
            got, want = _case(args, block, rng)
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * max(1, np.abs(want).max()),
                                       err_msg=str(args))


_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from test_nchwc import CASES, check_cases
from opforge import ops as P
assert int(P.nchwc_block_size().numpy()) == 8  # the cap took
check_cases(CASES, (8, 16))
print("ok")
"""


@pytest.mark.skipif(os.environ.get("OPFORGE_SIMD") is not None, reason="the dispatch is capped")
@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_conv_on_a_capped_instruction_set(isa):
    env = dict(os.environ, OPFORGE_SIMD=isa, OPFORGE_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", _SCRIPT.format(tests=os.path.dirname(__file__))], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]
