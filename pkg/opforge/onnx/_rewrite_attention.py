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
hides no row whole, or when it is the causal mask exporters build from the
run-time shapes (Where(Equal(Trilu(Expand(1, shape)), 0), -inf, 0): key 0 is
visible to every row). Every intermediate must be read by the pattern alone.
At run time the fused converter refuses (and the original nodes run) inputs
that are not 4-D float32/float64 or a mask that does not broadcast.
"""

import numpy as np
from onnx import helper

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx._node import dtype_of, shape_of
from opforge.onnx._shape_values import reshape_spec


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
    q, scale, q_reader = _scaled(g, mm.input[0], mm, scale, removed)
    kt, scale, kt_reader = _scaled(g, mm.input[1], mm, scale, removed)
    tr = g.op(kt, "Transpose")
    perm = _perm(tr) if tr is not None else None
    if perm is None or len(perm) != 4 or not g.private(kt, kt_reader) or scale == 0:
        return None
    removed.append(tr)
    k_perm = perm[:2] + [perm[3], perm[2]]  # [B, H, Sk, D] of the transpose's input
    k, last, bshd, target = tr.input[0], out, 0, []
    heads_last = _heads_last(g, [(q, q_reader), (k, tr, k_perm), (v, out)], out)
    if heads_last is not None:
        (q, k, v), last, target, extra = heads_last
        removed += extra + [out]
        k_perm, bshd = [0, 1, 2, 3], 1
    inputs = [q, k, v] + ([mask] if mask is not None else [])
    extra_attrs = {"reshape": target} if target else {}
    # A causal mask built from the run-time shapes (Llama exported with dynamic
    # axes) is unknown at import, but it always shows a row its first key.
    if not clean and mask is not None and _causal_keeps_key_zero(g, mask):
        clean = 2
    node = helper.make_node("ScaledDotProductAttention", inputs, [last.output[0]], name=out.name or sm.name,
                            domain="opforge.rewrite", k_perm=k_perm, clean=int(clean), bshd=bshd, **extra_attrs)
    # The scale stays a Python float (an ONNX float attribute would round it to float32).
    return node, last, removed, lambda n: fused_attention(n, scale)


_HEADS_FIRST = [0, 2, 1, 3]  # [B, S, H, D] <-> [B, H, S, D]


def _heads_last(g, operands, out):
    """The attention's operands and output in [B, S, H, D] (the op's bshd layout),
    when each operand is a private Transpose(perm [0, 2, 1, 3]) of one (through a
    one-input Concat: an exported key/value cache with no past) and the output's
    only reader is that transpose back (through a constant Reshape to its own
    shape): the four transposes of exported layers go. Returns ((q, k, v), the
    node whose output the fused op takes, the Reshape's target, removed nodes)
    or None; all or nothing."""
    bases, removed = [], []
    for name, reader, *perm in operands:
        if perm and perm[0] == _HEADS_FIRST:  # the key transposed straight from [B, S, H, D]
            bases.append(name)
            continue
        if perm and perm[0] != [0, 1, 2, 3]:
            return None
        # A node whose output a Shape also reads (GPT-2 sizes its causal mask so)
        # stays for it, and so does what it reads: with static dims the Shape
        # folds at import and nothing runs them.
        keep = False
        cat = g.op(name, "Concat")
        if cat is not None and len(cat.input) == 1 and _read_by(g, name, reader) is not None:
            keep = _read_by(g, name, reader)
            if not keep:
                removed.append(cat)
            name, reader = cat.input[0], cat
        tr = g.op(name, "Transpose")
        shapes = _read_by(g, name, reader) if tr is not None and _perm(tr) == _HEADS_FIRST else None
        if shapes is None:
            return None
        keep = keep or shapes
        if not keep:
            removed.append(tr)
        bases.append(tr.input[0])
    y, target = out, []
    rs = g.readers.get(y.output[0], [])
    if len(rs) == 1 and rs[0].op_type == "Reshape" and g.private(y.output[0], rs[0]):
        target = g.ints(rs[0].input[1]) if len(rs[0].input) > 1 else None
        if target is None or len(target) != 4 or any(a.name == "allowzero" and a.i for a in rs[0].attribute):
            return None
        removed.append(rs[0])
        y = rs[0]
    back = g.readers.get(y.output[0], [])
    if len(back) != 1 or back[0].op_type != "Transpose" or _perm(back[0]) != _HEADS_FIRST or \
            not g.private(y.output[0], back[0]):
        return None
    return bases, back[0], target, removed


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
    bshd = bool(n.attr("bshd", 0))
    heads_first = (lambda s: [s[0], s[2], s[1], s[3]]) if bshd else list  # noqa: E731
    (b, h, sq, d), (_, hk, sk, dk), (_, hv, sv, dv) = (heads_first(shape_of(t)) for t in (q, k, v))
    if dk != d or sv != sk or h % hk or hv != hk:
        raise n.fail("shapes are not attention's", UnimplementedError)
    target = n.attr("reshape", [])
    if target and not _reshapes_to_itself(target, [b, h, sq, dv]):
        raise n.fail(f"the Reshape to {target} changes the attention's output {[b, h, sq, dv]}", UnimplementedError)
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
        if len(ms) < 4:  # (dims known only at run time: gathered from Shape(mask))
            mask = reshape_spec(mask, [1] * (4 - len(ms)) + [("d", i) for i in range(len(ms))])
    else:
        mask = np.zeros((1,), dt)
    return P.scaled_dot_product_attention(q, k, v, mask, causal=False, scale=scale, bshd=bshd)


def _causal_keeps_key_zero(g, mask):
    """Whether mask = Where(Equal(Trilu(Expand(c, shape), upper=0[, k >= 0]), 0), hidden, v)
    with c != 0 and v finite: entry (i, 0) is always c, so key 0 stays visible to every row."""
    w = g.op(mask, "Where")
    eq = w is not None and g.op(w.input[0], "Equal")
    if not eq:
        return False
    visible = g.scalar(w.input[2])
    sides = [(eq.input[0], eq.input[1]), (eq.input[1], eq.input[0])]
    tri = next((g.op(t, "Trilu") for t, z in sides if g.scalar(z) == 0.0 and g.op(t, "Trilu")), None)
    if visible is None or not np.isfinite(visible) or tri is None:
        return False
    upper = next((a.i for a in tri.attribute if a.name == "upper"), 1)
    k = g.ints(tri.input[1]) if len(tri.input) > 1 and tri.input[1] else [0]
    ex = g.op(tri.input[0], "Expand")
    c = ex is not None and g.consts.get(ex.input[0])
    return upper == 0 and k is not None and len(k) == 1 and k[0] >= 0 and c is not None and c is not False \
        and c.size >= 1 and bool(np.all(c != 0)) and bool(np.all(np.isfinite(c)))


def _read_by(g, name, reader):
    """None unless `reader` and Shape nodes alone read `name` (no graph output);
    else whether a Shape does."""
    rs = g.readers.get(name, [])
    if name in g.outputs or sum(r is reader for r in rs) != 1:
        return None
    others = [r for r in rs if r is not reader]
    return None if any(r.op_type != "Shape" for r in others) else bool(others)


def _reshapes_to_itself(target, shape):
    """Whether ONNX Reshape(x of `shape`, target) (0 copies a dim, one -1 infers) is the identity."""
    if any(isinstance(s, type(None)) for s in shape) or target.count(-1) > 1:
        return False
    dims = [shape[i] if t == 0 else t for i, t in enumerate(target)]
    if -1 in dims:
        rest = int(np.prod([x for x in dims if x != -1]))
        dims[dims.index(-1)] = int(np.prod(shape)) // rest if rest else -1
    return dims == list(shape)
