"""The attention pattern of exported models -> one ScaledDotProductAttention.

Matched (anchored at the Softmax over the last axis), as torch.onnx exports
BERT, GPT-2, Llama and ViT attention:

    S = MatMul(Q [* c1], Transpose(K')[* c2]) [/ c | * c] [+ mask]
    P = Softmax(S, axis=-1) [-> Where(IsNaN(P), 0, P)]
    Y = MatMul(P, V)

with Q [B, H, Sq, D], V [B, Hkv, Sk, Dv] and K' any layout the Transpose
makes [B, H, D, Sk] of (the fused op reads K' through the transpose that
gives [B, H, Sk, D], or directly when that is the identity). The scale is
the product of the scalar constants. The IsNaN cleanup is what SDPA does for
a row that sees no key (zeros); without it ONNX gives NaN there, so a
pattern without the cleanup fuses only when the mask is known at import and
hides no row whole. Every intermediate must be read by the pattern alone.
At run time the fused converter refuses (and the original nodes run) inputs
that are not 4-D float32/float64 or a mask that does not broadcast.
"""

import numpy as np
from onnx import helper

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx._node import dtype_of, shape_of


def _perm(node):
    return next((list(a.ints) for a in node.attribute if a.name == "perm"), None)


def _scaled(g, name, reader, scale, removed):
    """Strips `x * c` / `x / c` (c a known scalar) that only `reader` reads;
    returns (x, scale times the factor, who reads x in the pattern)."""
    node = g.op(name, "Mul", "Div")
    if node is None or not g.private(name, reader):
        return name, scale, reader
    a, b = node.input
    cb = g.scalar(b)
    if cb is not None and cb != 0:
        removed.append(node)
        return a, scale * (cb if node.op_type == "Mul" else 1 / cb), node
    ca = g.scalar(a) if node.op_type == "Mul" else None
    if ca is not None:
        removed.append(node)
        return b, scale * ca, node
    return name, scale, reader


def match(g, sm):
    from opforge.onnx._rewrite import _single
    axis = next((a.i for a in sm.attribute if a.name == "axis"), None)
    if not (axis == -1 or axis is None and g.opset >= 13):
        return None
    removed = [sm]
    p = sm.output[0]
    readers = g.readers.get(p, [])
    clean = False
    if len(readers) == 2 and p not in g.outputs:
        isnan = next((r for r in readers if r.op_type == "IsNaN"), None)
        where = next((r for r in readers if r.op_type == "Where"), None)
        if isnan is None or where is None or where.input[0] != isnan.output[0] or \
                where.input[2] != p or g.scalar(where.input[1]) != 0.0 or not g.private(isnan.output[0], where):
            return None
        removed += [isnan, where]
        p, clean = where.output[0], True
    out = _single(g, removed[-1], "MatMul")
    if out is None or out.input[0] != p:
        return None
    v = out.input[1]
    # The scores: peel the additive mask, then the scales, down to Q @ K^T.
    s, reader, mask = sm.input[0], sm, None
    add = g.op(s, "Add")
    if add is not None and g.private(s, sm):
        for side in (0, 1):
            inner = g.op(add.input[side], "MatMul", "Mul", "Div")
            if inner is not None and g.private(add.input[side], add) and add.input[0] != add.input[1]:
                s, mask = add.input[side], add.input[1 - side]
                break
        else:
            return None
        removed.append(add)
        reader = add
    s, scale, reader = _scaled(g, s, reader, 1.0, removed)
    mm = g.op(s, "MatMul")
    if mm is None or not g.private(s, reader):
        return None
    removed.append(mm)
    q, scale, _ = _scaled(g, mm.input[0], mm, scale, removed)
    kt, scale, kt_reader = _scaled(g, mm.input[1], mm, scale, removed)
    tr = g.op(kt, "Transpose")
    perm = _perm(tr) if tr is not None else None
    if perm is None or len(perm) != 4 or not g.private(kt, kt_reader) or scale == 0:
        return None
    removed.append(tr)
    k_perm = perm[:2] + [perm[3], perm[2]]  # [B, H, Sk, D] of the transpose's input
    inputs = [q, tr.input[0], v] + ([mask] if mask is not None else [])
    node = helper.make_node("ScaledDotProductAttention", inputs, [out.output[0]], name=out.name or sm.name,
                            domain="opforge.rewrite", k_perm=k_perm, clean=int(clean))
    # The scale stays a Python float (an ONNX float attribute would round it to float32).
    return node, out, removed, lambda n: fused_attention(n, scale)


def _hides_a_row(mask):
    return mask.size and bool(np.any(np.all(np.isneginf(mask), axis=-1)))


def fused_attention(n, scale):
    q, k, v = n.input(0), n.input(1), n.input(2)
    dt = dtype_of(q)
    if dt not in (np.float32, np.float64) or any(len(shape_of(t)) != 4 for t in (q, k, v)) or \
            any(dtype_of(t) != dt for t in (k, v)):
        raise n.fail("not 4-D float32/float64 attention", UnimplementedError)
    perm = n.attr("k_perm")
    if perm != [0, 1, 2, 3]:
        k = P.transpose(k, perm=perm)
    b, h, sq, d = shape_of(q)
    sk = shape_of(k)[2]
    if shape_of(k)[3] != d or shape_of(v)[2] != sk or h % shape_of(k)[1] or shape_of(v)[1] != shape_of(k)[1]:
        raise n.fail("shapes are not attention's", UnimplementedError)
    if n.has(3):
        mask = n.input(3)
        ms = shape_of(mask)
        if dtype_of(mask) != dt or len(ms) > 4 or any(
                m not in (1, full) for m, full in zip(ms[::-1], (sk, sq, h, b))):
            raise n.fail("the mask does not broadcast to the scores", UnimplementedError)
        if not n.attr("clean"):
            known = mask if isinstance(mask, np.ndarray) else n.known(3)
            if known is None or _hides_a_row(known):
                raise n.fail("a row may see no key (NaN in ONNX, zeros fused)", UnimplementedError)
        if len(ms) < 4:
            mask = P.reshape(mask, shape=[1] * (4 - len(ms)) + list(ms))
    else:
        mask = np.zeros((1,), dt)
    return P.scaled_dot_product_attention(q, k, v, mask, causal=False, scale=scale)
