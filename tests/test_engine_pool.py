"""The inter-op pool's idle polling (OPFORGE_INTER_OP_SPIN_US) and the
engine's hand-offs: results never depend on them (issues 10 and 11)."""

import os
import subprocess
import sys

import pytest

# A chained and fanned-out async program and a parallel graph run, checked
# against numpy, in a fresh interpreter (the pool reads the knob once).
_PROGRAM = """
import numpy as np, opforge as of
rng = np.random.default_rng(0)
a = rng.random((40, 40))
with of.execution_mode("async"):
    chain = a
    for _ in range(50):
        chain = of.tanh(of.matmul(chain, a) * 0.05)
    fans = [of.add(a, float(i)) for i in range(64)]
    total = fans[0]
    for f in fans[1:]:
        total = total + f
    got_chain, got_total = chain.numpy(), total.numpy()
    of.flush()
want = a
for _ in range(50):
    want = np.tanh((want @ a) * 0.05)
assert np.allclose(got_chain, want, rtol=1e-12), "chain"
assert np.allclose(got_total, 64 * a + sum(range(64)), rtol=1e-12), "fan"
g = of.Graph()
with g.as_default():
    x = of.placeholder(of.float64, [None, 40])
    outs = []
    for k in range(4):
        c = x
        for _ in range(3):
            c = of.matmul(c, a) * 0.1 + float(k)
        outs.append(c)
xv = rng.random((5, 40))
sess = of.Session(g, inter_op_threads=4)
for _ in range(20):
    got = sess.run(outs, {x: xv})
for k, o in enumerate(got):
    w = xv
    for _ in range(3):
        w = (w @ a) * 0.1 + k
    assert np.allclose(o, w, rtol=1e-12), "graph"
print("ok")
"""


@pytest.mark.parametrize("spin", ["0", "50", "10000", "-3", "junk", ""])
def test_results_do_not_depend_on_idle_polling(spin):
    env = dict(os.environ, OPFORGE_INTER_OP_SPIN_US=spin, OPFORGE_INTER_OP_THREADS="3")
    r = subprocess.run([sys.executable, "-c", _PROGRAM], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
