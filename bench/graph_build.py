"""Graph building speed (issue 21): nodes per second while a program of
10,000 tiny ops is built as graph nodes, beside the same program run eagerly
in the same process (interleaved). ``python -m bench.graph_build [--quick]``
prints the table and JSON; bench/engine.py includes the case.

The program mixes what models build: a binary op of two graph tensors, an op
with a Python scalar (a constant node), a unary op, a reduction with attrs
and a reshape, over [None, 16] inputs (unknown batch dim).
"""
import json
import statistics
import sys

import numpy as np

from bench import timing


def program(of, x, w, steps):
    # 8 nodes a step: 6 ops and 2 constants (the scalar and w).
    a, b = x, x
    for _ in range(steps):
        a = of.add(a, b)            # two tensors
        b = of.mul(a, 0.5)          # a scalar: one Const node more
        a = of.tanh(b)
        b = of.reshape(of.sum(a, [1], True) + w, [-1, 16])
    return b


def run(quick=False):
    import opforge as of
    steps = (1000 if quick else 10000) // 8
    repeats = 3 if quick else 7
    w = np.linspace(0, 1, 16, dtype=np.float32)
    x0 = np.ones((4, 16), np.float32)
    nodes = []

    def build():
        g = of.Graph()
        with g.as_default():
            x = of.placeholder(of.float32, [None, 16], name="x")
            program(of, x, w, steps)
        nodes.append(len(g.get_operations()))

    def eager():
        program(of, x0, w, steps)

    tb, te = timing.paired(build, eager, repeats)
    t_build, t_eager = statistics.median(tb), statistics.median(te)
    n = nodes[-1]
    return {"engine.graph_build": {
        "title": f"building a graph of {n} nodes ({6 * steps} op calls) vs running them eagerly",
        "baseline_s": t_eager, "new_s": t_build, "ratio": t_eager / t_build,
        "nodes": n, "nodes_per_s": n / t_build}}


if __name__ == "__main__":
    result = run(quick="--quick" in sys.argv)
    c = result["engine.graph_build"]
    print(f"{c['title']}: build {c['new_s'] * 1e3:.1f} ms ({c['nodes_per_s']:,.0f} nodes/s), "
          f"eager {c['baseline_s'] * 1e3:.1f} ms, eager/build {c['ratio']:.2f}x", file=sys.stderr)
    print(json.dumps(result))
