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
    """(data, start, end, axis) of a one-axis, step-1 Slice with constant bounds, else None."""
    if node is None or node.op_type != "Slice" or len(node.input) < 4:
        return None
    starts, ends, axes = (g.ints(node.input[i]) for i in (1, 2, 3))
    steps = g.ints(node.input[4]) if len(node.input) > 4 and node.input[4] else [1]
    if any(v is None or len(v) != 1 for v in (starts, ends, axes, steps)) or steps != [1]:
        return None
    return node.input[0], starts[0], ends[0], axes[0]


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
    if h <= 0 or hi[1] != 0 or hi[2] != h or end2 < 2 * h:
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
    node = helper.make_node("ApplyRotaryEmbedding", [x, cos, sin], [add.output[0]], name=add.name or neg.name,
                            domain="opforge.rewrite")
    return node, add, [s1, s2, neg, cat, mul_s, mul_c], lambda n: fused_rotary(n, h, (axis, cat_axis))


def fused_rotary(n, h, axes):
    x, cos, sin = n.input(0), n.input(1), n.input(2)
    dt, shape = dtype_of(x), list(shape_of(x))
    rank = len(shape)
    if dt not in (np.float32, np.float64) or any(dtype_of(t) != dt for t in (cos, sin)) or rank == 0:
        raise n.fail("not float32/float64 rotary", UnimplementedError)
    if any(a not in (-1, rank - 1) for a in axes) or shape[-1] != 2 * h:
        raise n.fail("the slices do not halve the last axis", UnimplementedError)
    for c in (shape_of(cos), shape_of(sin)):
        c = list(c)
        if not 1 <= len(c) <= rank or c[-1] != shape[-1] or any(
                a not in (1, b) for a, b in zip(c[:-1], shape[rank - len(c):-1])):
            raise n.fail("cos/sin do not broadcast to x with its last dim", UnimplementedError)
    return P.apply_rotary_embedding(x, cos, sin)
