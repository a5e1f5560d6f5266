"""float32 MaxPool2D row by row (cpp/kernels/pool/max_pool_rows*): output rows a vector (16 floats) wide or
more, any window up to 7x7, unequal strides up to 4, dilations, pads, ceil_mode and NaNs, against the numpy
reference; every instruction set (test_winograd.py reruns this module with OPFORGE_SIMD capped)."""
import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge as of
import vision_reference as ref

EXAMPLES = int(os.environ.get("OPFORGE_VISION_EXAMPLES", "40"))


@st.composite
def wide_case(draw):
    k = [draw(st.integers(1, 7)), draw(st.integers(1, 7))]
    s = [draw(st.integers(1, 4)), draw(st.integers(1, 4))]
    d = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    eff = [(k[i] - 1) * d[i] + 1 for i in range(2)]
    p = [draw(st.integers(0, eff[i % 2] - 1)) for i in range(4)]
    h = draw(st.integers(max(1, eff[0] - p[0] - p[2]), eff[0] + 9))
    # Wide enough that most output rows take whole vectors (16 * stride + the window), some just short.
    w = draw(st.integers(max(1, eff[1] - p[1] - p[3]), 16 * s[1] + eff[1] + 24))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((2, draw(st.integers(1, 3)), h, w)).astype(np.float32)
    if draw(st.booleans()):  # NaNs win their windows, wherever they are in a row
        x.flat[rng.integers(0, x.size, 4)] = np.nan
    return x, dict(ksize=k, strides=s, pads=p, dilations=d, ceil_mode=draw(st.booleans()))


@settings(max_examples=EXAMPLES, deadline=None)
@given(wide_case())
def test_wide_max_pool_matches_numpy(case):
    x, attrs = case
    np.testing.assert_array_equal(of.max_pool2d(x, **attrs).numpy(), ref.max_pool2d(x, **attrs))


def test_resnet_and_squeezenet_pools_match_numpy():
    rng = np.random.default_rng(5)
    for shape, attrs in (((1, 8, 112, 112), dict(ksize=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
                         ((2, 4, 109, 109), dict(ksize=[3, 3], strides=[2, 2], ceil_mode=True)),
                         ((1, 4, 54, 54), dict(ksize=[3, 3], strides=[2, 2], ceil_mode=True))):
        x = rng.standard_normal(shape).astype(np.float32)
        x[0, 0, 7, 9] = np.nan
        x[0, 1] = -np.inf  # a plane of -inf stays -inf
        np.testing.assert_array_equal(of.max_pool2d(x, **attrs).numpy(), ref.max_pool2d(x, **attrs))


@st.composite
def stride2_case(draw):
    """Column stride 2 (the permute path of max_pool_rows_isa.inc): rows from 1 to ~40 outputs wide, so the
    whole-vector stores that spill into the next row and the staged last row of a plane are both taken."""
    k = [draw(st.integers(1, 5)), draw(st.integers(1, 6))]
    s = [draw(st.integers(1, 3)), 2]
    d = [draw(st.integers(1, 2)), draw(st.integers(1, 3))]
    eff = [(k[i] - 1) * d[i] + 1 for i in range(2)]
    p = [draw(st.integers(0, eff[i % 2] - 1)) for i in range(4)]
    h = draw(st.integers(max(1, eff[0] - p[0] - p[2]), eff[0] + 6))
    w = draw(st.integers(max(1, eff[1] - p[1] - p[3]), 2 * 40 + eff[1]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((draw(st.integers(1, 2)), draw(st.integers(1, 5)), h, w)).astype(np.float32)
    if draw(st.booleans()):
        x.flat[rng.integers(0, x.size, 3)] = np.nan
        x.flat[rng.integers(0, x.size, 3)] = -np.inf
    return x, dict(ksize=k, strides=s, pads=p, dilations=d, ceil_mode=draw(st.booleans()))


@settings(max_examples=EXAMPLES, deadline=None)
@given(stride2_case())
def test_stride2_max_pool_matches_numpy(case):
    x, attrs = case
    np.testing.assert_array_equal(of.max_pool2d(x, **attrs).numpy(), ref.max_pool2d(x, **attrs))


def test_stride2_rows_12_to_16_wide_match_numpy():
    """3x3 stride 2 over 25..33-wide planes (12..16 outputs a row: the row path below a vector's width on
    AVX-512), several planes so a plane's last row is staged while the rows before it spill."""
    rng = np.random.default_rng(7)
    for w in range(23, 34):
        for ceil in (False, True):
            x = rng.standard_normal((2, 3, w - 2, w)).astype(np.float32)
            x[1, 2, -1, -1] = np.nan
            attrs = dict(ksize=[3, 3], strides=[2, 2], pads=[0, 1, 0, 1], ceil_mode=ceil)
            np.testing.assert_array_equal(of.max_pool2d(x, **attrs).numpy(), ref.max_pool2d(x, **attrs))


def test_wide_planes_in_several_row_chunks_match_numpy():
    """Rows 600 wide: the vertical maxima are written about 16 KiB of rows at a time (max_pool_rows.cc
    ChunkRows: 6 rows here), so a plane takes many chunks; windows whose rows are all pads among them."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 2, 41, 150)).astype(np.float32)
    x[0, 1, 20, 101] = np.nan
    for attrs in (dict(ksize=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
                  dict(ksize=[3, 3], strides=[2, 2], ceil_mode=True),
                  dict(ksize=[2, 4], strides=[3, 3], pads=[1, 0, 1, 2]),
                  dict(ksize=[2, 3], strides=[1, 2], dilations=[20, 2], pads=[19, 1, 19, 1])):
        np.testing.assert_array_equal(of.max_pool2d(x, **attrs).numpy(), ref.max_pool2d(x, **attrs))
    # Two input rows under 19 rows of pads each side and a 21-row window of two taps: only output rows 0 and
    # 19 see an input row, the 18 between are all pads (-inf), in chunks with rows that do.
    x = rng.standard_normal((1, 2, 2, 150)).astype(np.float32)
    attrs = dict(ksize=[2, 3], strides=[1, 2], dilations=[20, 1], pads=[19, 0, 19, 0])
    np.testing.assert_array_equal(of.max_pool2d(x, **attrs).numpy(), ref.max_pool2d(x, **attrs))
