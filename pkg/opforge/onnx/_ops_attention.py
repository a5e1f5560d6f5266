"""ONNX Attention (opsets 23-25) on the fused ScaledDotProductAttention op.

Mapped: 4-D or 3-D (q_num_heads / kv_num_heads) inputs, grouped key/value
heads, bool or float masks (a mask shorter than the keys is padded with
-inf, as ONNX says), past_key/past_value (concatenated; present_key and
present_value are the results), is_causal, scale. Anything else (softcap,
sliding windows, nonpad_kv_seqlen, the qk_matmul_output) is refused by the
check, and the importer then expands the operator's ONNX function body
instead (_functions.py), so such nodes still run, unfused.
"""

import numpy as np

from opforge import ops as P
from opforge.onnx._node import FLOAT, INT, converter, dtype_of, shape_of


def _check(n):
    if n.attr("softcap", 0.0) != 0.0:
        raise n.fail("softcap is not fused")
    if n.attr("left_window_size", -1) != -1 or n.attr("right_window_size", -1) != -1:
        raise n.fail("sliding windows are not fused")
    if n.has(6):
        raise n.fail("nonpad_kv_seqlen is not fused")
    if len(n.node.output) > 3 and n.node.output[3]:
        raise n.fail("qk_matmul_output is not fused")
    if n.has(4) != n.has(5):
        raise n.fail("past_key and past_value come together")


setattr(_check, "expand_when_refused", True)  # _functions.py expands the body instead of failing


def _heads(n, x, attr):
    shape = shape_of(x)
    if len(shape) == 4:
        return x
    h = n.attr(attr)
    if len(shape) != 3 or not h or shape[2] % h:
        raise n.fail(f"a 3-D input needs attribute {attr!r} dividing its last dim, got shape {list(shape)}")
    b, s, hidden = shape
    return P.transpose(P.reshape(x, shape=[b, s, h, hidden // h]), perm=[0, 2, 1, 3])


@converter("Attention", (23, 24, 25), {
    "is_causal": INT, "kv_num_heads": INT, "q_num_heads": INT, "qk_matmul_output_mode": INT, "scale": FLOAT,
    "softcap": FLOAT, "softmax_precision": INT, "left_window_size": INT, "right_window_size": INT}, check=_check)
def _attention(n):
    _check(n)
    q_in = n.input(0)
    q = _heads(n, q_in, "q_num_heads")
    k = _heads(n, n.input(1), "kv_num_heads")
    v = _heads(n, n.input(2), "kv_num_heads")
    past = n.has(4)
    if past:
        k = P.concat([n.input(4), k], axis=2)
        v = P.concat([n.input(5), v], axis=2)
    dt = dtype_of(q)
    sq, sk = shape_of(q)[2], shape_of(k)[2]
    mask = n.input(3) if n.has(3) else None
    if mask is not None:
        if dtype_of(mask) == np.bool_:
            mask = P.select(mask, np.zeros((), dt), np.array(-np.inf, dt))
        short = sk - shape_of(mask)[-1]
        if short > 0:  # padded with -inf up to the keys' length
            pad = np.full(tuple(shape_of(mask)[:-1]) + (short,), -np.inf, dt)
            mask = P.concat([mask, pad], axis=-1)
    causal = bool(n.attr("is_causal", 0))
    if causal and not past and sq != sk:
        # Without a cache ONNX aligns the causal mask at the top left (key j <= query i).
        tri = np.where(np.tril(np.ones((sq, sk), bool)), 0.0, -np.inf).astype(dt)
        mask = tri if mask is None else P.add(mask, tri)
        causal = False
    if mask is None:
        mask = np.zeros((1,), dt)
    scale = n.attr("scale")
    y = P.scaled_dot_product_attention(q, k, v, mask, causal=causal, scale=float(scale) if scale else 0.0)
    if len(shape_of(q_in)) == 3:
        b, h, s, d = shape_of(y)
        y = P.reshape(P.transpose(y, perm=[0, 2, 1, 3]), shape=[b, s, h * d])
    return y, k, v
