"""The NCHWc dense conv's split over threads (cpp/kernels/nchwc/nchwc_kernels.cc): on Intel with two or more
threads, a conv whose input image outweighs its filter runs its units with the output rows outside the groups of
output blocks (rows_outer), else groups outside rows. Cases on both sides of that rule, with two groups of output
blocks or more (so the order matters), at 2 and 3 threads, under both CPU tunings, against FusedConv2D.
"""
import os
import subprocess
import sys

import pytest

pytest.importorskip("onnx")

# (n, c, h, w, o, k, stride, pads, dilation, depthwise, nchw input, residual, activation[, SE scale])
SPLIT_CASES = [
    (1, 64, 28, 28, 128, 3, 2, [1, 1, 1, 1], 1, False, False, False, "relu"),  # x 50K floats < filter 74K: groups
    (1, 64, 56, 56, 128, 3, 2, [1, 1, 1, 1], 1, False, False, True, "relu"),   # x 200K > filter 74K: rows
    (1, 64, 56, 56, 128, 1, 2, [0, 0, 0, 0], 1, False, False, False, "none"),  # 1x1 stride 2: rows
    (1, 16, 40, 40, 80, 3, 1, [1, 1, 1, 1], 1, False, False, True, "silu"),    # 5 blocks: groups of 3 + 2, rows
    (1, 16, 41, 23, 96, 3, 1, [0, 2, 1, 0], 1, False, False, False, "none"),   # odd rows, asymmetric pads
    (2, 32, 30, 30, 96, 3, 2, [1, 1, 1, 1], 1, False, False, True, "relu"),    # two images: rows per image
    (1, 3, 48, 48, 80, 3, 2, [1, 1, 1, 1], 1, False, True, False, "relu"),     # NCHW input (a stem)
    (1, 32, 9, 9, 96, 3, 1, [1, 1, 1, 1], 1, False, False, False, "relu", True),  # SE-scaled: groups outside
]

_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from test_nchwc import check_cases
from test_nchwc_split import SPLIT_CASES
check_cases(SPLIT_CASES, (16, 8))
print("ok")
"""


@pytest.mark.parametrize("tuning", ["intel", "amd"])
@pytest.mark.parametrize("threads", ["2", "3"])
def test_split_matches_fused_conv2d(tuning, threads):
    env = dict(os.environ, OPFORGE_CONV_TUNING=tuning, OPFORGE_NUM_THREADS=threads)
    out = subprocess.run([sys.executable, "-c", _SCRIPT.format(tests=os.path.dirname(__file__))], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]
