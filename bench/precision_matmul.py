"""Issue 25's bfloat16 matmul figure: opforge's bfloat16 MatMul (AVX512-BF16
dot products, float32 accumulation) against opforge's own float32 MatMul,
same shapes, one process, interleaved (bf16, f32, bf16, ...), medians.

    python -m bench.precision_matmul [--n 1024] [--repeats 15]

Also times float16 (computed through float32) and, for reference, numpy's
float32 matmul. Prints the load average: timings on a loaded machine are noisy.
"""
import argparse
import os
import statistics
import time

import numpy as np

import opforge as of


def _time(fn, repeats, warmup=3):
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def run(n, repeats):
    import ml_dtypes
    rng = np.random.default_rng(0)
    a32 = rng.standard_normal((n, n), dtype=np.float32)
    b32 = rng.standard_normal((n, n), dtype=np.float32)
    abf, bbf = a32.astype(ml_dtypes.bfloat16), b32.astype(ml_dtypes.bfloat16)
    a16, b16 = a32.astype(np.float16), b32.astype(np.float16)
    calls = {
        "opforge bfloat16": lambda: of.matmul(abf, bbf),
        "opforge float32": lambda: of.matmul(a32, b32),
        "opforge float16": lambda: of.matmul(a16, b16),
        "numpy float32": lambda: a32 @ b32,
    }
    times = {k: [] for k in calls}
    for fn in calls.values():  # warm every path (pools, packing buffers)
        _time(fn, 1, warmup=2)
    for r in range(repeats):  # interleaved: one call of each per round, the order rotating
        names = list(calls)
        names = names[r % len(names):] + names[:r % len(names)]
        for name in names:
            times[name] += _time(calls[name], 1, warmup=0)
    med = {k: statistics.median(v) for k, v in times.items()}
    flop = 2.0 * n ** 3
    return med, flop


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args(argv)
    from opforge import _pywrap_internal  # noqa: F401  (the build is current)
    load = os.getloadavg()
    med, flop = run(args.n, args.repeats)
    base = med["opforge float32"]
    print(f"matmul {args.n}^3, medians of {args.repeats} interleaved rounds; load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'':20s} {'ms':>8s} {'GFLOP/s':>8s} {'vs opforge f32':>15s}")
    for name, t in med.items():
        print(f"{name:20s} {t * 1e3:8.2f} {flop / t / 1e9:8.1f} {base / t:14.2f}x")
    return med


if __name__ == "__main__":
    main()
