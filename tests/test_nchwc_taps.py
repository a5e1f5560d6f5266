"""The NCHWc dense rows over a flat list of (input block, tap) pairs (cpp/kernels/nchwc/nchwc_taps_isa.inc):
the Intel path (x's columns padded in, rows as even tiles, the AVX-512 assembly tiles 3-6 x 4 and 4-7 x 3),
against FusedConv2D, under both CPU tunings, so either machine runs both paths.
"""
import os
import subprocess
import sys

import pytest

pytest.importorskip("onnx")

# (n, c, h, w, o, k, stride, pads, dilation, depthwise, nchw input, residual, activation[, SE scale]);
# C a multiple of 16 (the taps rows need full input blocks), at least 3 output blocks.
TAPS_CASES = [
    (1, 64, 14, 14, 64, 3, 1, [1, 1, 1, 1], 1, False, False, True, "relu"),     # 14 = 5 + 5 + 4, 4 blocks
    (1, 32, 7, 7, 160, 3, 1, [1, 1, 1, 1], 1, False, False, True, "relu"),      # 7 x 3 tiles, groups 3 3 2 2
    (2, 48, 9, 9, 96, 3, 2, [1, 1, 1, 1], 1, False, False, False, "relu"),      # stride 2: 5 x 3
    (1, 16, 5, 62, 64, 3, 1, [1, 1, 1, 1], 1, False, False, False, "none"),     # a chunk of 48, then 5 + 4 + 5
    (1, 16, 3, 51, 64, 3, 1, [1, 1, 1, 1], 1, False, False, True, "none"),      # 48 + 3: a 3 x 4 tile
    (1, 32, 11, 13, 64, 3, 1, [2, 1, 0, 3], 2, False, False, False, "hardswish"),  # dilated, asymmetric pads
    (1, 16, 6, 6, 48, 3, 1, [1, 1, 1, 1], 1, False, False, False, "silu"),      # 6 x 3
    (1, 16, 4, 4, 48, 5, 1, [2, 2, 2, 2], 1, False, False, False, "sigmoid"),   # 4 x 3, a 5x5 filter
    (1, 16, 5, 1, 48, 3, 1, [1, 1, 1, 1], 1, False, False, False, "relu"),      # one column: no assembly tile
    (1, 32, 7, 7, 64, 1, 1, [0, 0, 0, 0], 1, False, False, True, "relu"),       # pointwise: 49 as one row
    (1, 64, 14, 14, 64, 1, 2, [0, 0, 0, 0], 1, False, False, False, "none"),    # 1x1 stride 2
    (2, 32, 6, 6, 48, 1, 1, [0, 0, 0, 0], 1, False, False, False, "none", True),  # SE scale on x
    (1, 32, 9, 9, 64, 3, 1, [1, 1, 1, 1], 1, False, False, True, "relu", True),   # SE scale, padded x
]

_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from test_nchwc import check_cases
from test_nchwc_taps import TAPS_CASES
check_cases(TAPS_CASES, (16, 8))
print("ok")
"""


@pytest.mark.parametrize("tuning", ["intel", "amd"])
def test_taps_rows_match_fused_conv2d(tuning):
    env = dict(os.environ, OPFORGE_CONV_TUNING=tuning)
    out = subprocess.run([sys.executable, "-c", _SCRIPT.format(tests=os.path.dirname(__file__))], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]

