"""Conv2DBackpropFilter by Winograd F(3x3, 4x4) (cpp/kernels/conv/conv_backprop_filter_winograd*: float32 3x3
stride-1 one-group convolutions with 16+ channels and 128+ tiles of 4x4 outputs in the batch) against the float64 numpy
reference over random shapes: channel counts that are not whole vectors, pads 0 to 3 on each side (tiles cut
by the image's edge, outputs larger or smaller than the input), batches whose tiles split across threads.
Every instruction set and one thread run in a subprocess each. Tolerances are relative to the gradient's
largest magnitude (the transforms add rounding error; measured a few 1e-6)."""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opforge as of
import vision_reference as ref

EXAMPLES = int(os.environ.get("OPFORGE_FG_EXAMPLES", "10"))


def close(got, want, rel=2e-5):
    np.testing.assert_allclose(got, want, rtol=0, atol=rel * max(1.0, float(np.abs(want).max())))


@st.composite
def case(draw):
    c, o = draw(st.integers(16, 40)), draw(st.integers(16, 40))
    p = [draw(st.integers(0, 3)) for _ in range(4)]
    h, w = draw(st.integers(32 - p[0] - p[2], 40)), draw(st.integers(32 - p[1] - p[3], 40))
    n = draw(st.integers(2, 3))  # 8x8 tiles of 4x4 or more per image
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    f = rng.standard_normal((o, c, 3, 3)).astype(np.float32)
    return x, f, rng, dict(strides=[1, 1], pads=p, dilations=[1, 1], groups=1)


@settings(max_examples=EXAMPLES, deadline=None)
@given(case())
def test_winograd_filter_gradient_matches_numpy(args):
    x, f, rng, attrs = args
    y_shape = ref.conv_out(x.shape, f.shape, attrs["strides"], attrs["pads"], attrs["dilations"], 1)
    dy = rng.standard_normal(y_shape).astype(np.float32)
    want = ref.conv2d_backprop_filter(x.astype(np.float64), f.astype(np.float64), dy.astype(np.float64), **attrs)
    got = of.raw_ops.conv2d_backprop_filter(x, f, dy, **attrs).numpy()
    assert got.dtype == np.float32 and got.shape == f.shape
    close(got, want)


def test_issue_shape_and_non_finite_inputs():
    # The bench's 64 -> 64 at 56x56; a NaN in x reaches exactly the taps that saw it.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 64, 56, 56)).astype(np.float32)
    f = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    dy = rng.standard_normal((2, 64, 56, 56)).astype(np.float32)
    attrs = dict(pads=[1, 1, 1, 1])
    close(of.raw_ops.conv2d_backprop_filter(x, f, dy, **attrs).numpy(),
          ref.conv2d_backprop_filter(x.astype(np.float64), f, dy.astype(np.float64), **attrs))
    x[1, 5, 30, 30] = np.nan
    got = of.raw_ops.conv2d_backprop_filter(x, f, dy, **attrs).numpy()
    assert np.isnan(got[:, 5]).all() and not np.isnan(np.delete(got, 5, axis=1)).any()


# One case per subprocess: pads cut the tiles, channels are not whole vectors, three images (168 tiles).
_CODE = ("import numpy as np, opforge as of, sys; r = np.random.default_rng(0); "
         "x = r.standard_normal((3, 20, 27, 30)).astype(np.float32); "
         "f = r.standard_normal((24, 20, 3, 3)).astype(np.float32); "
         "dy = r.standard_normal((3, 24, 28, 29)).astype(np.float32); "
         "sys.stdout.buffer.write(of.raw_ops.conv2d_backprop_filter(x, f, dy, pads=[2, 0, 1, 1]).numpy().tobytes())")


def _run(**env_extra):
    env = dict(os.environ, **env_extra)
    out = subprocess.run([sys.executable, "-c", _CODE], env=env, capture_output=True, timeout=300, check=True).stdout
    return np.frombuffer(out, np.float32).reshape(24, 20, 3, 3)


def _inputs():  # _CODE's
    r = np.random.default_rng(0)
    return [r.standard_normal(s).astype(np.float32) for s in ((3, 20, 27, 30), (24, 20, 3, 3), (3, 24, 28, 29))]


@pytest.mark.skipif(os.environ.get("OPFORGE_SIMD") is not None, reason="the dispatch is capped")
def test_every_instruction_set_one_thread_and_turned_off():
    x, f, dy = _inputs()
    want = ref.conv2d_backprop_filter(x.astype(np.float64), f.astype(np.float64), dy.astype(np.float64),
                                      pads=[2, 0, 1, 1])
    close(of.raw_ops.conv2d_backprop_filter(x, f, dy, pads=[2, 0, 1, 1]).numpy(), want)
    for isa in ("baseline", "avx2"):
        close(_run(OPFORGE_SIMD=isa, OPFORGE_NUM_THREADS="1"), want)
    # OPFORGE_CONV_WINOGRAD=0 takes im2col + GEMM: really another path, the same answer.
    off = _run(OPFORGE_CONV_WINOGRAD="0")
    close(off, want, rel=1e-6)
    assert not np.array_equal(off, _run())
