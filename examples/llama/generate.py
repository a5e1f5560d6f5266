"""Generate text ids with a Llama-architecture model on opforge, with a key/value cache.

    python examples/llama/generate.py --tiny /tmp/tiny-llama     # write a tiny random model first
    python examples/llama/generate.py /tmp/tiny-llama --prompt 1 2 3 --new 32 [--temperature 0.8 --top-k 20]

The directory holds config.json and model.safetensors with Hugging Face's
tensor names (a LlamaForCausalLM checkpoint's layout). Prints the new ids
and the tokens per second of the generation loop (batch 1).
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as llama  # noqa: E402

TINY = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "max_position_embeddings": 512, "tie_word_embeddings": False, "model_type": "llama",
        "architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "attention_bias": False, "mlp_bias": False}


def write_tiny(directory, seed=0, **overrides):
    """A random Llama checkpoint (config.json + model.safetensors) of TINY's size."""
    from safetensors.numpy import save_file
    cfg_dict = dict(TINY, **overrides)
    cfg = llama.Config(**cfg_dict)
    rng = np.random.default_rng(seed)
    shapes = {}
    e, d, f = cfg.hidden_size, cfg.head_dim, cfg.intermediate_size
    shapes["model.embed_tokens.weight"] = (cfg.vocab_size, e)
    shapes["model.norm.weight"] = (e,)
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, e)
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        shapes[p + "self_attn.q_proj.weight"] = (cfg.num_attention_heads * d, e)
        shapes[p + "self_attn.k_proj.weight"] = (cfg.num_key_value_heads * d, e)
        shapes[p + "self_attn.v_proj.weight"] = (cfg.num_key_value_heads * d, e)
        shapes[p + "self_attn.o_proj.weight"] = (e, cfg.num_attention_heads * d)
        shapes[p + "mlp.gate_proj.weight"] = (f, e)
        shapes[p + "mlp.up_proj.weight"] = (f, e)
        shapes[p + "mlp.down_proj.weight"] = (e, f)
        shapes[p + "input_layernorm.weight"] = (e,)
        shapes[p + "post_attention_layernorm.weight"] = (e,)
    tensors = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):
            tensors[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            tensors[name] = (rng.standard_normal(shape) * 0.02 * (4 if "embed" in name else 1)).astype(np.float32)
    os.makedirs(directory, exist_ok=True)
    save_file(tensors, os.path.join(directory, "model.safetensors"))
    with open(os.path.join(directory, "config.json"), "w") as fh:
        json.dump(cfg_dict, fh, indent=1)
    return directory


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", help="directory with config.json and model.safetensors")
    ap.add_argument("--tiny", metavar="DIR", help="write a tiny random model to DIR and exit")
    ap.add_argument("--prompt", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--new", type=int, default=32, help="tokens to generate")
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.tiny:
        print(write_tiny(args.tiny))
        return
    if not args.model:
        ap.error("give a model directory (or --tiny DIR)")
    m = llama.load(args.model)
    t0 = time.perf_counter()
    ids = llama.generate(m, args.prompt, args.new, args.temperature, args.top_k, args.seed)
    dt = time.perf_counter() - t0
    print(" ".join(map(str, ids)))
    print(f"{len(ids)} tokens in {dt:.3f} s: {len(ids) / dt:.1f} tokens/s")


if __name__ == "__main__":
    main()
