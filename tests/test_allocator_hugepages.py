"""OPFORGE_ALLOCATOR_HUGEPAGES=0: large tensors (the allocator's mmap tier)
are mapped without MADV_HUGEPAGE, so none of their memory is in transparent
huge pages; results are the same. A fresh process, as the setting is read once."""
import os
import subprocess
import sys

import pytest

_CHILD = r"""
import numpy as np
import opforge as of
x = np.arange(8 << 20, dtype=np.float32)  # 32 MiB: the mmap tier (1 MiB and up)
y = of.add(x, x)
addr = y.numpy().ctypes.data
np.testing.assert_array_equal(y.numpy()[-3:], 2 * x[-3:])
# AnonHugePages of the mapping that holds y's data.
inside, huge = False, None
for line in open("/proc/self/smaps"):
    head = line.split()
    if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
        lo, hi = (int(v, 16) for v in head[0].split("-"))
        inside = lo <= addr < hi
    elif inside and head[0] == "AnonHugePages:":
        huge = int(head[1])
print(huge)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs /proc/self/smaps (Linux)")
def test_hugepages_off_maps_large_tensors_with_small_pages():
    env = dict(os.environ, OPFORGE_ALLOCATOR_HUGEPAGES="0")
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "0", out.stdout
