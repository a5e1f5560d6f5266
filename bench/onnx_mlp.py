"""ONNX MLP (batch 64, 784-512-512-10: Gemm+Relu, Gemm+Relu, Gemm, Softmax) run by
opforge.onnx and by onnxruntime's InferenceSession in one process, interleaved.

    python -m bench.onnx_mlp [--repeats N] [--threads N]

Prints the median time per batch of each, numpy's (the same math written out)
for scale, and onnxruntime's time over opforge's Session.run of the imported
graph (above 1: opforge is faster), and over opforge's eager run.
Needs the `onnx` extra (onnx, onnxruntime).
"""
import argparse
import sys

import numpy as np

from bench import timing


def build_model(rng, sizes=(784, 512, 512, 10), batch=64):
    from onnx import TensorProto, helper, numpy_helper
    nodes, inits, x, weights = [], [], "x", []
    for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
        b = (0.1 * rng.standard_normal(n)).astype(np.float32)
        weights.append((w, b))
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"h{i}"], transB=1))
        x = f"h{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"]))
            x = f"r{i}"
    nodes.append(helper.make_node("Softmax", [x], ["y"], axis=-1))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, sizes[0]])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, sizes[-1]])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 17)]), weights


def numpy_mlp(x, weights):
    for i, (w, b) in enumerate(weights):
        x = x @ w.T + b
        if i < len(weights) - 1:
            x = np.maximum(x, 0)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.onnx_mlp", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=11)
    p.add_argument("--quick", action="store_true", help="one repeat, no settle pauses: proves the harness works")
    p.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (0: its default)")
    args = p.parse_args(argv)
    import onnxruntime as ort
    import opforge.onnx
    rng = np.random.default_rng(0)
    model, weights = build_model(rng)
    x = rng.standard_normal((64, 784)).astype(np.float32)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    import opforge as of
    prog = opforge.onnx.load(model)
    imported = opforge.onnx.import_model(model)
    gsess = of.Session(imported.graph)
    ns = {"sess": sess, "prog": prog, "x": x, "feeds": {"x": x}, "np": np, "numpy_mlp": numpy_mlp,
          "weights": weights, "gsess": gsess, "gy": [imported.outputs["y"]], "gfeeds": {imported.inputs["x"]: x}}
    # opforge: Session.run of the imported graph (issue 10's comparison);
    # opforge_eager: the same converters called eagerly (opforge.onnx.run).
    stmts = {"numpy": "numpy_mlp(x, weights)", "onnxruntime": "sess.run(None, feeds)",
             "opforge": "gsess.run(gy, gfeeds)", "opforge_eager": "prog.run(feeds)"}
    ref = numpy_mlp(x, weights)
    for lib in ("onnxruntime", "opforge", "opforge_eager"):
        got = eval(stmts[lib], ns)[0]
        if not np.allclose(got, ref, rtol=1e-4, atol=1e-6):
            print(f"bench.onnx_mlp: {lib} differs from numpy", file=sys.stderr)
            return 1
    repeats, settle = (1, 0.0) if args.quick else (args.repeats, 0.3)
    samples = timing.interleaved(stmts, ns, repeats, 0.02, settle_s=settle)
    med = {lib: timing.summarize(s)["median_s"] for lib, s in samples.items()}
    print("ONNX MLP, batch 64, 784-512-512-10 float32, median of", repeats, "interleaved repeats")
    print(f"{'library':<14}{'ms/batch':>10}")
    for lib, t in med.items():
        print(f"{lib:<14}{t * 1e3:>10.3f}")
    print(f"onnxruntime / opforge: {med['onnxruntime'] / med['opforge']:.2f}x (Session.run)  "
          f"(onnxruntime / opforge eager: {med['onnxruntime'] / med['opforge_eager']:.2f}x)  "
          f"(numpy / opforge: {med['numpy'] / med['opforge']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
