"""The depthwise convolutions of efficientnet_b0 and mobilenet_v3_small, one layer at a time: each as a one-node
ONNX model (Conv with bias, group = channels, then the model's activation) run by opforge (Session.run of the
imported graph) and onnxruntime in one process, interleaved, one thread, thread CPU time.

    OPFORGE_NUM_THREADS=1 python -m bench.depthwise_layers [--batches 1 8] [--repeats 5]

Prints per layer the median µs of each, onnxruntime's over opforge's (above 1: opforge is faster), and
opforge's FMA rate; then the totals per model and batch. A one-node model makes onnxruntime convert to and
from its blocked layout around the node where it would in the model only at the model's edges, so its
per-layer times here are an upper bound of its in-model times (compare the totals with its per-node profile,
`--profile`). Needs onnx and onnxruntime.
"""
import argparse
import sys
import time

import numpy as np

from bench import timing

# (model, channels, size, kernel, stride, activation): the models' depthwise layers at 224x224 input.
LAYERS = [("efficientnet_b0", c, s, k, st, "silu") for c, s, k, st in [
    (32, 112, 3, 1), (96, 112, 3, 2), (144, 56, 3, 1), (144, 56, 5, 2), (240, 28, 5, 1), (240, 28, 3, 2),
    (480, 14, 3, 1), (480, 14, 3, 1), (480, 14, 5, 1), (672, 14, 5, 1), (672, 14, 5, 1), (672, 14, 5, 2),
    (1152, 7, 5, 1), (1152, 7, 5, 1), (1152, 7, 5, 1), (1152, 7, 3, 1)]] + [
    ("mobilenet_v3_small", c, s, k, st, a) for c, s, k, st, a in [
        (16, 112, 3, 2, "relu"), (72, 56, 3, 2, "relu"), (88, 28, 3, 1, "relu"), (96, 28, 5, 2, "hardswish"),
        (240, 14, 5, 1, "hardswish"), (240, 14, 5, 1, "hardswish"), (120, 14, 5, 1, "hardswish"),
        (144, 14, 5, 1, "hardswish"), (288, 14, 5, 2, "hardswish"), (576, 7, 5, 1, "hardswish"),
        (576, 7, 5, 1, "hardswish")]]


def layer_model(batch, c, size, k, stride, act):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((c, 1, k, k)) / k).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=c, kernel_shape=[k, k], strides=[stride] * 2,
                              pads=[k // 2] * 4)]
    if act == "silu":
        nodes += [helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
    elif act == "relu":
        nodes += [helper.make_node("Relu", ["c"], ["y"])]
    else:
        nodes += [helper.make_node("HardSwish", ["c"], ["y"])]
    g = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, size, size])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    x = rng.standard_normal((batch, c, size, size)).astype(np.float32)
    return m, x


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.depthwise_layers", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--models", nargs="+", default=["efficientnet_b0", "mobilenet_v3_small"])
    args = p.parse_args(argv)
    import onnxruntime as ort
    import opforge as of
    import opforge.onnx
    print(f"depthwise layers, {of.config.num_threads()} opforge thread(s), 1 onnxruntime thread, "
          f"median of {args.repeats} interleaved repeats, thread CPU time")
    print(f"{'model':<20}{'b':>3}{'c':>6}{'hw':>5}{'k':>3}{'s':>3} {'act':<10}{'opforge us':>11}{'ort us':>9}"
          f"{'ratio':>8}{'GFMA/s':>8}")
    totals, failed = {}, False
    for batch in args.batches:
        for name, c, size, k, stride, act in LAYERS:
            if name not in args.models:
                continue
            model, x = layer_model(batch, c, size, k, stride, act)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
            imported = opforge.onnx.import_model(model)
            gsess = of.Session(imported.graph)
            ns = dict(sess=sess, feeds={"x": x}, gsess=gsess, gy=[imported.outputs["y"]],
                      gfeeds={imported.inputs["x"]: x})
            stmts = {"opforge": "gsess.run(gy, gfeeds)", "onnxruntime": "sess.run(None, feeds)"}
            want, got = eval(stmts["onnxruntime"], ns)[0], np.asarray(eval(stmts["opforge"], ns)[0])
            if not np.allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max())):
                print(f"MISMATCH {name} {c} {size} {k} {stride}: {np.abs(got - want).max()}")
                failed = True
            med = {lib: timing.summarize(s)["median_s"] for lib, s in
                   timing.interleaved(stmts, ns, args.repeats, 0.02, timer=time.thread_time).items()}
            o = (size + stride - 1) // stride
            gfma = batch * c * o * o * k * k / med["opforge"] / 1e9
            t = totals.setdefault((name, batch), [0.0, 0.0])
            t[0] += med["opforge"]
            t[1] += med["onnxruntime"]
            print(f"{name:<20}{batch:>3}{c:>6}{size:>5}{k:>3}{stride:>3} {act:<10}{med['opforge'] * 1e6:>11.1f}"
                  f"{med['onnxruntime'] * 1e6:>9.1f}{med['onnxruntime'] / med['opforge']:>7.2f}x{gfma:>8.1f}",
                  flush=True)
    for (name, batch), (mo, mr) in totals.items():
        print(f"total {name} b{batch}: opforge {mo * 1e3:.3f} ms, onnxruntime {mr * 1e3:.3f} ms, {mr / mo:.2f}x")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
