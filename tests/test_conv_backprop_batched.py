"""Both Conv2D backward ops over a batch of small images as one GEMM (cpp/kernels/conv/conv_backprop_batched.h:
one group, 2+ images, under 256 output pixels each): the zero-bordered plane's gather (im2col) and scatter
(col2im) against the float64 numpy reference, with strides, dilations, pads wider than the kernel, outputs
wider than the input, 1x1 kernels, both dtypes, and many planes per thread (the border reused)."""
import numpy as np
import pytest

import opforge as of
import vision_reference as ref

CASES = [((4, 3, 9, 7), (5, 3, 3, 3), dict(strides=[2, 1], pads=[1, 2, 0, 1], dilations=[1, 2])),
         ((2, 2, 1, 1), (3, 2, 1, 1), dict(pads=[2, 1, 2, 0])),                      # all border
         ((3, 4, 5, 6), (2, 4, 2, 3), dict(strides=[3, 2], pads=[2, 2, 2, 2], dilations=[2, 1])),
         ((64, 16, 4, 4), (32, 16, 3, 3), dict(pads=[1, 1, 1, 1])),                   # the digits CNN's second conv
         ((5, 6, 15, 15), (7, 6, 3, 3), dict(strides=[1, 1], pads=[0, 0, 0, 0]))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_backprops_match_numpy(dtype):
    rng = np.random.default_rng(4)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    for xs, fs, attrs in CASES:
        x, f = rng.standard_normal(xs).astype(dtype), rng.standard_normal(fs).astype(dtype)
        dy = rng.standard_normal(ref.conv2d(x, f, **attrs).shape).astype(dtype)
        np.testing.assert_allclose(of.raw_ops.conv2d_backprop_filter(x, f, dy, **attrs).numpy(),
                                   ref.conv2d_backprop_filter(x, f, dy, **attrs), **tol)
        np.testing.assert_allclose(of.raw_ops.conv2d_backprop_input(x, f, dy, **attrs).numpy(),
                                   ref.conv2d_backprop_input(x, f, dy, **attrs), **tol)
