"""The Llama example (examples/llama/): a tiny random checkpoint in safetensors, its logits against an
independent numpy forward pass (and transformers' LlamaForCausalLM when installed), and the key/value
cache's generation against recomputing the whole sequence each step."""

import os
import sys

import numpy as np
import pytest

pytest.importorskip("safetensors")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "llama"))
import generate as cli  # noqa: E402
import model as llama  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return cli.write_tiny(str(tmp_path_factory.mktemp("tiny_llama")), seed=3)


def numpy_forward(directory, ids):
    from safetensors.numpy import load_file
    t = {k: v.astype(np.float64) for k, v in load_file(os.path.join(directory, "model.safetensors")).items()}
    cfg = llama.Config.from_file(os.path.join(directory, "config.json"))
    h, hk, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    rms = lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + cfg.rms_norm_eps) * w  # noqa: E731
    s = len(ids)
    inv = 1.0 / cfg.rope_theta ** (np.arange(0, d, 2) / d)
    ang = np.concatenate([np.outer(np.arange(s), inv)] * 2, axis=1)

    def rope(x):  # [heads, s, d]
        half = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
        return x * np.cos(ang) + half * np.sin(ang)
    x = t["model.embed_tokens.weight"][ids]
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        a = rms(x, t[p + "input_layernorm.weight"])
        q = rope((a @ t[p + "self_attn.q_proj.weight"].T).reshape(s, h, d).transpose(1, 0, 2))
        k = rope((a @ t[p + "self_attn.k_proj.weight"].T).reshape(s, hk, d).transpose(1, 0, 2))
        v = (a @ t[p + "self_attn.v_proj.weight"].T).reshape(s, hk, d).transpose(1, 0, 2)
        k, v = np.repeat(k, h // hk, 0), np.repeat(v, h // hk, 0)
        sc = q @ k.transpose(0, 2, 1) / np.sqrt(d) + np.triu(np.full((s, s), -np.inf), 1)
        pr = np.exp(sc - sc.max(-1, keepdims=True))
        o = ((pr / pr.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(s, h * d)
        x = x + o @ t[p + "self_attn.o_proj.weight"].T
        m = rms(x, t[p + "post_attention_layernorm.weight"])
        g = m @ t[p + "mlp.gate_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * (m @ t[p + "mlp.up_proj.weight"].T)) @ t[p + "mlp.down_proj.weight"].T
    return rms(x, t["model.norm.weight"]) @ t["lm_head.weight"].T


def test_logits_match_an_independent_numpy_forward(checkpoint):
    ids = [5, 17, 99, 3, 42, 7]
    got = llama.load(checkpoint)(np.array([ids])).numpy()[0]
    np.testing.assert_allclose(got, numpy_forward(checkpoint, ids), rtol=2e-4, atol=2e-5)


def test_cached_generation_equals_recomputing_the_sequence(checkpoint):
    m = llama.load(checkpoint)
    prompt = [1, 2, 3, 4]
    ids = llama.generate(m, prompt, 12)
    seq = list(prompt)
    for _ in range(12):
        seq.append(int(np.argmax(m(np.array([seq])).numpy()[0, -1])))
    assert ids == seq[len(prompt):]


def test_sampling_is_seeded(checkpoint):
    m = llama.load(checkpoint)
    a = llama.generate(m, [1, 2], 10, temperature=0.9, top_k=20, seed=5)
    assert a == llama.generate(m, [1, 2], 10, temperature=0.9, top_k=20, seed=5)
    assert all(0 <= t < 128 for t in a)


def test_logits_match_transformers(checkpoint):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    ref = transformers.LlamaForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.float32).eval()
    ids = [[5, 17, 99, 3, 42, 7, 8, 1]]
    with torch.no_grad():
        want = ref(torch.tensor(ids)).logits.numpy()
    got = llama.load(checkpoint)(np.array(ids)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    out = ref.generate(torch.tensor(ids), max_new_tokens=10, do_sample=False)[0, len(ids[0]):].tolist()
    assert llama.generate(llama.load(checkpoint), ids[0], 10) == out
