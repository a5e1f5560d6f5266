"""Tiny transformers models exported to ONNX (torch.onnx.export, opset 18), run by opforge.onnx
beside onnxruntime in one process: does every output match (relative 1e-3), and the speed ratio.

    python -m bench.transformers_onnx [--repeats 20] [--only bert,gpt2,...]

Models (random init from tiny configs, no download): BERT with an attention mask, GPT-2,
Llama with an attention mask and with input_ids only, Llama exported with dynamic batch
and sequence axes and run at two sizes, and a small ViT. Timings are medians of
interleaved runs at the same thread count; ratio = onnxruntime time / opforge time
(above 1: opforge faster). "opforge ms" is Program.run as users call it (the
compiled graph on the C++ engine, from a signature's second run on); "eager ms" the
node-by-node Python loop it replaces (Program.use_graph = False), for the before/after.
--cpu-time times thread CPU time instead of wall time (a loaded machine; set
OPFORGE_NUM_THREADS=1 so both libraries run on the calling thread). Needs torch and
transformers (not in opforge's extras).
"""

import argparse
import os
import statistics
import tempfile
import time

import numpy as np


def _models():
    import torch
    import transformers as tf
    torch.manual_seed(0)
    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    ids = lambda b, s: torch.randint(0, 100, (b, s))  # noqa: E731
    mask = lambda b, s: torch.ones(b, s, dtype=torch.int64)  # noqa: E731

    def wrap(model, names, out="logits"):
        class W(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model.eval()

            def forward(self, *xs):
                r = self.m(**dict(zip(names, xs)))
                return getattr(r, out)
        return W()

    bert = tf.BertModel(tf.BertConfig(vocab_size=100, max_position_embeddings=64, **small))
    gpt2 = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=4, n_positions=64))
    # num_key_value_heads = heads: torch's TorchScript exporter cannot convert SDPA with enable_gqa.
    llama = tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=100, num_key_value_heads=4,
                                               max_position_embeddings=64, **small))
    vit = tf.ViTModel(tf.ViTConfig(image_size=32, patch_size=8, num_channels=3, **small))
    yield "bert (mask)", wrap(bert, ["input_ids", "attention_mask"], "last_hidden_state"), \
        [ids(2, 16), mask(2, 16)], ["input_ids", "attention_mask"], None, None
    yield "gpt2", wrap(gpt2, ["input_ids"]), [ids(2, 16)], ["input_ids"], None, None
    yield "llama (mask)", wrap(llama, ["input_ids", "attention_mask"]), [ids(2, 16), mask(2, 16)], \
        ["input_ids", "attention_mask"], None, None
    yield "llama (ids only)", wrap(llama, ["input_ids"]), [ids(1, 16)], ["input_ids"], None, None
    dyn = {"input_ids": {0: "batch", 1: "seq"}}
    yield "llama (dynamic axes)", wrap(llama, ["input_ids"]), [ids(1, 16)], ["input_ids"], dyn, \
        [[ids(1, 8)], [ids(3, 24)]]
    yield "vit", wrap(vit, ["pixel_values"], "last_hidden_state"), [torch.randn(2, 3, 32, 32)], \
        ["pixel_values"], None, None


def _export(model, args, names, dynamic, path):
    import torch
    kw = dict(input_names=names, output_names=["out"], opset_version=18, dynamic_axes=dynamic)
    try:
        torch.onnx.export(model, tuple(args), path, dynamo=False, **kw)
    except TypeError:  # a torch without the dynamo switch
        torch.onnx.export(model, tuple(args), path, **kw)


_clock = time.perf_counter


def _median_time(fn, repeats):
    ts = []
    for _ in range(repeats):
        t0 = _clock()
        fn()
        ts.append(_clock() - t0)
    return statistics.median(ts)


def _eager(prog, feeds):
    prog.use_graph = False
    try:
        return prog.run(feeds)
    finally:
        prog.use_graph = True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--cpu-time", action="store_true", help="thread CPU time instead of wall time")
    args = ap.parse_args(argv)
    global _clock
    if args.cpu_time:
        _clock = time.thread_time
    import onnxruntime as ort

    import opforge as of
    import opforge.onnx
    threads = of.config.num_threads()
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    tmp = tempfile.mkdtemp(prefix="tf_onnx_")
    print(f"threads {threads}, load average {os.getloadavg()[0]:.1f}, {'cpu' if args.cpu_time else 'wall'} time")
    print(f"{'model':<28} {'match':<7} {'max rel err':>11} {'opforge ms':>10} {'ort ms':>8} {'ratio':>6} "
          f"{'eager ms':>9} {'eager ratio':>11}")
    for name, model, example, names, dynamic, sizes in _models():
        if args.only and not any(o in name for o in args.only.split(",")):
            continue
        path = os.path.join(tmp, name.split()[0] + ".onnx")
        try:
            _export(model, example, names, dynamic, path)
            prog = opforge.onnx.load(path)
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 -- report and go on to the next model
            print(f"{name:<22} FAILED: {type(e).__name__}: {str(e).splitlines()[0][:150]}")
            continue
        for feeds_t in (sizes or [example]):
            feeds = {n: t.numpy() for n, t in zip(names, feeds_t)}
            feeds = {k: v for k, v in feeds.items() if k in {i.name for i in sess.get_inputs()}}
            label = name if not sizes else f"{name} {list(feeds_t[0].shape)}"
            try:
                got = [prog.run(feeds) for _ in range(2)]  # the second run compiles the graph
                got.append(_eager(prog, feeds))
            except Exception as e:  # noqa: BLE001
                print(f"{label:<28} FAILED: {type(e).__name__}: {str(e).splitlines()[0][:150]}")
                continue
            want = sess.run(None, feeds)
            err = max(float(np.max(np.abs(g - w)) / (np.max(np.abs(w)) + 1e-30))
                      for run in got for g, w in zip(run, want))
            ours, theirs, eager = [], [], []
            for _ in range(3):  # interleaved blocks
                ours.append(_median_time(lambda: prog.run(feeds), args.repeats // 3 or 1))
                theirs.append(_median_time(lambda: sess.run(None, feeds), args.repeats // 3 or 1))
                eager.append(_median_time(lambda: _eager(prog, feeds), max(args.repeats // 15, 1)))
            t_of, t_ort, t_eager = statistics.median(ours), statistics.median(theirs), statistics.median(eager)
            graph = all(r is None for r in prog.compiled_reasons().values())
            print(f"{label:<28} {str(err <= 1e-3):<7} {err:11.2e} {t_of * 1e3:10.3f} {t_ort * 1e3:8.3f} "
                  f"{t_ort / t_of:5.2f}x {t_eager * 1e3:9.3f} {t_ort / t_eager:10.2f}x"
                  + ("" if graph else "  (eager fallback)"))

    if not args.only or "generation" in args.only:
        _generation(args, tmp, so)


def _per_shape(prog):
    """prog as before the one graph for every size: a graph per feed-shape signature (LRU)."""
    from opforge.onnx import _compile
    prog._compiled._generic = _compile._Eager("per-shape LRU forced by the bench")
    return prog


def _generation(args, tmp, so, steps=16, prompt=4):
    """Llama exported with dynamic axes, greedy generation without a KV cache:
    a new sequence length every step. The one graph for every size, the
    per-shape LRU (each length is new: every step eager) and onnxruntime, on
    the same loop, interleaved; plus two sizes run repeatedly."""
    import onnxruntime as ort
    import torch

    import opforge.onnx
    name, model, example, names, dynamic, _ = next(m for m in _models() if "dynamic" in m[0])
    path = os.path.join(tmp, "llama_dyn.onnx")
    _export(model, example, names, dynamic, path)
    one, lru = opforge.onnx.load(path), _per_shape(opforge.onnx.load(path))
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    start = torch.randint(0, 100, (1, prompt)).numpy()

    def loop(run):
        ids = start
        for _ in range(steps):
            logits = run({"input_ids": ids})[0]
            ids = np.concatenate([ids, logits[:, -1:].argmax(-1).astype(np.int64)], axis=1)
        return ids

    runs = {"one graph": one.run, "per-shape LRU": lru.run, "onnxruntime": lambda f: sess.run(None, f)}
    outs = {k: loop(r) for k, r in runs.items()}  # warm: the one graph compiles on its second run
    times = {k: [] for k in runs}
    for _ in range(3):
        for k, r in runs.items():
            times[k].append(_median_time(lambda: loop(r), max(args.repeats // 10, 1)))
    t = {k: statistics.median(v) for k, v in times.items()}
    same = all(np.array_equal(outs[k], outs["onnxruntime"]) for k in outs)
    print(f"\ngeneration, llama dynamic axes, {steps} steps from length {prompt} (no KV cache), "
          f"tokens equal to onnxruntime's: {same}; one graph for every size: "
          f"{one._compiled.generic_reason() is None}")
    for k in runs:
        print(f"  {k:<16} {t[k] * 1e3:9.2f} ms   onnxruntime / this {t['onnxruntime'] / t[k]:5.2f}x")
    print("two sizes, each run repeatedly:")
    for b, sq in ((1, 8), (3, 24)):
        feeds = {"input_ids": torch.randint(0, 100, (b, sq)).numpy()}
        for p in (one, lru):
            p.run(feeds), p.run(feeds)
        rows = {"one graph": [], "per-shape LRU": [], "onnxruntime": []}
        for _ in range(3):
            rows["one graph"].append(_median_time(lambda: one.run(feeds), args.repeats // 3 or 1))
            rows["per-shape LRU"].append(_median_time(lambda: lru.run(feeds), args.repeats // 3 or 1))
            rows["onnxruntime"].append(_median_time(lambda: sess.run(None, feeds), args.repeats // 3 or 1))
        med = {k: statistics.median(v) for k, v in rows.items()}
        print(f"  [{b}, {sq}]  " + "  ".join(f"{k} {v * 1e3:.3f} ms ({med['onnxruntime'] / v:.2f}x)"
                                          for k, v in med.items()))


if __name__ == "__main__":
    main()
