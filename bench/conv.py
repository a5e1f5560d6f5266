"""Conv2D 3x3, 64 -> 64 channels, 56x56, padding 1, float32: forward and both backward ops, opforge
beside PyTorch in one process, interleaved, the same thread count.

    python -m bench.conv [--repeats N] [--batches 1 8] [--cases forward ...] [--timer cpu|wall] [--quick]
    OPFORGE_NUM_THREADS=1 python -m bench.conv      # one thread each, process CPU time

Prints the median ms per call of each and PyTorch's time over opforge's
(above 1: opforge is faster), with the spread (min-max ratio of the paired
repeats). The clock is process CPU time at one thread (it leaves out the time
the process was descheduled on a loaded machine) and wall time otherwise.
Needs torch (not an opforge extra).
"""
import argparse
import os
import sys
import time

import numpy as np

from bench import timing


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.conv", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--cases", nargs="+", default=["forward", "backward input", "backward filter"])
    p.add_argument("--timer", choices=["cpu", "wall"], default=None,
                   help="cpu: process CPU time (default at one thread); wall: perf_counter (default otherwise)")
    p.add_argument("--quick", action="store_true", help="one repeat, no settle pauses: proves the harness works")
    args = p.parse_args(argv)
    import torch
    import opforge as of
    threads = of.config.num_threads()
    torch.set_num_threads(threads)
    repeats, settle = (1, 0.0) if args.quick else (args.repeats, 0.3)
    timer_name = args.timer or ("cpu" if threads == 1 else "wall")
    timer = time.process_time if timer_name == "cpu" else time.perf_counter
    attrs = dict(pads=[1, 1, 1, 1])
    print(f"Conv2D 3x3 64->64 56x56 pad 1 float32, {threads} threads, {timer_name} time, median of {repeats} "
          f"interleaved repeats, load {os.getloadavg()[0]:.1f}")
    print(f"{'case':<22}{'opforge ms':>12}{'torch ms':>12}{'torch/opforge':>15}{'spread':>14}")
    for n in args.batches:
        rng = np.random.default_rng(n)
        x = rng.standard_normal((n, 64, 56, 56)).astype(np.float32)
        w = (rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32)
        dy = rng.standard_normal((n, 64, 56, 56)).astype(np.float32)
        tx, tw, tdy = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(dy)
        tg = torch.nn.grad
        ns = dict(of=of, x=x, w=w, dy=dy, tx=tx, tw=tw, tdy=tdy, torch=torch, tg=tg, attrs=attrs)
        cases = {
            "forward": ("of.conv2d(x, w, **attrs)", "torch.nn.functional.conv2d(tx, tw, padding=1)"),
            "backward input": ("of.raw_ops.conv2d_backprop_input(x, w, dy, **attrs)",
                               "tg.conv2d_input(tx.shape, tw, tdy, padding=1)"),
            "backward filter": ("of.raw_ops.conv2d_backprop_filter(x, w, dy, **attrs)",
                                "tg.conv2d_weight(tx, tw.shape, tdy, padding=1)"),
        }
        for name, (ofs, ts) in cases.items():
            if name not in args.cases:
                continue
            got, want = eval(ofs, ns).numpy(), eval(ts, ns).numpy()
            if not np.allclose(got, want, rtol=1e-3, atol=1e-2 * max(1.0, float(np.abs(want).max()) * 1e-3)):
                print(f"bench.conv: {name} batch {n}: opforge differs from torch by "
                      f"{np.abs(got - want).max()}", file=sys.stderr)
                return 1
            t = timing.interleaved({"opforge": ofs, "torch": ts}, ns, repeats, 0.05, settle_s=settle, timer=timer)
            med = {lib: timing.summarize(s)["median_s"] for lib, s in t.items()}
            ratios = [b / a for a, b in zip(t["opforge"], t["torch"])]
            print(f"{name + ' b' + str(n):<22}{med['opforge'] * 1e3:>12.2f}{med['torch'] * 1e3:>12.2f}"
                  f"{med['torch'] / med['opforge']:>14.2f}x{min(ratios):>7.2f}-{max(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
