"""torchvision CNNs (random init, eval) exported to ONNX, run by opforge (Session.run of the imported graph)
and onnxruntime in one process, interleaved, the same thread count.

    python -m bench.vision_models [--models resnet18 mobilenet_v3_small squeezenet1_0] [--batches 1 8]

Prints whether the outputs match (relative 1e-3 of the largest logit), the
median ms per batch of each and onnxruntime's time over opforge's (above 1:
opforge is faster), and with --memory the peak resident memory of a fresh
process that loads the model and runs it 3 times, for each library (the
ratio opforge / onnxruntime; below 1: opforge uses less). Needs torch,
torchvision, onnx and onnxruntime.
"""
import argparse
import io
import sys
import time

import numpy as np

from bench import timing


def _import_torchvision():
    import torch
    try:
        import torchvision
    except RuntimeError:
        # A torchvision wheel whose C++ ops cannot load (e.g. built for CUDA):
        # the models need none of them; declare the two its import checks for.
        lib = torch.library.Library("torchvision", "DEF")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _import_torchvision.lib = lib
        import torchvision
    return torch, torchvision


def export(name, batch, opset=18):
    """The model exported (random init, seed 0) and its input. With OPFORGE_BENCH_ONNX_CACHE=DIR, kept in DIR
    across runs: exporting takes longer than timing, and short runs under real-time priority want no export."""
    import os
    cache = os.environ.get("OPFORGE_BENCH_ONNX_CACHE")
    if cache:
        import onnx
        path = os.path.join(cache, f"{name}_b{batch}_op{opset}")
        if not os.path.exists(path + ".onnx"):
            os.makedirs(cache, exist_ok=True)
            model, x = _export(name, batch, opset)
            onnx.save(model, path + ".tmp.onnx")
            np.save(path + ".npy", x)
            os.replace(path + ".tmp.onnx", path + ".onnx")
        return onnx.load(path + ".onnx"), np.load(path + ".npy")
    return _export(name, batch, opset)


def _export(name, batch, opset):
    torch, torchvision = _import_torchvision()
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.randn(batch, 3, 224, 224)
    buf = io.BytesIO()
    torch.onnx.export(model, (x,), buf, opset_version=opset, input_names=["x"], output_names=["y"], dynamo=False)
    import onnx
    return onnx.load_from_string(buf.getvalue()), x.numpy()


_MEMORY = r"""
import sys
import numpy as np
path, lib, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
x = np.load(path + ".npy")
if lib == "onnxruntime":
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    run = lambda: sess.run(None, {"x": x})
else:
    import opforge as of, opforge.onnx
    imported = opforge.onnx.import_model(path)
    gsess = of.Session(imported.graph)
    run = lambda: gsess.run([imported.outputs["y"]], {imported.inputs["x"]: x})
for _ in range(3):
    run()
# VmHWM, not ru_maxrss: the latter keeps the parent's peak across fork + exec.
print(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")))
"""


def peak_rss_mib(model, x, lib, threads):
    """Peak RSS (MiB) of a fresh process that loads `model` with `lib` and runs it 3 times."""
    import os
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        np.save(path + ".npy", x)
        out = subprocess.run([sys.executable, "-c", _MEMORY, path, lib, str(threads)], capture_output=True,
                             text=True, check=True)
        return int(out.stdout.split()[-1]) / 1024


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.vision_models", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["resnet18", "mobilenet_v3_small", "squeezenet1_0", "efficientnet_b0"])
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--memory", action="store_true", help="also the peak RSS of each, in fresh processes")
    p.add_argument("--cpu", action="store_true",
                   help="time by the process's CPU time, not wall time (a loaded machine; use with one thread: "
                        "OPFORGE_NUM_THREADS=1, whose count onnxruntime follows here)")
    p.add_argument("--profile", action="store_true",
                   help="instead of the table: each model's per-node times beside onnxruntime's, grouped by op "
                        "type and conv layer (bench/vision_profile.py), as markdown")
    args = p.parse_args(argv)
    import onnxruntime as ort
    import opforge as of
    import opforge.onnx
    threads = of.config.num_threads()
    if args.profile:
        from bench import vision_profile
        for name in args.models:
            for batch in args.batches:
                model, x = export(name, batch)
                print(vision_profile.profile(name, batch, model, x, threads, 3 if args.quick else args.repeats),
                      flush=True)
        return 0
    repeats, settle = (1, 0.0) if args.quick else (args.repeats, 0.3)
    print(f"torchvision models, 224x224 float32, {threads} threads, median of {repeats} interleaved repeats"
          + (", process CPU time" if args.cpu else ", wall time"))
    print(f"{'model':<22}{'batch':>6}{'match':>7}{'opforge ms':>12}{'ort ms':>10}{'ort/opforge':>13}"
          + (f"{'opforge MiB':>13}{'ort MiB':>9}{'mem ratio':>11}" if args.memory else ""))
    failed = False
    for name in args.models:
        for batch in args.batches:
            model, x = export(name, batch)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
            imported = opforge.onnx.import_model(model)
            gsess = of.Session(imported.graph)
            ns = dict(sess=sess, feeds={"x": x}, gsess=gsess, gy=[imported.outputs["y"]],
                      gfeeds={imported.inputs["x"]: x})
            stmts = {"opforge": "gsess.run(gy, gfeeds)", "onnxruntime": "sess.run(None, feeds)"}
            want, got = eval(stmts["onnxruntime"], ns)[0], np.asarray(eval(stmts["opforge"], ns)[0])
            match = bool(np.allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max())))
            failed |= not match
            med = {lib: timing.summarize(s)["median_s"] for lib, s in
                   timing.interleaved(stmts, ns, repeats, 0.05, settle_s=settle,
                                      timer=time.process_time if args.cpu else time.perf_counter).items()}
            mem = ""
            if args.memory:
                mo, mr = (peak_rss_mib(model, x, lib, threads) for lib in ("opforge", "onnxruntime"))
                mem = f"{mo:>13.0f}{mr:>9.0f}{mo / mr:>10.2f}x"
            print(f"{name:<22}{batch:>6}{'yes' if match else 'NO':>7}{med['opforge'] * 1e3:>12.1f}"
                  f"{med['onnxruntime'] * 1e3:>10.1f}{med['onnxruntime'] / med['opforge']:>12.2f}x" + mem, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
