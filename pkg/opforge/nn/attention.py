"""Attention: the functional form over the fused ScaledDotProductAttention op
(cpp/ops/attention_ops.cc) and PyTorch's MultiheadAttention layer
(batch_first, its weight layout, so state dicts carry over)."""

import numpy as np

from opforge import errors as _errors
from opforge import ops as _ops
from opforge.nn.layer import Layer, register_layer


def _dtype_of(x):
    dt = x.dtype
    return np.dtype(dt) if isinstance(dt, np.dtype) or not hasattr(dt, "as_numpy_dtype") else dt.as_numpy_dtype


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    """softmax(query @ key^T * scale + mask) @ value, fused and blockwise (no whole score matrix).

    query [B, Hq, Sq, D]; key [B, Hkv, Sk, D] and value [B, Hkv, Sk, Dv] with Hkv dividing Hq
    (grouped-query attention). attn_mask broadcasts to [B, Hq, Sq, Sk]: a float mask is
    added, a bool mask keeps the True positions (PyTorch's convention). is_causal hides
    the keys after each query (aligned at the end, as with a key/value cache);
    scale defaults to 1/sqrt(D). A query that sees no key gives zeros.
    """
    dt = _dtype_of(query)
    if attn_mask is None:
        mask = np.zeros((1,), dtype=dt)
    elif _dtype_of(attn_mask) == np.bool_:
        mask = _ops.select(attn_mask, np.zeros((), dt), np.array(-np.inf, dt))
    else:
        mask = attn_mask
    if scale is not None and not scale > 0:
        raise _errors.InvalidArgumentError(f"scaled_dot_product_attention: scale must be > 0, got {scale}")
    return _ops.scaled_dot_product_attention(query, key, value, mask, causal=bool(is_causal),
                                             scale=float(scale or 0.0))


def _heads(x, b, s, h, d):
    return _ops.transpose(_ops.reshape(x, shape=[b, s, h, d]), perm=[0, 2, 1, 3])


@register_layer
class MultiheadAttention(Layer):
    """PyTorch's nn.MultiheadAttention with batch_first=True: in_proj_weight [3E, E], out_proj.

    forward(query, key, value, attn_mask=None, is_causal=False) -> (output, None); inputs
    [B, S, E]. Attention weights are never materialized (need_weights is not offered).
    """

    def __init__(self, embed_dim, num_heads, bias=True, name=None, dtype="float32", seed=None):
        super().__init__(name, dtype)
        if embed_dim % num_heads:
            raise _errors.InvalidArgumentError(
                f"MultiheadAttention: embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.config = {"embed_dim": int(embed_dim), "num_heads": int(num_heads), "bias": bool(bias)}
        from opforge.nn.layers import Linear, _rng
        rng = _rng(seed)
        bound = float(np.sqrt(6.0 / (embed_dim + 3 * embed_dim)))  # xavier_uniform_, as PyTorch
        self.add_weight("in_proj_weight", rng.uniform(-bound, bound, (3 * embed_dim, embed_dim)))
        if bias:
            self.add_weight("in_proj_bias", np.zeros(3 * embed_dim))
        self.add_layer("out_proj", Linear(embed_dim, embed_dim, bias=bias, dtype=dtype, seed=seed))

    def forward(self, query, key, value, attn_mask=None, is_causal=False):
        from opforge.nn import functional as F
        e, h = self.config["embed_dim"], self.config["num_heads"]
        w = self._weights["in_proj_weight"]
        bias = self._weights.get("in_proj_bias")
        parts = []
        for i, x in enumerate((query, key, value)):
            wi = _ops.slice(w, begin=[i * e, 0], size=[e, e])
            bi = None if bias is None else _ops.slice(bias, begin=[i * e], size=[e])
            b, s = int(x.shape[0]), int(x.shape[1])
            parts.append(_heads(F.linear(x, wi, bi), b, s, h, e // h))
        y = scaled_dot_product_attention(*parts, attn_mask=attn_mask, is_causal=is_causal)
        b, sq = int(query.shape[0]), int(query.shape[1])
        y = _ops.reshape(_ops.transpose(y, perm=[0, 2, 1, 3]), shape=[b, sq, e])
        return self._layers["out_proj"](y), None
