"""Reduced precision (issue 25), each pair interleaved in one process, medians:

1. int8 matmul 1024^3 (MatMulInteger, u8 x s8 -> s32) against opforge's own
   float32 matmul of the same size (target: >= 2.5x).
2. The ONNX MLP (784-512-512-10, bench.onnx_mlp) stored in float16, and the
   same MLP quantized by onnxruntime.quantization.quantize_dynamic, run by
   opforge.onnx and by onnxruntime (match: float16 relative 1e-2, int8 within
   one quantization step; speed: onnxruntime / opforge >= 1.0).
3. The float16 model file against the float32 one (target: half the bytes).

    python -m bench.precision [--repeats N] [--quick] [--batch B] [--cpu] [--only mlp,resnet,bert]

Prints the load average beside the numbers: on the shared 2-core VM the
ratios are what to read, not the absolute times. --cpu runs both libraries
on one thread and times process CPU time (what a loaded machine does not
distort). Needs the `onnx` extra; the ResNet-18 and BERT rows need torch,
torchvision / transformers (skipped, with a line saying so, without them).
"""
import argparse
import os
import sys
import tempfile

import numpy as np

from bench import timing


def _load():
    try:
        return "load average %.1f %.1f %.1f" % os.getloadavg()
    except OSError:
        return "load average unknown"


def matmul_case(repeats, settle, n=1024):
    import opforge as of
    rng = np.random.default_rng(0)
    a8 = rng.integers(0, 256, (n, n)).astype(np.uint8)
    b8 = rng.integers(-128, 128, (n, n)).astype(np.int8)
    za, zb = np.uint8(128), np.int8(0)
    af, bf = a8.astype(np.float32), b8.astype(np.float32)
    got = of.ops.mat_mul_integer(a8[:64], b8, za, zb).numpy()
    want = ((a8[:64].astype(np.int64) - 128) @ b8.astype(np.int64)).astype(np.int32)
    if not np.array_equal(got, want):
        raise SystemExit("bench.precision: MatMulInteger differs from numpy")
    ns = {"of": of, "a8": a8, "b8": b8, "za": za, "zb": zb, "af": af, "bf": bf}
    stmts = {"int8": "of.ops.mat_mul_integer(a8, b8, za, zb)", "float32": "of.matmul(af, bf)"}
    med = {k: timing.summarize(v)["median_s"] for k, v in
           timing.interleaved(stmts, ns, repeats, 0.05, settle_s=settle).items()}
    gops = {k: 2 * n ** 3 / t / 1e9 for k, t in med.items()}
    print(f"matmul {n}^3 (int8: u8 x s8 -> s32 on {of.quantization.gemm_isa()}; float32: of.matmul), "
          f"median of {repeats}, {_load()}")
    for k in stmts:
        print(f"  {k:<8}{med[k] * 1e3:9.2f} ms  {gops[k]:7.1f} GOP/s")
    ratio = med["float32"] / med["int8"]
    print(f"  int8 / float32 speed: {ratio:.2f}x (target >= 2.5x)")
    return ratio


def half_model(model):
    import onnx
    from onnx import TensorProto, numpy_helper
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for t in m.graph.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for vi in list(m.graph.input) + list(m.graph.output):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    return m


def _timer(cpu):
    import time
    return time.process_time if cpu else time.perf_counter


def mlp_case(repeats, settle, batch, threads, cpu=False):
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    import opforge as of
    import opforge.onnx
    from bench.onnx_mlp import build_model
    rng = np.random.default_rng(0)
    model, _ = build_model(rng, batch=batch)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        f32, q8, f16 = (os.path.join(tmp, n) for n in ("f32.onnx", "int8.onnx", "f16.onnx"))
        onnx.save(model, f32)
        quantize_dynamic(f32, q8, weight_type=QuantType.QInt8)
        onnx.save(half_model(model), f16)
        sizes = {n: os.path.getsize(p) for n, p in (("float32", f32), ("float16", f16), ("int8", q8))}
        models = {"float16": onnx.load(f16), "int8": onnx.load(q8)}
    # Compare logits, not softmax output: one quantization step is visible there.
    for m in models.values():
        m.graph.node.pop()
        m.graph.output[0].name = m.graph.node[-1].output[0]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    rows = []
    for name, m in models.items():
        feed = x.astype(np.float16) if name == "float16" else x
        sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        want = sess.run(None, {"x": feed})[0].astype(np.float32)
        try:
            imported = opforge.onnx.import_model(m)
            gsess = of.Session(imported.graph)
            out = imported.outputs[m.graph.output[0].name]
            got = np.asarray(gsess.run([out], {imported.inputs["x"]: feed})[0]).astype(np.float32)
        except of.errors.OpError as e:
            rows.append((name, None, None, f"opforge fails: {str(e)[:150]}"))
            continue
        err = np.abs(got - want).max()
        if name == "float16":
            tol = 1e-2 * np.abs(want).max()
            match = f"max |diff| {err:.2e} <= 1e-2 * max|y| ({tol:.2e}): {'yes' if err <= tol else 'NO'}"
        else:
            step = np.abs(want).max() / 127
            match = f"max |diff| {err:.2e} <= one step ({step:.2e}): {'yes' if err <= step else 'NO'}"
        ns = {"sess": sess, "feeds": {"x": feed}, "gsess": gsess, "gy": [out], "gfeeds": {imported.inputs["x"]: feed}}
        stmts = {"onnxruntime": "sess.run(None, feeds)", "opforge": "gsess.run(gy, gfeeds)"}
        med = {k: timing.summarize(v)["median_s"] for k, v in
               timing.interleaved(stmts, ns, repeats, 0.02, settle_s=settle, timer=_timer(cpu)).items()}
        rows.append((name, med["onnxruntime"], med["opforge"], match))
    clock = "process CPU time, one thread each" if cpu else "wall time"
    print(f"ONNX MLP 784-512-512-10, batch {batch}, median of {repeats} ({clock}), {_load()}")
    for name, t_ort, t_of, match in rows:
        if t_ort is None:
            print(f"  {name:<8} {match}")
            continue
        print(f"  {name:<8} onnxruntime {t_ort * 1e3:8.3f} ms  opforge {t_of * 1e3:8.3f} ms  "
              f"ort/opforge {t_ort / t_of:5.2f}x (target >= 1.0)  match: {match}")
    print(f"  model files: float32 {sizes['float32']} B, float16 {sizes['float16']} B "
          f"({sizes['float16'] / sizes['float32']:.3f} of float32; target 0.5), int8 {sizes['int8']} B "
          f"({sizes['int8'] / sizes['float32']:.3f})")
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.precision", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (0: its default)")
    p.add_argument("--quick", action="store_true", help="one repeat, small sizes: proves the harness works")
    p.add_argument("--cpu", action="store_true", help="one thread each, process CPU time")
    p.add_argument("--only", default="matmul,mlp,resnet,bert", help="comma-separated cases to run")
    args = p.parse_args(argv)
    if args.cpu:
        os.environ["OPFORGE_NUM_THREADS"] = "1"  # read when opforge's pool starts
        args.threads = 1
    repeats, settle = (1, 0.0) if args.quick else (args.repeats, 0.3)
    only = set(args.only.split(","))
    if "matmul" in only:
        matmul_case(repeats, settle, n=256 if args.quick else 1024)
    if "mlp" in only:
        mlp_case(repeats, settle, args.batch, args.threads, args.cpu)
    from bench import precision_models
    if "resnet" in only:
        precision_models.resnet_case(repeats, settle, args.threads, args.cpu, args.quick)
    if "bert" in only:
        precision_models.bert_case(repeats, settle, args.threads, args.cpu, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
