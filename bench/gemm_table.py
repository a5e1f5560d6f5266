"""Issue 22's GEMM table: float32 matmul GFLOP/s beside numpy (OpenBLAS) and
beside the machine's measured FMA peak.

    python -m bench.gemm_table [--repeats N] [--quick] [--onnx] [--train] [--train-only] [--all] [--epilogue]

--all prints the whole issue-22 table in one run: the matmul rows, the ONNX
MLPs beside onnxruntime, and the training steps beside PyTorch (when torch
is installed; bench/train_step.py).

Square n = 64 .. 2048 and transformer-layer shapes (M = 1, 16, 128; K, N in
{768, 3072}, the weight both row-major and as nn.Linear stores it, [N, K]),
numpy and opforge timed in one process, interleaved (bench/timing.py),
medians of the repeats, each batch after a 0.15 s pause (--settle): numpy's
OpenBLAS workers busy-wait about 0.1 s after each call and would otherwise
share the two cores with whichever library runs next. On a machine shared
with other work, `chrt -f 1 python -m bench.gemm_table ...` shields the
run from it (the figures in docs/gemm.md were taken so). The peak is measured once by an FMA-throughput loop
on every intra-op thread (cpp/kernels/gemm/peak.cc). --onnx adds the ONNX
MLPs (batch 64: 784-512-512-10; batch 1 and 4: 784-256-256-10) beside
onnxruntime. The path column says which route a loop of that product took
right after it was timed (path_probe). --epilogue times FusedMatMul per
activation beside the bare product (run it again with OPFORGE_GEMM_EPILOGUE=pass for the second-pass
epilogue the microkernels' in-register one replaced).
"""
import argparse
import ctypes
import statistics
import sys
import time
import timeit

import numpy as np

from bench import timing


def fma_peak_gflops(threads, seconds=0.3):
    from opforge import _pywrap_internal
    f = getattr(ctypes.CDLL(_pywrap_internal.__file__), "_ZN7opforge4gemm13FmaPeakGflopsEid", None)
    if f is None:  # a build without peak.cc
        return float("nan")
    f.restype, f.argtypes = ctypes.c_double, [ctypes.c_int, ctypes.c_double]
    return max(f(threads, seconds) for _ in range(3))


def shapes(quick):
    square = (64, 128) if quick else (64, 128, 256, 512, 1024, 2048)
    out = [(f"square {n}", n, n, n, False) for n in square]
    if quick:
        return out
    for m in (1, 16, 128):
        for k, n in ((768, 768), (768, 3072), (3072, 768)):
            out.append((f"M={m} K={k} N={n}", m, k, n, False))
            out.append((f"M={m} K={k} N={n} W^T", m, k, n, True))
    return out


def _thread_time(stmts, ns, repeats, min_batch_s, clock=time.thread_time):
    """Like timing.interleaved, timed by the calling thread's CPU time (a
    one-thread run on a machine busy with other work: what the product costs
    the core it runs on, without the time it waited for one)."""
    timers = {lib: timeit.Timer(s, globals=ns, timer=clock) for lib, s in stmts.items()}
    numbers = {lib: timing.calibrate(t, min_batch_s) for lib, t in timers.items()}
    libs = list(stmts)
    out = {lib: [] for lib in libs}
    for r in range(repeats):
        for lib in libs[r % len(libs):] + libs[:r % len(libs)]:
            out[lib].append(timers[lib].timeit(numbers[lib]) / numbers[lib])
    return out


def _counter(name):
    from opforge import _pywrap_internal
    f = getattr(ctypes.CDLL(_pywrap_internal.__file__), name, None)
    if f is not None:
        f.restype = ctypes.c_int64
    return f


def path_probe(of, stmt, ns, m, k, n, calls=200):
    """Which route a loop of this product takes right after it was timed
    (untimed: counted over `calls` more calls): "split N%" (small products
    over two threads, cpp/kernels/gemm/small_split.h), "BLAS N%" (handed to
    numpy's spinning OpenBLAS, blas_handoff.h), "pool" (the threaded
    driver) or "1 thread"."""
    split, handoff = _counter("_ZN7opforge4gemm15SmallSplitCountEi"), _counter("_ZN7opforge4gemm12HandoffCountEv")
    s0 = split(0) if split else 0
    h0 = handoff() if handoff else 0
    code = compile(stmt, "<path_probe>", "exec")
    for _ in range(calls):
        exec(code, ns)
    ds, dh = (split(0) - s0 if split else 0), (handoff() - h0 if handoff else 0)
    if ds:
        return f"split {100 * ds // calls}%"
    if dh:
        return f"BLAS {100 * dh // calls}%"
    large = m * n * k >= 128 ** 3 or (m <= 8 and n * k >= 1 << 17)
    return "pool" if large and of.config.num_threads() > 1 else "1 thread"


def matmul_rows(of, repeats, quick, cpu_time=False, settle=0.15):
    rng = np.random.default_rng(0)
    rows = []
    for name, m, k, n, wt in shapes(quick):
        x = rng.standard_normal((m, k), dtype=np.float32)
        w = rng.standard_normal((n, k) if wt else (k, n), dtype=np.float32)
        ns = {"np": np, "of": of, "x": x, "w": w}
        stmts = ({"numpy": "np.matmul(x, w.T)", "opforge": "of.matmul(x, w, transpose_b=True)"} if wt else
                 {"numpy": "np.matmul(x, w)", "opforge": "of.matmul(x, w)"})
        ref = eval(stmts["numpy"], ns)
        got = np.asarray(eval(stmts["opforge"], ns))
        if not np.allclose(got, ref, rtol=1e-3, atol=1e-3 * np.sqrt(k)):
            raise SystemExit(f"bench.gemm_table: opforge differs from numpy at {name}")
        if cpu_time:
            samples = _thread_time(stmts, ns, repeats, 0.01 if quick else 0.05)
        else:
            # settle_s: numpy's OpenBLAS workers busy-wait about 0.1 s after
            # each call; without the pause they share the two cores with
            # whichever library runs next (ours ran 0.56-0.91x numpy that way
            # at n = 256-1024, against 1.0-1.6x measured apart).
            samples = timing.interleaved(stmts, ns, repeats, 0.01 if quick else 0.05,
                                         settle_s=0.0 if quick else settle)
        med = {lib: statistics.median(s) for lib, s in samples.items()}
        flops = 2.0 * m * n * k
        rows.append((name, flops / med["numpy"] / 1e9, flops / med["opforge"] / 1e9, med["numpy"] / med["opforge"],
                     path_probe(of, stmts["opforge"], ns, m, k, n)))
    return rows


EPILOGUE_SHAPES = ((128, 768, 3072), (128, 3072, 768), (16, 768, 3072), (256, 256, 256), (64, 784, 512))
EPILOGUE_ACTS = ("none", "relu", "gelu", "silu", "sigmoid")


def epilogue_rows(repeats, settle=0.15):
    """FusedMatMul (bias + activation in the GEMM's epilogue) against the bare
    product of the same shape, interleaved: the epilogue's cost in % of the
    product. OPFORGE_GEMM_EPILOGUE=pass measures the second-pass epilogue the
    microkernels' in-register one replaced."""
    import opforge as of
    gen = of.ops.gen_linalg_ops
    rng = np.random.default_rng(0)
    rows = []
    for m, k, n in EPILOGUE_SHAPES:
        ns = {"of": of, "gen": gen, "x": rng.standard_normal((m, k), dtype=np.float32),
              "w": rng.standard_normal((k, n), dtype=np.float32), "bias": rng.standard_normal(n, dtype=np.float32)}
        stmts = {"matmul": "of.matmul(x, w)"}
        stmts.update({a: f"gen.fused_mat_mul(x, w, bias, activation='{a}')" for a in EPILOGUE_ACTS})
        samples = timing.interleaved(stmts, ns, repeats, 0.05, settle_s=settle)
        med = {lib: statistics.median(v) for lib, v in samples.items()}
        rows.append((f"M={m} K={k} N={n}", med["matmul"] * 1e6,
                     [100 * (med[a] / med["matmul"] - 1) for a in EPILOGUE_ACTS]))
    return rows


def onnx_rows(repeats, cpu_time=False):
    import onnxruntime as ort
    import opforge as of
    import opforge.onnx
    from bench.onnx_mlp import build_model
    rows = []
    for batch, sizes in ((64, (784, 512, 512, 10)), (1, (784, 256, 256, 10)), (4, (784, 256, 256, 10))):
        rng = np.random.default_rng(0)
        model, _ = build_model(rng, sizes=sizes, batch=batch)
        x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
        opts = ort.SessionOptions()
        if cpu_time:  # one thread each, timed by the process's CPU time
            opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        imported = opforge.onnx.import_model(model)
        gsess = of.Session(imported.graph)
        ns = {"sess": sess, "feeds": {"x": x}, "gsess": gsess, "gy": [imported.outputs["y"]],
              "gfeeds": {imported.inputs["x"]: x}}
        stmts = {"onnxruntime": "sess.run(None, feeds)", "opforge": "gsess.run(gy, gfeeds)"}
        ref, got = eval(stmts["onnxruntime"], ns)[0], np.asarray(eval(stmts["opforge"], ns)[0])
        if not np.allclose(got, ref, rtol=1e-4, atol=1e-5):
            raise SystemExit(f"bench.gemm_table: ONNX MLP batch {batch} differs from onnxruntime")
        if cpu_time:
            samples = _thread_time(stmts, ns, repeats, 0.05, clock=time.process_time)
        else:
            samples = timing.interleaved(stmts, ns, repeats, 0.02, settle_s=0.1)
        med = {lib: statistics.median(s) for lib, s in samples.items()}
        rows.append((f"ONNX MLP batch {batch} {'-'.join(map(str, sizes))}", med["onnxruntime"] * 1e3,
                     med["opforge"] * 1e3, med["onnxruntime"] / med["opforge"]))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.gemm_table", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--quick", action="store_true", help="two small sizes, 3 repeats: proves the harness works")
    p.add_argument("--onnx", action="store_true", help="also the ONNX MLPs beside onnxruntime")
    p.add_argument("--onnx-only", action="store_true", help="only the ONNX MLPs")
    p.add_argument("--train", action="store_true", help="also the MLP training steps beside PyTorch")
    p.add_argument("--train-only", action="store_true", help="only the MLP training steps (and the peak)")
    p.add_argument("--epilogue", action="store_true",
                   help="only FusedMatMul's epilogue cost beside the bare product (per activation)")
    p.add_argument("--all", action="store_true", help="matmul, ONNX MLPs and training steps: the issue-22 table")
    p.add_argument("--settle", type=float, default=0.15,
                   help="seconds to pause before each timed matmul batch (0: the libraries run in each "
                        "other's BLAS spin-wait window, as before this option)")
    p.add_argument("--cpu-time", action="store_true",
                   help="time by the calling thread's CPU time (set OPFORGE_NUM_THREADS=1 and "
                        "OPENBLAS_NUM_THREADS=1): per-core figures on a loaded machine")
    args = p.parse_args(argv)
    import opforge as of
    repeats = 3 if args.quick else args.repeats
    threads = of.config.num_threads()
    if args.cpu_time and threads != 1:
        raise SystemExit("bench.gemm_table: --cpu-time needs OPFORGE_NUM_THREADS=1 (and OPENBLAS_NUM_THREADS=1)")
    peak = fma_peak_gflops(threads, 0.05 if args.quick else 0.3)
    if args.epilogue:
        import os
        mode = os.environ.get("OPFORGE_GEMM_EPILOGUE", "in registers")
        print(f"FusedMatMul epilogue ({mode}): time over the bare product, median of {repeats} interleaved repeats")
        print(f"{'bias + activation':<24}{'matmul us':>10}" + "".join(f"{a:>9}" for a in EPILOGUE_ACTS))
        for name, t_mm, extra in epilogue_rows(repeats, args.settle):
            print(f"{name:<24}{t_mm:>10.1f}" + "".join(f"{e:>+8.1f}%" for e in extra))
        print(f"(load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs at the end)")
        return 0
    print(f"measured FMA peak: {peak:.0f} GFLOP/s on {threads} threads; "
          f"median of {repeats} interleaved repeats")
    if not (args.onnx_only or args.train_only):
        print(f"{'float32 matmul':<28}{'numpy GF/s':>11}{'opforge GF/s':>13}{'% peak':>8}{'vs numpy':>9}  path")
    if args.cpu_time:
        print("(timed by thread CPU time, one thread each; the peak is wall-clock and drops with load)")
    for name, g_np, g_of, ratio, path in ([] if args.onnx_only or args.train_only else
                                          matmul_rows(of, repeats, args.quick, args.cpu_time, args.settle)):
        print(f"{name:<28}{g_np:>11.1f}{g_of:>13.1f}{100 * g_of / peak:>7.0f}%{ratio:>8.2f}x  {path}")
    if args.all:
        args.onnx = args.train = True
    if args.onnx or args.onnx_only:
        print(f"{'ONNX MLP (Session.run)':<36}{'ort ms':>8}{'opforge ms':>11}{'vs ort':>8}")
        for name, t_ort, t_of, ratio in onnx_rows(repeats, args.cpu_time):
            print(f"{name:<36}{t_ort:>8.3f}{t_of:>11.3f}{ratio:>7.2f}x")
    if args.train or args.train_only:
        from bench import train_step
        trows = train_step.rows(repeats, args.quick, args.cpu_time)
        print(f"{'training step (fwd+bwd+Adam)':<36}{'torch ms':>9}{'opforge ms':>11}{'vs torch':>9}"
              f"{'GF/s':>7}{'% peak':>8}")
        if not trows:
            print("(torch not installed: pip install torch to compare)")
        for name, t_t, t_o, ratio, gf in trows:
            print(f"{name:<36}{t_t:>9.2f}{t_o:>11.2f}{ratio:>8.2f}x{gf:>7.0f}{100 * gf / peak:>7.0f}%")
    print(f"(load average {' '.join(f'{x:.1f}' for x in __import__('os').getloadavg())} on "
          f"{__import__('os').cpu_count()} CPUs at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
