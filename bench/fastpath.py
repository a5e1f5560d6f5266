"""Issue 21's tiny-call table: opforge's dispatch beside numpy, interleaved.

    python -m bench.fastpath                   this checkout only
    python -m bench.fastpath --baseline PY     also the release installed for the
                                               interpreter PY, run in alternating
                                               subprocesses (ratios to numpy are
                                               compared, each from its own process)

Every row is timed in one process beside its numpy peer: each round times each
statement once (a batch of calls through timeit, order rotating), and a row
reports the medians over the rounds and their ratio, numpy / opforge (> 1:
opforge is faster). The taped add is compared with the untaped one instead.
Times are the thread's CPU time (--wall: the wall clock): on a loaded machine
the time a thread spends descheduled belongs to the load, and lands on
whichever library happened to run.

This is the same measurement as `python -m bench --only dispatch grad.add_1`
(both run statements through timeit in the case's namespace, with module
attribute lookups as a user writes them, and both take the CPU clock for
these cases); it has more rounds and a row per target, and can put the
previous release beside this checkout.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import timeit

import numpy as np

# (id, title, numpy statement, opforge statement, peer): peer "numpy" compares
# with the numpy statement, "add_1" with the untaped one-element add.
ROWS = (
    ("add_1", "of.add(x, y), 1 element, numpy inputs", "np.add(x1, y1)", "of.add(x1, y1)", "numpy"),
    ("tensor_add_1", "Tensor + Tensor, 1 element (numpy: x + y)", "x1 + y1", "t1 + u1", "numpy"),
    ("add_1000", "of.add(x, y), 1000 elements", "np.add(x, y)", "of.add(x, y)", "numpy"),
    ("tensor_add_1000", "Tensor + Tensor, 1000 elements", "x + y", "t + u", "numpy"),
    ("sum_1000", "sum, 1000 elements", "np.sum(x)", "of.sum(x)", "numpy"),
    ("sum_axis1_keepdims", "sum(axis=1, keepdims=True), 16x64",
     "np.sum(m, axis=1, keepdims=True)", "of.sum(m, axis=1, keepdims=True)", "numpy"),
    ("matmul_16", "matmul 16x16", "np.matmul(a, b)", "of.matmul(a, b)", "numpy"),
    ("protocol_add_1000", "np.add on Tensors, 1000 elements", "np.add(x, y)", "np.add(t, u)", "numpy"),
    ("protocol_sum_1000", "np.sum on a Tensor, 1000 elements", "np.sum(x)", "np.sum(t)", "numpy"),
    ("taped_add_1", "taped add, 1 element (vs the untaped of.add)", "of.add(x1, y1)", "of.add(g1, y1)",
     "add_1"),
)

# (id, what the issue asks, the ratio it needs)
TARGETS = (
    ("add_1", "of.add 1 element >= 1.2x numpy", 1.2),
    ("tensor_add_1", "Tensor + Tensor 1 element >= 1.2x numpy", 1.2),
    ("taped_add_1", "taped add <= 3x untaped", 1 / 3),
)


def namespace():
    import opforge as of
    rng = np.random.default_rng(0)
    f = lambda *s: rng.standard_normal(s, dtype=np.float32)
    ns = {"np": np, "of": of, "x1": f(1), "y1": f(1), "x": f(1000), "y": f(1000),
          "m": rng.random((16, 64), dtype=np.float32), "a": f(16, 16), "b": f(16, 16)}
    ns.update(t1=of.tensor(ns["x1"]), u1=of.tensor(ns["y1"]), t=of.tensor(ns["x"]), u=of.tensor(ns["y"]),
              g1=of.tensor(ns["x1"], requires_grad=True))
    return ns


def measure(rounds, number, wall=False):
    """{row id: (numpy ns, opforge ns)}, medians of `rounds` interleaved batches."""
    ns = namespace()
    out = {}
    clock = time.perf_counter if wall else time.thread_time
    for rid, _, np_stmt, of_stmt, _ in ROWS:
        timers = [timeit.Timer(np_stmt, globals=ns, timer=clock), timeit.Timer(of_stmt, globals=ns, timer=clock)]
        for t in timers:
            t.timeit(number // 4)  # warm: memos, allocator caches
        samples = ([], [])
        for r in range(rounds):
            for k in ((0, 1) if r % 2 == 0 else (1, 0)):
                samples[k].append(timers[k].timeit(number) / number * 1e9)
        out[rid] = (statistics.median(samples[0]), statistics.median(samples[1]))
    return out


def ratios(m):
    """{row id: numpy / opforge}; the taped row: taped / untaped opforge."""
    r = {}
    for rid, _, _, _, peer in ROWS:
        r[rid] = m[rid][0] / m[rid][1] if peer == "numpy" else m[rid][1] / m[peer][1]
    return r


def render(runs, label="now"):
    """runs: {label: [measure() results]}; medians over the runs of each label."""
    lines = []
    labels = list(runs)
    head = f"{'case':48s}" + "".join(f"{l + ' numpy':>14s}{l + ' opforge':>16s}{'ratio':>8s}" for l in labels)
    lines += [head, "-" * len(head)]
    med = {}
    for l in labels:
        ms = runs[l]
        med[l] = {rid: (statistics.median(x[rid][0] for x in ms), statistics.median(x[rid][1] for x in ms),
                        statistics.median(ratios(x)[rid] for x in ms)) for rid, *_ in ROWS}
    for rid, title, *_ , peer in ROWS:
        row = f"{title:48s}"
        for l in labels:
            n, o, q = med[l][rid]
            row += f"{n:12.0f}ns{o:14.0f}ns{q:7.2f}x" if peer == "numpy" else f"{'':14s}{o:14.0f}ns{q:7.2f}x"
        lines.append(row)
    lines.append("")
    last = labels[-1] if "now" not in labels else "now"
    for rid, what, need in TARGETS:
        q = med[last][rid][2]
        ok = q >= need if need >= 1 else q <= 1 / need
        lines.append(f"target: {what:45s} {q:5.2f}x  {'PASS' if ok else 'MISS'}")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.fastpath", description=__doc__.splitlines()[0])
    p.add_argument("--baseline", metavar="PYTHON", help="an interpreter with the previous release installed")
    p.add_argument("--runs", type=int, default=3, help="processes per version (alternating), default 3")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--number", type=int, default=20000, help="calls per timed batch")
    p.add_argument("--wall", action="store_true", help="time by the wall clock, not the thread's CPU time")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        json.dump(measure(a.rounds, a.number, a.wall), sys.stdout)
        return 0
    versions = {"now": sys.executable}
    if a.baseline:
        versions = {"prev": a.baseline, "now": sys.executable}
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs = {l: [] for l in versions}
    load = [os.getloadavg()[0]]
    for _ in range(a.runs):
        for l, py in versions.items():
            # The child runs from a neutral directory (the baseline must not import
            # this checkout's package) with this file's folder on its path.
            cmd = [py, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import fastpath; "
                   "sys.exit(fastpath.main(sys.argv[2:]))", os.path.join(here, "bench"), "--child",
                   "--rounds", str(a.rounds), "--number", str(a.number)] + (["--wall"] if a.wall else [])
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd="/")
            runs[l].append({k: tuple(v) for k, v in json.loads(out.stdout).items()})
    load.append(os.getloadavg()[0])
    print(render(runs))
    print(f"\n{a.runs} process(es) per version, {a.rounds} rounds of {a.number} calls each, "
          f"{'wall clock' if a.wall else 'thread CPU time'}; "
          f"load average {load[0]:.1f} at start, {load[1]:.1f} at end ({os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
