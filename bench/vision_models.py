"""torchvision CNNs (random init, eval) exported to ONNX, run by opforge (Session.run of the imported graph)
and onnxruntime in one process, interleaved, the same thread count.

    python -m bench.vision_models [--models resnet18 mobilenet_v3_small squeezenet1_0] [--batches 1 8]

Prints whether the outputs match (relative 1e-3 of the largest logit), the
median ms per batch of each and onnxruntime's time over opforge's (above 1:
opforge is faster). Needs torch, torchvision, onnx and onnxruntime.
"""
import argparse
import io
import sys

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
    torch, torchvision = _import_torchvision()
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.randn(batch, 3, 224, 224)
    buf = io.BytesIO()
    torch.onnx.export(model, (x,), buf, opset_version=opset, input_names=["x"], output_names=["y"], dynamo=False)
    import onnx
    return onnx.load_from_string(buf.getvalue()), x.numpy()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.vision_models", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["resnet18", "mobilenet_v3_small", "squeezenet1_0"])
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    import onnxruntime as ort
    import opforge as of
    import opforge.onnx
    threads = of.config.num_threads()
    repeats, settle = (1, 0.0) if args.quick else (args.repeats, 0.3)
    print(f"torchvision models, 224x224 float32, {threads} threads, median of {repeats} interleaved repeats")
    print(f"{'model':<22}{'batch':>6}{'match':>7}{'opforge ms':>12}{'ort ms':>10}{'ort/opforge':>13}")
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
                   timing.interleaved(stmts, ns, repeats, 0.05, settle_s=settle).items()}
            print(f"{name:<22}{batch:>6}{'yes' if match else 'NO':>7}{med['opforge'] * 1e3:>12.1f}"
                  f"{med['onnxruntime'] * 1e3:>10.1f}{med['onnxruntime'] / med['opforge']:>12.2f}x", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
