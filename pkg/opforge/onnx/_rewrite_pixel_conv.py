"""Import rewrite: a 1x1 Conv over 1x1 planes (a squeeze-and-excitation block's two convolutions, after a
GlobalAveragePool) runs as FusedMatMul on [N, C] rows.

As a convolution it is N products [O, C] x [C, 1], each filling one column of the GEMM tile (1152 -> 48 at
batch 8: 66 us, onnxruntime 26 us, one thread); as one [N, C] x [C, O] product with the weight transposed once
here it takes 17 us (5 us at batch 1, against 10.5). A following Relu, Sigmoid or SiLU (x * Sigmoid(x)) runs
in the product's epilogue. Matched where the Conv's input is known to be [N, C, 1, 1]
from the ONNX graph alone: made by a global pooling (or a ReduceMean/ReduceMax over axes 2 and 3 keeping them),
then any chain of elementwise ops on such values and of convs rewritten here. The converter checks the shapes
again and hands the node back to the Conv converter (``_rewrite.guarded``) where they are not as matched.
"""

import functools

import numpy as np
from onnx import helper

_POOLS = {"GlobalAveragePool", "GlobalMaxPool"}
_REDUCE = {"ReduceMean", "ReduceMax"}
_UNARY = {"Relu", "Sigmoid", "HardSigmoid", "HardSwish", "Clip", "LeakyRelu", "Tanh", "Identity", "Elu", "Selu",
          "Softplus", "Neg", "Gelu", "Mish"}
_BINARY = {"Mul", "Add", "Sub", "Div"}


def _pixel_values(g):
    """Names of values known to be [N, C, 1, 1] (cached on the view)."""
    if getattr(g, "_pixels", None) is not None:
        return g._pixels
    pixels = set()
    for node in _topological(g):
        t, ins = node.op_type, [i for i in node.input]
        if not node.output:
            continue
        if t in _POOLS:
            pixels.add(node.output[0])
        elif t in _REDUCE and _keeps_last_two(g, node):
            pixels.add(node.output[0])
        elif t in _UNARY and ins and ins[0] in pixels:
            pixels.add(node.output[0])
        elif t in _BINARY and len(ins) == 2 and all(i in pixels or g.scalar(i) is not None for i in ins) \
                and any(i in pixels for i in ins):
            pixels.add(node.output[0])
        elif t == "Conv" and ins and ins[0] in pixels and _pointwise_conv(g, node):
            pixels.add(node.output[0])
    g._pixels = pixels
    return pixels


def _topological(g):
    return g.order


def _keeps_last_two(g, node):
    if any(a.name == "keepdims" and a.i != 1 for a in node.attribute):
        return False
    axes = next((list(a.ints) for a in node.attribute if a.name == "axes"), None)
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = g.ints(node.input[1])
    return axes is not None and sorted(axes) in ([2, 3], [-2, -1])


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return list(a.ints) if a.ints else (a.s.decode() if a.s else a.i)
    return default


def _pointwise_conv(g, node):
    """A Conv with a constant [O, C, 1, 1] weight, one group, no pads: on a 1x1 plane, a product per row."""
    w = g.consts.get(node.input[1]) if len(node.input) > 1 else None
    if w is None or w.ndim != 4 or w.shape[2:] != (1, 1) or w.dtype != np.float32:
        return False
    if len(node.input) > 2 and node.input[2] and g.consts.get(node.input[2]) is None:
        return False
    return (_attr(node, "group", 1) == 1 and not any(_attr(node, "pads", [0]))
            and _attr(node, "auto_pad", "NOTSET") in ("NOTSET", "VALID"))


def _activation(g, conv):
    """(activation, last node, nodes it removes) of what FusedMatMul's epilogue can take after the Conv:
    Relu, Sigmoid, or x * Sigmoid(x) (SiLU), read by nothing else."""
    y = conv.output[0]
    if y in g.outputs:
        return "none", conv, []
    rs = g.readers.get(y, [])
    if len(rs) == 1 and rs[0].op_type in ("Relu", "Sigmoid") and g.private(y, rs[0]):
        return rs[0].op_type.lower(), rs[0], [conv]
    if len(rs) == 2 and sorted(r.op_type for r in rs) == ["Mul", "Sigmoid"]:
        sig = next(r for r in rs if r.op_type == "Sigmoid")
        mul = next(r for r in rs if r.op_type == "Mul")
        if sorted(mul.input) == sorted([y, sig.output[0]]) and g.private(sig.output[0], mul):
            return "silu", mul, [conv, sig]
    return "none", conv, []


def _nchwc_takes(g):
    """Whether the NCHWc pass (_nchwc_pass.py, after this) will run this graph's convs: it takes an SE
    block's convs itself and folds the block's Mul into the conv after it, so they are left to it."""
    if getattr(g, "_nchwc", None) is None:
        from opforge.onnx import _layout_nchwc
        how = _layout_nchwc.mode()
        g._nchwc = how == "all" or how == "auto" and any(
            n.op_type == "Conv" and _attr(n, "group", 1) != 1 and len(n.input) > 1
            and getattr(g.consts.get(n.input[1]), "shape", (0, 0))[1:2] == (1,) for n in _topological(g))
    return g._nchwc


def match(g, conv):
    """Conv over a known 1x1 plane (and its activation) -> one node, converted as a row product."""
    if not conv.input or conv.input[0] not in _pixel_values(g) or not _pointwise_conv(g, conv) or _nchwc_takes(g):
        return None
    act, last, removed = _activation(g, conv)
    new = helper.make_node("Conv", list(conv.input), [last.output[0]], name=last.name or conv.name)
    new.attribute.extend(conv.attribute)
    return new, last, removed, functools.partial(convert, activation=act)


def convert(n, activation="none"):
    """x [N, C, 1, 1] -> FusedMatMul(x as [N, C], W^T [C, O], bias) as [N, O, 1, 1]."""
    from opforge import ops as P
    from opforge.onnx import _node
    x = n.input(0)
    shape = _node.shape_of(x)
    w = n.known(1)
    if (len(shape) != 4 or shape[1] is None or shape[2] != 1 or shape[3] != 1 or w is None
            or _node.dtype_of(x) != np.float32 or w.shape[1] != shape[1]):
        raise n.fail("not a 1x1 convolution over 1x1 planes")  # the Conv converter takes it (guarded)
    o, c = int(w.shape[0]), int(w.shape[1])
    b = n.known(2) if n.has(2) else None
    bias = np.zeros(o, np.float32) if b is None else np.asarray(b, np.float32).reshape(o)
    rows = P.reshape(x, shape=[-1 if shape[0] is None else shape[0], c])
    y = P.fused_mat_mul(rows, np.ascontiguousarray(w.reshape(o, c).T), bias, activation=activation)
    return P.reshape(y, shape=[-1 if shape[0] is None else shape[0], o, 1, 1])
