"""A parked pool worker is woken onto another CPU than its caller's
(cpp/framework/wake_steering.h, for the intra-op and the inter-op pools): its
affinity is narrowed while it sleeps and must be whole again once it has
woken, whatever the caller did with the task meanwhile, so that no thread of
the process is left pinned."""
import os
import subprocess
import sys

import pytest

CHILD = """
import os, time, numpy as np, opforge as of
cpus = sorted(os.sched_getaffinity(0))[:2]
os.sched_setaffinity(0, cpus)
x = np.linspace(0, 1, 1 << 21, dtype=np.float32)   # big enough for both threads
a = np.linspace(0, 1, 256 * 256, dtype=np.float32).reshape(256, 256)
want = np.exp(x)
def masks():
    return {int(t): sorted(os.sched_getaffinity(int(t))) for t in os.listdir('/proc/self/task')}
for round in range(6):
    time.sleep(0.3)                       # the workers park after a short spin
    if round % 3 == 0:                    # intra-op pool
        np.testing.assert_allclose(of.exp(x).numpy(), want, rtol=1e-6)
    elif round % 3 == 1:
        np.testing.assert_allclose(of.matmul(a, a).numpy(), a @ a, rtol=1e-4)
    else:                                 # inter-op pool: async ops run there
        with of.execution_mode("async"):
            z = of.exp(x)
            of.flush()
        np.testing.assert_allclose(z.numpy(), want, rtol=1e-6)
    time.sleep(0.05)                      # long enough for the woken worker to run
    bad = {t: m for t, m in masks().items() if m != cpus}
    assert not bad, f"round {round}: threads left with a narrowed affinity {bad} (process: {cpus})"
print("ok")
"""


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs")
def test_woken_worker_gets_its_affinity_back():
    env = dict(os.environ, OPFORGE_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")
