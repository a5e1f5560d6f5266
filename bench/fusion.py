"""Graph elementwise fusion (cpp/framework/graph_fusion.cc): a chain of 6 ops on
1M float32 values run as one FusedElementwise node, against the same graph
unfused (OPFORGE_GRAPH_FUSION=0 when it is planned), numpy and PyTorch (eager,
when installed), all in one process, interleaved.

    python -m bench.fusion [--n 1048576] [--repeats 30] [--cpu-time]

The chain is GPT-2's GELU as the ONNX importer rewrites it (onnx/_rewrite.py):
x * sigmoid(x * (a + b * x * x)). Times are medians of interleaved rounds;
ratios are the other's time over the fused graph's (above 1: fused faster).
--cpu-time times process CPU time instead of wall time (a loaded machine; run
with OPFORGE_NUM_THREADS=1 and torch's threads at 1 so every library runs on
the calling thread).
"""
import argparse
import os
import statistics
import time

import numpy as np

K = float(np.sqrt(2 / np.pi))
A, B = 2 * K, 2 * K * 0.044715


def _graph_runner(n, fuse):
    import opforge as of
    os.environ["OPFORGE_GRAPH_FUSION"] = "1" if fuse else "0"
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [n])
        y = x * of.sigmoid(x * (A + B * (x * x)))
    sess = of.Session(g)
    sess.run(y, {x: np.zeros(n, np.float32)})  # planned now, while the variable holds
    return lambda xv: sess.run(y, {x: xv}), sess


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--cpu-time", action="store_true")
    args = ap.parse_args(argv)
    clock = time.process_time if args.cpu_time else time.perf_counter

    xv = np.random.default_rng(0).normal(size=args.n).astype(np.float32)
    fused, s_fused = _graph_runner(args.n, True)
    plain, s_plain = _graph_runner(args.n, False)
    a, b = np.float32(A), np.float32(B)
    runs = {"opforge fused": fused, "opforge unfused": plain,
            "numpy": lambda v: v * (1 / (1 + np.exp(-(v * (a + b * (v * v))))))}
    try:
        import torch
        if args.cpu_time:
            torch.set_num_threads(1)
        tx = torch.from_numpy(xv)
        runs["torch"] = lambda v: tx * torch.sigmoid(tx * (A + B * (tx * tx)))
    except ImportError:
        pass

    want = runs["numpy"](xv)
    ref = fused(xv)
    np.testing.assert_allclose(ref, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ref, plain(xv))
    fused(xv)
    nodes = (s_fused.last_run_stats["nodes_run"], s_plain.last_run_stats["nodes_run"])

    times = {k: [] for k in runs}
    for f in runs.values():  # warm-up
        f(xv)
    for r in range(args.repeats):
        order = list(runs)
        order = order[r % len(order):] + order[:r % len(order)]
        for k in order:
            t0 = clock()
            runs[k](xv)
            times[k].append(clock() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["opforge fused"]
    print(f"chain of 6 ops on {args.n} float32 ({'CPU' if args.cpu_time else 'wall'} time, "
          f"median of {args.repeats} interleaved rounds; nodes run: fused {nodes[0]}, unfused {nodes[1]}; "
          f"load average {os.getloadavg()[0]:.1f})")
    print(f"{'':18s}{'ms':>9s}{'vs fused':>10s}")
    for k, v in med.items():
        print(f"{k:18s}{v * 1e3:9.3f}{v / base:9.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
