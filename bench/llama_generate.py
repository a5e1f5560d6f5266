"""Tokens per second of greedy generation with a key/value cache: examples/llama on opforge
beside transformers' LlamaForCausalLM in PyTorch eager, same tiny random checkpoint, batch 1.

    python -m bench.llama_generate [--new 128] [--repeats 5] [--hidden 64 --layers 2]

Runs interleaved in one process at the same thread count (torch.set_num_threads to
opforge's intra-op threads), checks both produce the same ids, and prints the
medians and the ratio (opforge / PyTorch; above 1 is faster).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "llama"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args(argv)
    import torch
    import transformers
    import generate as cli
    import model as llama
    import opforge as of

    d = tempfile.mkdtemp(prefix="llama_bench_")
    cli.write_tiny(d, seed=0, hidden_size=args.hidden, num_hidden_layers=args.layers,
                   intermediate_size=args.hidden * 5 // 2)
    threads = of.config.num_threads()
    torch.set_num_threads(threads)
    ours = llama.load(d)
    ref = transformers.LlamaForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()
    prompt = [1, 2, 3, 4, 5, 6, 7, 8]

    def run_ours():
        return llama.generate(ours, prompt, args.new)

    def run_torch():
        with torch.no_grad():
            out = ref.generate(torch.tensor([prompt]), max_new_tokens=args.new, min_new_tokens=args.new,
                               do_sample=False, use_cache=True)
        return out[0, len(prompt):].tolist()

    same = run_ours() == run_torch()
    times = {"opforge": [], "pytorch": []}
    for _ in range(args.repeats):
        for name, fn in (("opforge", run_ours), ("pytorch", run_torch)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    tps = {k: args.new / statistics.median(v) for k, v in times.items()}
    print(f"tiny Llama (hidden {args.hidden}, {args.layers} layers), batch 1, {args.new} new tokens, "
          f"{threads} threads; same ids: {same}")
    print(f"  opforge  {tps['opforge']:8.1f} tokens/s")
    print(f"  pytorch  {tps['pytorch']:8.1f} tokens/s (transformers {transformers.__version__}, eager)")
    print(f"  ratio    {tps['opforge'] / tps['pytorch']:.2f}x")


if __name__ == "__main__":
    main()
