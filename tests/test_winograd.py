"""Winograd F(4x4, 3x3) (cpp/kernels/conv/winograd*.{h,cc,inc}: float32 3x3 stride-1 convolutions with 16+
channels and 8+ output pixels a side) against the numpy reference (vision_reference*.py) over random shapes:
Conv2D, FusedConv2D's bias and activations, Conv2DBackpropInput and ConvTranspose2D (the same path, the filter
flipped), pads from 0 to 3 on each side (tiles cut by the image's edge); every instruction set (the module
reruns itself, test_depthwise.py, test_max_pool_rows.py and test_winograd_columns.py with OPFORGE_SIMD capped). The transforms add rounding error: tolerances are relative to the
output's scale."""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge as of
import vision_reference as ref
import vision_reference_more as ref_more
from opforge import ops as P

# Fewer examples in the reruns under capped instruction sets (below).
EXAMPLES = int(os.environ.get("OPFORGE_VISION_EXAMPLES", "12"))

ACTS = {"none": lambda z: z, "relu": lambda z: np.maximum(z, 0), "silu": lambda z: z / (1 + np.exp(-z)),
        "hardswish": lambda z: z * np.clip(z / 6 + 0.5, 0, 1)}


def close(got, want, rel=2e-5):
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=0, atol=rel * scale)


@st.composite
def wino_case(draw):
    c, o = draw(st.integers(16, 40)), draw(st.integers(16, 40))
    p = [draw(st.integers(0, 3)) for _ in range(4)]
    # At least 64 output tiles of 4x4 (below that the GEMM path runs).
    h, w = draw(st.integers(32 - p[0] - p[2], 40)), draw(st.integers(32 - p[1] - p[3], 40))
    n = draw(st.integers(1, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    f = (rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    return x, f, rng, dict(strides=[1, 1], pads=p, dilations=[1, 1], groups=1)


@settings(max_examples=EXAMPLES, deadline=None)
@given(wino_case(), st.sampled_from(sorted(ACTS)))
def test_winograd_forward_and_input_gradient_match_numpy(case, act):
    x, f, rng, attrs = case
    want = ref.conv2d(x.astype(np.float64), f.astype(np.float64), **attrs)
    close(of.conv2d(x, f, **attrs).numpy(), want)
    b = rng.standard_normal(f.shape[0]).astype(np.float32)
    close(P.fused_conv2d(x, f, b, activation=act, **attrs).numpy(), ACTS[act](want + b.reshape(1, -1, 1, 1)))
    dy = rng.standard_normal(want.shape).astype(np.float32)
    want_dx = ref.conv2d_backprop_input(x.astype(np.float64), f.astype(np.float64), dy.astype(np.float64), **attrs)
    close(of.raw_ops.conv2d_backprop_input(x, f, dy, **attrs).numpy(), want_dx)


def test_winograd_conv_transpose_matches_numpy():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 24, 30, 31)).astype(np.float32)
    f = (rng.standard_normal((24, 20, 3, 3)) / 15).astype(np.float32)  # [in, out, 3, 3]
    attrs = dict(strides=[1, 1], pads=[1, 0, 2, 1], dilations=[1, 1], groups=1, output_padding=[0, 0])
    want = ref_more.conv_transpose2d(x.astype(np.float64), f.astype(np.float64), **attrs)
    close(P.conv_transpose2d(x, f, **attrs).numpy(), want)


def test_winograd_can_be_turned_off():
    # OPFORGE_CONV_WINOGRAD=0 takes im2col + GEMM: the two paths agree.
    code = ("import numpy as np, opforge as of; r = np.random.default_rng(0); "
            "x = r.standard_normal((1, 32, 32, 32)).astype(np.float32); "
            "f = r.standard_normal((32, 32, 3, 3)).astype(np.float32); "
            "import sys; sys.stdout.buffer.write(of.conv2d(x, f, pads=[1, 1, 1, 1]).numpy().tobytes())")
    outs = []
    for flag in ("0", "1"):
        env = dict(os.environ, OPFORGE_CONV_WINOGRAD=flag)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300, check=True).stdout
        outs.append(np.frombuffer(out, np.float32))
    assert not np.array_equal(outs[0], outs[1])  # really two paths
    close(outs[1], outs[0].astype(np.float64), rel=1e-5)


@pytest.mark.parametrize("tuning", ["amd", "intel"])
def test_winograd_blocks_of_either_cpu_match_numpy(tuning):
    # The tile blocks differ by CPU (conv_tuning.h: 32 tiles on Intel, 64 KiB slices elsewhere); both tilings,
    # over two images of 20x28 tiles (the images meet inside a block) with a packed filter and without.
    code = ("import numpy as np, sys; from opforge import ops as P; r = np.random.default_rng(3); "
            "x = r.standard_normal((2, 40, 80, 110)).astype(np.float32); "
            "f = (r.standard_normal((48, 40, 3, 3)) / 19).astype(np.float32); b = r.standard_normal(48).astype(np.float32); "
            "a = dict(pads=[1, 0, 1, 2], activation='relu'); "
            "y1 = P.fused_conv2d(x, f, b, **a).numpy(); "
            "y2 = P.conv2d_packed(x, P.pack_conv2d_filter(f), b, filter_shape=list(f.shape), **a).numpy(); "
            "sys.stdout.buffer.write(np.stack([y1, y2]).tobytes())")
    env = dict(os.environ, OPFORGE_CONV_TUNING=tuning)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300, check=True).stdout
    r = np.random.default_rng(3)
    x = r.standard_normal((2, 40, 80, 110)).astype(np.float32)
    f = (r.standard_normal((48, 40, 3, 3)) / 19).astype(np.float32)
    b = r.standard_normal(48).astype(np.float32)
    want = ACTS["relu"](ref.conv2d(x.astype(np.float64), f.astype(np.float64), pads=[1, 0, 1, 2])
                        + b.reshape(1, -1, 1, 1))
    got = np.frombuffer(out, np.float32).reshape((2,) + want.shape)
    close(got[0], want)
    close(got[1], want)


@pytest.mark.parametrize("act", ["none", "relu"])
def test_winograd_residual_is_the_add_before_the_activation(act):
    # Conv2DPackedAdd's residual goes in before the activation: in the output transform on AVX-512, else in a
    # pass after. Either way bitwise act(conv + bias + residual) in float32, the conv being Conv2DPacked's own
    # (same transforms, same products). Two images of 15 x 37 tiles: runs of 16 tiles cut by the row's end and
    # by the blocks, pads that cut tiles at every edge, the odd last tile row and column clipped.
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 24, 58, 147)).astype(np.float32)
    f = (rng.standard_normal((40, 24, 3, 3)) / 15).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    attrs = dict(filter_shape=list(f.shape), pads=[1, 2, 0, 1])
    blob = P.pack_conv2d_filter(f)
    z = P.conv2d_packed(x, blob, b, **attrs).numpy()
    r = rng.standard_normal(z.shape).astype(np.float32)
    got = P.conv2d_packed_add(x, blob, b, r, activation=act, **attrs).numpy()
    want = z + r
    np.testing.assert_array_equal(got, np.maximum(want, np.float32(0)) if act == "relu" else want)
    close(z, ref.conv2d(x.astype(np.float64), f.astype(np.float64), pads=[1, 2, 0, 1]) + b.reshape(1, -1, 1, 1))


@pytest.mark.skipif(os.environ.get("OPFORGE_SIMD") is not None, reason="already a rerun, or the dispatch is capped")
@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_every_instruction_set(isa):
    # This module, test_depthwise.py, test_max_pool_rows.py and test_winograd_columns.py, one process per capped set.
    env = dict(os.environ, OPFORGE_SIMD=isa, OPFORGE_VISION_EXAMPLES="6")
    here = os.path.dirname(__file__)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", __file__,
                           os.path.join(here, "test_depthwise.py"), os.path.join(here, "test_max_pool_rows.py"),
                           os.path.join(here, "test_winograd_columns.py"), "-k", "not turned_off"], env=env, capture_output=True, text=True, timeout=900,
                          cwd=os.path.dirname(__file__))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
