"""The rotary embedding of exported Llama-style models -> one ApplyRotaryEmbedding.

Matched (anchored at the Neg), as torch.onnx exports Hugging Face's
apply_rotary_pos_emb:

    x1 = Slice(x, [0], [h], [axis]);  x2 = Slice(x, [h], [>= 2h], [axis])
    y  = Mul(x, cos) + Mul(Concat(Neg(x2), x1, axis), sin)

seven nodes per rotated tensor, in one pass instead. The halves' split h
is read from the Slices; at run time the fused converter checks that the
axis is the last one, that x's last dim is 2h and that cos and sin
broadcast to x with that last dim (the Slices' and the Concat's axes
may be written -1 or rank - 1), and refuses anything else (the original
nodes then run). Every intermediate must be read by the pattern alone.
"""

import numpy as np
from onnx import helper

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx._node import dtype_of, shape_of

def _slice(g, node):
    """(data, start, end, axis) of a one-axis, step-1 Slice with a constant axis, else
    None. start and end are ints when constant, else the names of the run-time
    tensors (a dynamic export computes x.shape[-1] // 2), which the converter
    reads at import."""
    if node is None or node.op_type != "Slice" or len(node.input) < 4:
        return None
    axes = g.ints(node.input[3])
    steps = g.ints(node.input[4]) if len(node.input) > 4 and node.input[4] else [1]
    if axes is None or len(axes) != 1 or steps != [1]:
        return None
    bounds = []
    for i in (1, 2):
        v = g.ints(node.input[i])
        if v is not None and len(v) != 1:
            return None
        bounds.append(node.input[i] if v is None else v[0])
    return node.input[0], bounds[0], bounds[1], axes[0]


def _mul_with(g, name, x, reader):
    """(the other operand) of Mul(x, c) named `name`, read only by `reader`; else None."""
    m = g.op(name, "Mul")
    if m is None or not g.private(name, reader) or x not in m.input:
        return None, None
    from opforge.onnx._rewrite import _other
    return m, _other(m, x)


# Set False to import the pattern unfused (a switch for comparisons).
ENABLED = True


def match(g, neg):
    from opforge.onnx._rewrite import _single
    if not ENABLED:
        return None
    s2 = g.op(neg.input[0], "Slice")
    lo = _slice(g, s2)
    if lo is None or not g.private(neg.input[0], neg):
        return None
    x, h, end2, axis = lo
    cat = _single(g, neg, "Concat")
    if cat is None or len(cat.input) != 2 or cat.input[0] != neg.output[0]:
        return None
    cat_axis = next((a.i for a in cat.attribute if a.name == "axis"), None)
    s1 = g.op(cat.input[1], "Slice")
    hi = _slice(g, s1)
    if hi is None or not g.private(cat.input[1], cat) or hi[0] != x or hi[3] != axis or cat_axis is None:
        return None
    # The bounds x2 = x[h:end2], x1 = x[s1:e1]: run-time ones become extra
    # inputs whose values the converter reads at import, then checks as here.
    bounds, extra = [h, end2, hi[1], hi[2]], []
    for i, b in enumerate(bounds):
        if isinstance(b, str):
            if b not in extra:
                extra.append(b)
            bounds[i] = ("input", 3 + extra.index(b))
    if not extra and not _halves(*bounds):
        return None
    mul_s = _single(g, cat, "Mul")
    if mul_s is None:
        return None
    from opforge.onnx._rewrite import _other
    sin = _other(mul_s, cat.output[0])
    add = _single(g, mul_s, "Add")
    if sin is None or add is None:
        return None
    mul_c, cos = _mul_with(g, _other(add, mul_s.output[0]), x, add)
    if mul_c is None or cos is None:
        return None
    node = helper.make_node("ApplyRotaryEmbedding", [x, cos, sin] + extra, [add.output[0]],
                            name=add.name or neg.name, domain="opforge.rewrite")
    return node, add, [s1, s2, neg, cat, mul_s, mul_c], lambda n: fused_rotary(n, bounds, (axis, cat_axis))


def _halves(h, end2, s1, e1):
    """x2 = x[h:end2] and x1 = x[s1:e1] are the two halves (with x's last dim 2h, checked later)."""
    return h > 0 and s1 == 0 and e1 == h and end2 >= 2 * h


def fused_rotary(n, bounds, axes):
    from opforge.onnx._shape_values import known_ints
    resolved = []
    for b in bounds:
        if isinstance(b, tuple):
            v = known_ints(n, b[1])
            if v is None:  # eager: the value itself (a graph tensor: refused)
                v = [int(i) for i in np.asarray(n.static(b[1], "slice bound")).reshape(-1)]
            if len(v) != 1:
                raise n.fail("the halves' bounds are not known at import", UnimplementedError)
            b = v[0]
        resolved.append(b)
    if not _halves(*resolved):
        raise n.fail(f"the slices {resolved} do not cut two halves", UnimplementedError)
    h = resolved[0]
    x, cos, sin = n.input(0), n.input(1), n.input(2)
    dt, shape = dtype_of(x), list(shape_of(x))
    rank = len(shape)
    if dt not in (np.float32, np.float64) or any(dtype_of(t) != dt for t in (cos, sin)) or rank == 0:
        raise n.fail("not float32/float64 rotary", UnimplementedError)
    if any(a not in (-1, rank - 1) for a in axes) or shape[-1] != 2 * h:
        raise n.fail("the slices do not halve the last axis", UnimplementedError)
    # Dims unknown at import (None) pass here: the op's shape function checks them at run time.
    for c in (shape_of(cos), shape_of(sin)):
        c = list(c)
        if not 1 <= len(c) <= rank or c[-1] not in (shape[-1], None) or any(
                a not in (1, b, None) and b is not None for a, b in zip(c[:-1], shape[rank - len(c):-1])):
            raise n.fail("cos/sin do not broadcast to x with its last dim", UnimplementedError)
    return P.apply_rotary_embedding(x, cos, sin)
