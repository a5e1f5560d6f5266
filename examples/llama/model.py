"""A Llama-architecture decoder built from opforge layers, with a key/value cache.

Embedding -> N x [RMSNorm -> attention (rotary embeddings, grouped key/value
heads, the fused ScaledDotProductAttention op) -> residual -> RMSNorm ->
SwiGLU MLP -> residual] -> RMSNorm -> lm_head. Weights load from a
safetensors file with Hugging Face's tensor names, layer by layer as the
model's config.json says, so a checkpoint of LlamaForCausalLM loads as is.
"""

import json
import os

import numpy as np

import opforge as of
from opforge import ops as P
from opforge.nn import functional as F


class Config:
    """The fields of a Hugging Face LlamaConfig this model reads."""

    def __init__(self, vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
                 num_key_value_heads=None, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                 head_dim=None, **_):
        self.vocab_size, self.hidden_size, self.intermediate_size = vocab_size, hidden_size, intermediate_size
        self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
        self.num_key_value_heads = num_key_value_heads or num_attention_heads
        self.rms_norm_eps, self.rope_theta = float(rms_norm_eps), float(rope_theta)
        self.tie_word_embeddings = bool(tie_word_embeddings)
        self.head_dim = head_dim or hidden_size // num_attention_heads

    @classmethod
    def from_file(cls, path):
        with open(path) as f:
            return cls(**json.load(f))


class Rotary:
    """cos/sin tables (Hugging Face's layout: the half-dims repeated) grown on demand."""

    def __init__(self, head_dim, theta):
        self.inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
        self.cos = self.sin = np.zeros((0, head_dim), np.float32)

    def tables(self, start, length):
        if start + length > len(self.cos):
            pos = np.arange(max(2 * len(self.cos), start + length), dtype=np.float64)
            ang = np.concatenate([np.outer(pos, self.inv_freq)] * 2, axis=1)
            self.cos, self.sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
        return self.cos[start:start + length], self.sin[start:start + length]


def rotate(x, cos, sin):
    """x * cos + rotate_half(x) * sin, x [B, H, S, D]; rotate_half(x) = [-x2, x1]."""
    b, h, s, d = (int(v) for v in x.shape)
    x1 = P.slice(x, begin=[0, 0, 0, 0], size=[b, h, s, d // 2])
    x2 = P.slice(x, begin=[0, 0, 0, d // 2], size=[b, h, s, d - d // 2])
    return P.add(P.mul(x, cos), P.mul(P.concat([P.neg(x2), x1], axis=3), sin))


class DecoderLayer(of.nn.Layer):
    def __init__(self, cfg):
        super().__init__("layer")
        e, d = cfg.hidden_size, cfg.head_dim
        self.cfg = cfg
        self.input_layernorm = of.nn.RMSNorm(e, eps=cfg.rms_norm_eps)
        self.post_attention_layernorm = of.nn.RMSNorm(e, eps=cfg.rms_norm_eps)
        self.q_proj = of.nn.Linear(e, cfg.num_attention_heads * d, bias=False)
        self.k_proj = of.nn.Linear(e, cfg.num_key_value_heads * d, bias=False)
        self.v_proj = of.nn.Linear(e, cfg.num_key_value_heads * d, bias=False)
        self.o_proj = of.nn.Linear(cfg.num_attention_heads * d, e, bias=False)
        self.gate_proj = of.nn.Linear(e, cfg.intermediate_size, bias=False)
        self.up_proj = of.nn.Linear(e, cfg.intermediate_size, bias=False)
        self.down_proj = of.nn.Linear(cfg.intermediate_size, e, bias=False)

    def attention(self, x, cos, sin, cache):
        b, s = int(x.shape[0]), int(x.shape[1])
        cfg, d = self.cfg, self.cfg.head_dim

        def heads(t, n):
            return P.transpose(P.reshape(t, shape=[b, s, n, d]), perm=[0, 2, 1, 3])
        q = rotate(heads(self.q_proj(x), cfg.num_attention_heads), cos, sin)
        k = rotate(heads(self.k_proj(x), cfg.num_key_value_heads), cos, sin)
        v = heads(self.v_proj(x), cfg.num_key_value_heads)
        if cache is not None:
            if cache[0] is not None:  # the new positions go after the cached ones
                k, v = P.concat([cache[0], k], axis=2), P.concat([cache[1], v], axis=2)
            cache[0], cache[1] = k, v
        # Causal, aligned at the end: each new query sees every cached key and itself.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(P.reshape(P.transpose(y, perm=[0, 2, 1, 3]), shape=[b, s, cfg.num_attention_heads * d]))

    def forward(self, x, cos, sin, cache=None):
        x = P.add(x, self.attention(self.input_layernorm(x), cos, sin, cache))
        h = self.post_attention_layernorm(x)
        gate = self.gate_proj(h)
        swiglu = P.mul(P.mul(gate, P.sigmoid(gate)), self.up_proj(h))  # silu(gate) * up
        return P.add(x, self.down_proj(swiglu))


class Llama(of.nn.Layer):
    def __init__(self, cfg):
        super().__init__("llama")
        self.cfg = cfg
        self.embed_tokens = of.nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.blocks = [DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers)]
        for i, blk in enumerate(self.blocks):
            self.add_layer(f"layer{i}", blk)
        self.norm = of.nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.lm_head = None if cfg.tie_word_embeddings else of.nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.rotary = Rotary(cfg.head_dim, cfg.rope_theta)

    def forward(self, ids, cache=None, start=0):
        """Logits [B, S, vocab] for token ids [B, S] at positions start.. (cache: one [k, v] per layer)."""
        cos, sin = self.rotary.tables(start, int(np.shape(ids)[1]))
        x = self.embed_tokens(np.asarray(ids, dtype=np.int64))
        for i, blk in enumerate(self.blocks):
            x = blk(x, cos, sin, None if cache is None else cache[i])
        x = self.norm(x)
        if self.lm_head is None:
            return P.mat_mul(x, self.embed_tokens.weight, transpose_b=True)
        return self.lm_head(x)

    # -- weights ------------------------------------------------------------
    def targets(self):
        """Hugging Face tensor name -> (layer, weight name), layer by layer as the config says."""
        t = {"model.embed_tokens.weight": (self.embed_tokens, "weight"), "model.norm.weight": (self.norm, "weight")}
        if self.lm_head is not None:
            t["lm_head.weight"] = (self.lm_head, "weight")
        for i, blk in enumerate(self.blocks):
            pre = f"model.layers.{i}."
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                t[pre + f"self_attn.{name}.weight"] = (getattr(blk, name), "weight")
            for name in ("gate_proj", "up_proj", "down_proj"):
                t[pre + f"mlp.{name}.weight"] = (getattr(blk, name), "weight")
            t[pre + "input_layernorm.weight"] = (blk.input_layernorm, "weight")
            t[pre + "post_attention_layernorm.weight"] = (blk.post_attention_layernorm, "weight")
        return t

    def load_safetensors(self, path):
        from safetensors.numpy import load_file
        tensors = load_file(path)
        targets = self.targets()
        missing = sorted(set(targets) - set(tensors))
        if missing:
            raise KeyError(f"{path}: missing tensors {missing[:5]}{' ...' if len(missing) > 5 else ''}")
        for name, (layer, attr) in targets.items():
            want = tuple(int(v) for v in getattr(layer, attr).shape)
            if tensors[name].shape != want:
                raise ValueError(f"{path}: {name} has shape {tensors[name].shape}, the config says {want}")
            layer.add_weight(attr, tensors[name].astype(np.float32))
        return self


def load(directory):
    """A Llama from a directory holding config.json and model.safetensors."""
    cfg = Config.from_file(os.path.join(directory, "config.json"))
    return Llama(cfg).load_safetensors(os.path.join(directory, "model.safetensors"))


def generate(model, prompt, max_new_tokens, temperature=0.0, top_k=0, seed=0):
    """Token ids after prompt (a list of ints), greedy at temperature 0, else sampled (top_k: 0 = all)."""
    rng = np.random.default_rng(seed)
    cache = [[None, None] for _ in model.blocks]
    ids, out, start = [list(prompt)], [], 0
    with of.no_grad():
        for _ in range(max_new_tokens):
            logits = model(np.array(ids, dtype=np.int64), cache, start)
            start += len(ids[0])
            last = logits.numpy()[0, -1].astype(np.float64)
            if temperature <= 0:
                tok = int(np.argmax(last))
            else:
                z = last / temperature
                if top_k:
                    z[z < np.sort(z)[-top_k]] = -np.inf
                p = np.exp(z - z.max())
                tok = int(rng.choice(len(p), p=p / p.sum()))
            out.append(tok)
            ids = [[tok]]
    return out
