"""How kernels cut their work for the intra-op pool (cpp/framework/thread_pool.cc): Winograd's tile blocks
(as many as a multiple of the threads, of even size to a 32-tile group, so a block boundary can fall anywhere
in an image) against a float64 numpy reference, at this process's thread count and, in a child, at 3 threads
(the block count then a multiple of 3)."""

import numpy as np
import pytest

import opforge as of
from opforge import ops as P

from child_threads import run_at_threads

# (n, c, o, h, w, pads): tile counts 245 (8 groups of 32, the last part full), 147, 1 image of 196 (7 groups),
# and 96 channels over 3 images of 30x17 (wide blocks of few groups).
CASES = [(5, 256, 256, 26, 26, [1, 1, 1, 1]), (3, 40, 24, 26, 26, [1, 1, 1, 1]), (1, 64, 64, 56, 56, [1, 1, 1, 1]),
         (3, 96, 96, 30, 17, [0, 2, 1, 0])]


def reference(x, f, b, pads):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # n, c, oh, ow, 3, 3
    y = np.tensordot(win, f.astype(np.float64), axes=([1, 4, 5], [1, 2, 3]))  # n, oh, ow, o
    return np.maximum(y.transpose(0, 3, 1, 2) + b.reshape(1, -1, 1, 1), 0)


def check(case, seed):
    n, c, o, h, w, pads = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    f = (rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    got = P.fused_conv2d(x, f, b, activation="relu", strides=[1, 1], pads=pads, dilations=[1, 1], groups=1).numpy()
    want = reference(x, f, b, pads)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:5])))
def test_winograd_blocks_match_numpy(case):
    check(case, 0)


def test_winograd_blocks_at_three_threads():
    run_at_threads("test_parallel_split", "for i, case in enumerate(t.CASES): t.check(case, i + 1)\n")


def general_reference(x, f, b, stride, pads):
    """float64 conv (any kernel size, one stride for both axes) + bias, then relu."""
    kh, kw = f.shape[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    y = np.tensordot(win, f.astype(np.float64), axes=([1, 4, 5], [1, 2, 3]))
    return np.maximum(y.transpose(0, 3, 1, 2) + b.reshape(1, -1, 1, 1), 0)


# Few input channels and many output rows: the column matrix is built over the threads by output row (a stem:
# 3 channels would split 2 + 1), in chunks of rows (a 7x7 stride-2 stem at 150x150 takes several chunks).
@pytest.mark.parametrize("n, c, h, w, o, k, stride, pads", [
    (1, 3, 150, 150, 24, 7, 2, [3, 3, 3, 3]), (2, 1, 61, 47, 8, 5, 1, [2, 0, 1, 2]), (1, 5, 40, 33, 16, 3, 2, [0, 1, 1, 0])])
def test_few_channel_convs_split_by_rows_match_numpy(n, c, h, w, o, k, stride, pads):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    f = (rng.standard_normal((o, c, k, k)) / np.sqrt(k * k * c)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    attrs = dict(strides=[stride, stride], pads=pads, dilations=[1, 1])
    want = general_reference(x, f, b, stride, pads)
    got = P.conv2d_packed(x, P.pack_conv2d_filter(f, winograd=False), b, filter_shape=list(f.shape),
                          activation="relu", **attrs).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * max(1.0, float(np.abs(want).max())))
