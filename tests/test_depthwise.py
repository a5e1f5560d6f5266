"""The direct depthwise convolution (cpp/kernels/conv/depthwise*.{h,cc,inc}) against the numpy reference
(vision_reference.py) over random shapes: strides 1-4 (unequal ones take the generic loop), pads, dilations,
depth multipliers, kernels up to 7x7 and widths that end in vector tails, with the fused bias and activations
of FusedConv2D; every instruction set (test_winograd.py reruns this module with OPFORGE_SIMD capped)."""
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge as of
import vision_reference as ref
from opforge import ops as P

# Fewer examples in test_winograd.py's reruns under capped instruction sets.
EXAMPLES = int(os.environ.get("OPFORGE_VISION_EXAMPLES", "40"))

ACTS = {"none": lambda z: z, "relu": lambda z: np.maximum(z, 0), "sigmoid": lambda z: 1 / (1 + np.exp(-z)),
        "silu": lambda z: z / (1 + np.exp(-z)), "hardswish": lambda z: z * np.clip(z / 6 + 0.5, 0, 1)}


@st.composite
def dw_case(draw):
    c, mult = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    s = draw(st.integers(1, 4))
    strides = [s, s] if draw(st.booleans()) or s == 1 else [s, draw(st.integers(1, 3))]
    d = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    p = [draw(st.integers(0, 3)) for _ in range(4)]
    eh, ew = (kh - 1) * d[0] + 1, (kw - 1) * d[1] + 1
    h = draw(st.integers(max(1, eh - p[0] - p[2]), eh + 12))
    w = draw(st.integers(max(1, ew - p[1] - p[3]), ew + 40))
    n = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    f = rng.standard_normal((c * mult, 1, kh, kw)).astype(np.float32)
    b = rng.standard_normal(c * mult).astype(np.float32)
    act = draw(st.sampled_from(sorted(ACTS)))
    return x, f, b, act, dict(strides=strides, pads=p, dilations=d, groups=c)


@settings(max_examples=EXAMPLES, deadline=None)
@given(dw_case())
def test_depthwise_matches_numpy(case):
    x, f, b, act, attrs = case
    want = ref.conv2d(x.astype(np.float64), f.astype(np.float64), **attrs)
    np.testing.assert_allclose(of.conv2d(x, f, **attrs).numpy(), want, rtol=1e-4, atol=1e-4)
    fused = P.fused_conv2d(x, f, b, activation=act, **attrs).numpy()
    np.testing.assert_allclose(fused, ACTS[act](want + b.reshape(1, -1, 1, 1)), rtol=1e-4, atol=1e-4)


def test_depthwise_large_planes_threaded():
    # Many planes (split over the pool) of the shapes MobileNet / EfficientNet use.
    rng = np.random.default_rng(3)
    for c, h, k, s in [(24, 57, 3, 2), (16, 29, 5, 1), (40, 7, 5, 1), (8, 112, 3, 2)]:
        x = rng.standard_normal((3, c, h, h + 1)).astype(np.float32)
        f = rng.standard_normal((c, 1, k, k)).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32)
        attrs = dict(strides=[s, s], pads=[k // 2] * 4, dilations=[1, 1], groups=c)
        want = ref.conv2d(x.astype(np.float64), f.astype(np.float64), **attrs) + b.reshape(1, -1, 1, 1)
        got = P.fused_conv2d(x, f, b, activation="hardswish", **attrs).numpy()
        np.testing.assert_allclose(got, ACTS["hardswish"](want), rtol=1e-4, atol=1e-4)


def test_fused_conv_hardswish_on_the_gemm_path():
    # A dense convolution: the bias in the GEMM epilogue, hard-swish after it.
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 6, 9, 11)).astype(np.float32)
    f = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    attrs = dict(strides=[1, 2], pads=[1, 0, 1, 2], dilations=[1, 1], groups=2)
    for dt in (np.float32, np.float64):
        want = ref.conv2d(x.astype(np.float64), f.astype(np.float64), **attrs) + b.reshape(1, -1, 1, 1)
        got = P.fused_conv2d(x.astype(dt), f.astype(dt), b.astype(dt), activation="hardswish", **attrs).numpy()
        np.testing.assert_allclose(got, ACTS["hardswish"](want), rtol=1e-4, atol=1e-4)


def test_fused_conv_bad_activation_names_it():
    x, f, b = np.zeros((1, 2, 4, 4), np.float32), np.zeros((2, 1, 3, 3), np.float32), np.zeros(2, np.float32)
    with pytest.raises(of.errors.InvalidArgumentError, match="activation"):
        P.fused_conv2d(x, f, b, activation="tanh", strides=[1, 1], pads=[0] * 4, dilations=[1, 1], groups=2)


@st.composite
def max_pool_case(draw):
    k = [draw(st.integers(1, 5)), draw(st.integers(1, 5))]
    s = draw(st.integers(1, 4))
    d = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    eff = [(k[i] - 1) * d[i] + 1 for i in range(2)]
    p = [draw(st.integers(0, eff[i % 2] - 1)) for i in range(4)]
    h = draw(st.integers(max(1, eff[0] - p[0] - p[2]), eff[0] + 12))
    w = draw(st.integers(max(1, eff[1] - p[1] - p[3]), eff[1] + 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
    if draw(st.booleans()):  # NaNs win their windows
        x.flat[rng.integers(0, x.size, 3)] = np.nan
    return x, dict(ksize=k, strides=[s, s], pads=p, dilations=d, ceil_mode=draw(st.booleans()))


@settings(max_examples=EXAMPLES, deadline=None)
@given(max_pool_case())
def test_max_pool_on_phase_planes_matches_numpy(case):
    # float32 max pooling with equal strides runs on the depthwise kernel's planes (-inf pads).
    x, attrs = case
    np.testing.assert_array_equal(of.max_pool2d(x, **attrs).numpy(), ref.max_pool2d(x, **attrs))


# The direct kernels (depthwise_rows_isa.inc): square 3/5/7 taps, strides 1 and 2, dilation 1. Rows of 14+
# outputs (6+ on AVX2) run along the width from masked loads; small "same" planes at stride 1 run flat across
# row ends. Widths not a multiple of a vector, every pad, every activation, a depth multiplier.
@st.composite
def direct_case(draw):
    k, s = draw(st.sampled_from([3, 5, 7])), draw(st.sampled_from([1, 2]))
    flat = draw(st.booleans())  # "same" padding: w == ow at stride 1 (the flat kernel's planes)
    if flat:
        lo, hi = draw(st.integers(0, k - 1)), draw(st.integers(0, k - 1))
        p = [lo, draw(st.integers(0, k - 1)), hi, 0]
        p[3] = k - 1 - p[1]
        s = 1
    else:
        p = [draw(st.integers(0, k - 1)) for _ in range(4)]
    h = draw(st.integers(max(1, k - p[0] - p[2]), 20))
    w = draw(st.integers(max(1, k - p[1] - p[3]), 70))
    # 2+ channels: groups = channels > 1 is the depthwise path (one channel is a dense conv)
    c, mult, n = draw(st.integers(2, 4)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    f = rng.standard_normal((c * mult, 1, k, k)).astype(np.float32)
    b = rng.standard_normal(c * mult).astype(np.float32)
    act = draw(st.sampled_from(sorted(ACTS)))
    return x, f, b, act, dict(strides=[s, s], pads=p, dilations=[1, 1], groups=c)


@settings(max_examples=EXAMPLES, deadline=None)
@given(direct_case())
def test_direct_depthwise_matches_numpy_and_the_phase_planes(case):
    x, f, b, act, attrs = case
    want = ACTS[act](ref.conv2d(x.astype(np.float64), f.astype(np.float64), **attrs) + b.reshape(1, -1, 1, 1))
    old = os.environ.get("OPFORGE_DW_DIRECT")
    try:
        for mode in ("1", "flat", "0"):  # the default choice, the flat kernel first where it applies, phase planes
            os.environ["OPFORGE_DW_DIRECT"] = mode  # read by the kernel per call
            got = P.fused_conv2d(x, f, b, activation=act, **attrs).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=mode)
    finally:
        if old is None:
            os.environ.pop("OPFORGE_DW_DIRECT", None)
        else:
            os.environ["OPFORGE_DW_DIRECT"] = old


def test_direct_depthwise_model_layers_threaded():
    # The models' layer shapes (stride 2 from even and odd sizes, 7x7 flat planes), many planes over the pool;
    # the unfused Conv2D too.
    rng = np.random.default_rng(5)
    for c, h, k, s in [(18, 56, 3, 2), (8, 112, 3, 1), (20, 28, 5, 1), (12, 29, 5, 2), (40, 7, 5, 1), (24, 14, 5, 1),
                       (16, 7, 3, 1), (10, 15, 7, 2)]:
        x = rng.standard_normal((2, c, h, h)).astype(np.float32)
        f = rng.standard_normal((c, 1, k, k)).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32)
        attrs = dict(strides=[s, s], pads=[k // 2] * 4, dilations=[1, 1], groups=c)
        plain = ref.conv2d(x.astype(np.float64), f.astype(np.float64), **attrs)
        np.testing.assert_allclose(of.conv2d(x, f, **attrs).numpy(), plain, rtol=1e-4, atol=1e-4)
        got = P.fused_conv2d(x, f, b, activation="silu", **attrs).numpy()
        np.testing.assert_allclose(got, ACTS["silu"](plain + b.reshape(1, -1, 1, 1)), rtol=1e-4, atol=1e-4)


def test_direct_depthwise_nan_and_inf_propagate():
    # Masked-off lanes read 0, never neighbouring data: a NaN or inf reaches only the outputs whose windows hold it.
    x = np.ones((1, 2, 7, 20), np.float32)
    x[0, 0, 3, 10], x[0, 1, 0, 0] = np.nan, np.inf
    f = np.ones((2, 1, 3, 3), np.float32)
    for s in (1, 2):
        attrs = dict(strides=[s, s], pads=[1] * 4, dilations=[1, 1], groups=2)
        got = of.conv2d(x, f, **attrs).numpy()
        want = ref.conv2d(x.astype(np.float64), f.astype(np.float64), **attrs)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(np.where(np.isfinite(want), got, 0), np.where(np.isfinite(want), want, 0))


# Every instruction set: test_winograd.py reruns this module with OPFORGE_SIMD capped.
