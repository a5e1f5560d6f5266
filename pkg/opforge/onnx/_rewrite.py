"""Graph rewrites at import, like onnxruntime's optimizer: decomposed forms
exported models carry become the one operator opforge runs fused.

- Erf-GELU  x * 0.5 * (1 + Erf(x / sqrt 2))               -> Gelu (then the
  MatMul -> Add -> Gelu chain fuses into one GEMM epilogue, _fuse_matmul.py)
- tanh-GELU x * 0.5 * (1 + Tanh(sqrt(2/pi) (x + 0.044715 x^3))) -> GeluTanh, one
  pass instead of eight ops (GPT-2)
- RMSNorm   w * (x / Sqrt(ReduceMean(x^2, last axis) + eps))  -> RMSNormalization
- LayerNorm (x - mean) / Sqrt(var + eps) * w + b            -> LayerNormalization
- rotary    x * cos + Concat(-x2, x1) * sin (Llama)         -> ApplyRotaryEmbedding (_rewrite_rotary.py)
- SE convs  1x1 Conv over 1x1 planes (after global pooling)  -> FusedMatMul on rows (_rewrite_pixel_conv.py)

A rewrite works on the checked node list before any converter runs, and
only where every node it removes is read by the pattern alone (nothing else
and no graph output sees the intermediates) and every constant is what the
formula says (checked to float32 precision). The new node keeps the name of
the node whose output it takes over; its converter is the one ONNX's newer
schema maps to, with the version given here (the model's opset may predate
Gelu or RMSNormalization). Anything that does not match is left as it was.
"""

import numpy as np
from onnx import helper

from opforge.errors import OpError
from opforge.onnx import _node, _validate

# The schema version whose converter runs each new node.
_VERSIONS = {"Gelu": 20, "RMSNormalization": 23, "LayerNormalization": 17}


class _View:
    """Who makes and who reads each value, and the constants' values."""

    def __init__(self, nodes, initializers, graph_outputs):
        self.made_by, self.readers = {}, {}
        self.consts = dict(initializers)
        for node in nodes:
            for name in node.input:
                if name:
                    self.readers.setdefault(name, []).append(node)
            for name in node.output:
                self.made_by[name] = node
            if node.op_type == "Identity" and node.input[0] in self.consts:  # exporters share weights so
                self.consts[node.output[0]] = self.consts[node.input[0]]
            elif node.op_type == "Constant" and len(node.attribute) == 1:
                v = _constant_value(node)
                if v is not None:
                    self.consts[node.output[0]] = v
        self.outputs = set(graph_outputs)

    def op(self, name, *types):
        node = self.made_by.get(name)
        return node if node is not None and node.op_type in types else None

    def private(self, name, reader):
        """Only `reader` reads `name` (once), and it is no graph output."""
        rs = self.readers.get(name, [])
        return name not in self.outputs and len(rs) == 1 and rs[0] is reader

    def scalar(self, name):
        v = self.consts.get(name)
        if v is None or v.size != 1 or v.dtype.kind != "f":
            return None
        return float(v.reshape(-1)[0])

    def ints(self, name):
        v = self.consts.get(name)
        return None if v is None or v.dtype.kind not in "iu" else [int(i) for i in v.reshape(-1)]


def _constant_value(node):
    a = node.attribute[0]
    try:
        if a.name == "value":
            return _validate.tensor_to_numpy(a.t, "constant")
        if a.name == "value_float":
            return np.array(a.f, np.float32)
        if a.name == "value_int":
            return np.array(a.i, np.int64)
        if a.name == "value_ints":
            return np.array(list(a.ints), np.int64)
    except Exception:  # noqa: BLE001 -- a bad constant is reported when its node converts
        return None
    return None


def _near(v, want):
    return v is not None and abs(v - want) <= 1e-5 * max(1.0, abs(want))


def _other(node, name):
    """The input of a two-input node that is not `name` (None if both are)."""
    a, b = node.input[0], node.input[1]
    return b if a == name and b != name else a if b == name and a != name else None


def _scaled_product(g, x, a):
    """Finds y = x * a * 0.5 (in any grouping of two Muls) reading a; returns (y's node, removed nodes)."""
    for m1 in g.readers.get(a, []):
        if m1.op_type != "Mul" or not g.private(a, m1):
            continue
        other = _other(m1, a)
        if other == x:  # (x * a) * 0.5
            y = _single(g, m1, "Mul")
            if y is not None and _near(g.scalar(_other(y, m1.output[0])), 0.5):
                return y, [m1]
        elif _near(g.scalar(other), 0.5):  # x * (a * 0.5)
            rs = g.readers.get(m1.output[0], [])
            if len(rs) == 1 and rs[0].op_type == "Mul" and g.private(m1.output[0], rs[0]) and \
                    _other(rs[0], m1.output[0]) == x:
                return rs[0], [m1]
        else:  # (x * 0.5) * a
            h = g.op(other, "Mul")
            if h is not None and g.private(other, m1) and x in h.input and _near(g.scalar(_other(h, x)), 0.5):
                return m1, [h]
    return None, []


def _gelu(g, erf):
    """Erf(x / sqrt 2) [or x * (1/sqrt 2)] + 1, times x * 0.5 -> Gelu(x)."""
    d = g.op(erf.input[0], "Div", "Mul")
    if d is None or not g.private(erf.input[0], erf):
        return None
    x, c = d.input
    want = np.sqrt(2.0) if d.op_type == "Div" else 1 / np.sqrt(2.0)
    if not _near(g.scalar(c), want):
        if d.op_type == "Mul" and _near(g.scalar(x), want):
            x, c = c, x
        else:
            return None
    rs = g.readers.get(erf.output[0], [])
    if len(rs) != 1 or rs[0].op_type != "Add" or not g.private(erf.output[0], rs[0]):
        return None
    add = rs[0]
    if not _near(g.scalar(_other(add, erf.output[0])), 1.0):
        return None
    y, extra = _scaled_product(g, x, add.output[0])
    if y is None:
        return None
    gelu = helper.make_node("Gelu", [x], [y.output[0]], name=y.name or erf.name)
    return gelu, y, [d, erf, add] + extra


_SQRT_2_OVER_PI = float(np.sqrt(2 / np.pi))


def _gelu_tanh(g, tanh):
    """x * 0.5 * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 x^3))), GPT-2's GELU -> one fused step."""
    m2 = g.op(tanh.input[0], "Mul")
    if m2 is None or not g.private(tanh.input[0], tanh):
        return None
    k = [i for i in m2.input if _near(g.scalar(i), _SQRT_2_OVER_PI)]
    if len(k) != 1:
        return None
    a = g.op(_other(m2, k[0]), "Add")
    if a is None or not g.private(a.output[0], m2):
        return None
    for x, m1_name in (a.input, a.input[::-1]):
        m1 = g.op(m1_name, "Mul")
        if m1 is None or not g.private(m1_name, a):
            continue
        c = [i for i in m1.input if _near(g.scalar(i), 0.044715)]
        p = g.op(_other(m1, c[0]), "Pow") if len(c) == 1 else None
        if p is not None and g.private(p.output[0], m1) and p.input[0] == x and _near(g.scalar(p.input[1]), 3.0):
            break
    else:
        return None
    rs = g.readers.get(tanh.output[0], [])
    add1 = rs[0] if len(rs) == 1 and rs[0].op_type == "Add" and g.private(tanh.output[0], rs[0]) else None
    if add1 is None or not _near(g.scalar(_other(add1, tanh.output[0])), 1.0):
        return None
    y, extra = _scaled_product(g, x, add1.output[0])
    if y is None:
        return None
    node = helper.make_node("Gelu", [x], [y.output[0]], name=y.name or tanh.name, approximate="tanh")
    return node, y, [p, m1, a, m2, tanh, add1] + extra, _gelu_tanh_fn


def _gelu_tanh_fn(n):
    """0.5 x (1 + tanh(z)) = x sigmoid(2z) in one GeluTanh pass instead of the exported eight ops."""
    from opforge import ops as P
    from opforge.errors import UnimplementedError
    x = n.input(0)
    dt = _node.dtype_of(x)
    if dt not in (np.float32, np.float64):
        raise n.fail("not float32/float64", UnimplementedError)
    return P.gelu_tanh(x)


def _rms_norm(g, mean):
    """w * (x * 1/Sqrt(ReduceMean(x^2) + eps)) [or x / Sqrt(...)] -> RMSNormalization(x, w)."""
    pw = g.op(mean.input[0], "Pow", "Mul")
    if pw is None or not g.private(mean.input[0], mean) or not _mean_of_last(g, mean):
        return None
    x = pw.input[0]
    if not (pw.op_type == "Pow" and _near(g.scalar(pw.input[1]), 2.0) or
            pw.op_type == "Mul" and pw.input[1] == x):
        return None
    chain = _single(g, mean, "Add")
    eps = chain is not None and g.scalar(_other(chain, mean.output[0]))
    sq = chain is not None and eps is not None and eps is not False and _single(g, chain, "Sqrt")
    if not sq:
        return None
    inv = _single(g, sq, "Div", "Reciprocal")
    if inv is None:
        return None
    removed = [pw, mean, chain, sq, inv]
    if inv.op_type == "Div" and inv.input[0] == x and inv.input[1] == sq.output[0]:
        normed = inv  # x / sqrt(...)
    else:
        if inv.op_type == "Div" and not (inv.input[1] == sq.output[0] and _near(g.scalar(inv.input[0]), 1.0)):
            return None
        normed = _single(g, inv, "Mul")
        if normed is None or _other(normed, inv.output[0]) != x:
            return None
        removed.append(normed)
    cur = normed
    cast = _single(g, cur, "Cast")
    if cast is not None:
        # A float32 round trip (Llama's norm computes in float32): a no-op
        # only when x is float32 itself, i.e. made by a Cast to float.
        src = g.op(x, "Cast")
        if not (_cast_to(cast) == 1 and src is not None and _cast_to(src) == 1):
            return None
        removed.append(cast)
        cur = cast
    mul = _single(g, cur, "Mul")
    if mul is None:
        return None
    w = _other(mul, cur.output[0])
    wv = g.consts.get(w)
    if wv is None or wv.ndim != 1:
        return None
    node = helper.make_node("RMSNormalization", [x, w], [mul.output[0]], name=mul.name or mean.name,
                            axis=-1, epsilon=float(eps))
    return node, mul, removed


def _cast_to(node):
    return next((a.i for a in node.attribute if a.name == "to"), None)


def _single(g, node, *types):
    """The one reader of node's output if it has one of `types` and reads it privately."""
    rs = g.readers.get(node.output[0], [])
    if len(rs) == 1 and rs[0].op_type in types and g.private(node.output[0], rs[0]):
        return rs[0]
    return None


def _mean_of_last(g, mean):
    """ReduceMean over the last axis only, keeping it."""
    if any(a.name == "keepdims" and a.i != 1 for a in mean.attribute):
        return False
    if any(a.name == "noop_with_empty_axes" for a in mean.attribute):
        return False
    axes = next((list(a.ints) for a in mean.attribute if a.name == "axes"), None)
    if axes is None and len(mean.input) > 1 and mean.input[1]:
        axes = g.ints(mean.input[1])
    return axes == [-1]


def _layer_norm(g, mean):
    """((x - mean(x)) / Sqrt(mean((x - mean)^2) + eps)) * w + b -> LayerNormalization."""
    if not _mean_of_last(g, mean):
        return None
    x = mean.input[0]
    subs = [r for r in g.readers.get(mean.output[0], []) if r.op_type == "Sub" and r.input == [x, mean.output[0]]]
    if len(subs) != 1 or len(g.readers[mean.output[0]]) != 1:
        return None
    sub = subs[0]
    d = sub.output[0]
    rd = g.readers.get(d, [])
    pw = next((r for r in rd if r.op_type == "Pow" and r.input[0] == d and _near(g.scalar(r.input[1]), 2.0)), None)
    div = next((r for r in rd if r.op_type == "Div" and r.input[0] == d), None)
    if pw is None or div is None or len(rd) != 2 or d in g.outputs:
        return None
    var = _single(g, pw, "ReduceMean")
    if var is None or not _mean_of_last(g, var):
        return None
    add = _single(g, var, "Add")
    eps = add is not None and g.scalar(_other(add, var.output[0]))
    sq = add is not None and eps is not None and eps is not False and _single(g, add, "Sqrt")
    if not sq or div.input[1] != sq.output[0] or not g.private(sq.output[0], div):
        return None
    mul = _single(g, div, "Mul")
    if mul is None:
        return None
    w = _other(mul, div.output[0])
    bias_add = _single(g, mul, "Add")
    b = bias_add is not None and _other(bias_add, mul.output[0])
    wv, bv = g.consts.get(w), g.consts.get(b) if b else None
    if wv is None or bv is None or wv.ndim != 1 or bv.ndim != 1:
        return None
    node = helper.make_node("LayerNormalization", [x, w, b], [bias_add.output[0]],
                            name=bias_add.name or mean.name, axis=-1, epsilon=float(eps))
    return node, bias_add, [mean, sub, pw, var, add, sq, div, mul]


class Synthetic:
    """What runs a new node: its converter, the schema version it implements, and
    the nodes it replaced (in order), which run instead if the fused converter
    refuses the inputs it finds at run time (a dtype or shape it lacks)."""

    __slots__ = ("fn", "version", "originals")

    def __init__(self, fn, version, originals):
        self.fn, self.version, self.originals = fn, version, originals


def _rewrites():
    from opforge.onnx import _rewrite_attention, _rewrite_pixel_conv, _rewrite_rotary
    # LayerNorm before RMSNorm: its centred half is an RMSNorm of x - mean too.
    return (("Softmax", _rewrite_attention.match), ("Erf", _gelu), ("Tanh", _gelu_tanh),
            ("ReduceMean", _layer_norm), ("ReduceMean", _rms_norm), ("Neg", _rewrite_rotary.match),
            ("Conv", _rewrite_pixel_conv.match))


def rewrite(order, initializers, graph_outputs, opset):
    """The nodes in topological order with the patterns above replaced.

    Returns (nodes, synthetic): synthetic maps id(new node) -> Synthetic.
    """
    synthetic = {}
    for anchor_type, fn in _rewrites():
        g = _View(order, initializers, graph_outputs)
        g.opset, g.order = opset, order
        position = {id(n): i for i, n in enumerate(order)}
        replaced, gone = {}, set()
        for node in order:
            if node.op_type != anchor_type or id(node) in gone:
                continue
            found = fn(g, node)
            if found is None:
                continue
            new, last, removed = found[:3]
            conv_fn = found[3] if len(found) > 3 else None
            if conv_fn is None and new.op_type not in _node.CONVERTERS:
                continue
            if any(id(n) in gone or id(n) in synthetic for n in removed + [last]):
                continue  # overlaps another match (rewrites never nest)
            replaced[id(last)] = new
            originals = sorted(removed + [last], key=lambda n: position[id(n)])
            synthetic[id(new)] = Synthetic(conv_fn or _node.CONVERTERS[new.op_type].fn,
                                           _VERSIONS.get(new.op_type, 1), originals)
            gone.update(id(n) for n in removed)
        if replaced:
            # The new node takes the place of the pattern's last node, which
            # comes after every input of the pattern in topological order.
            order = [replaced.get(id(n), n) for n in order if id(n) not in gone]
    return order, synthetic


def guarded(fused, originals):
    """A new node's converter that runs the nodes it replaced when it raises
    (inputs it does not take; a real error of the model then comes from the
    original node, worded as without the rewrite)."""
    def run(ctx):
        try:
            return fused(ctx)
        except (OpError, TypeError):  # TypeError: a dim it needs is known only at run time (None)
            pass
        env = dict(ctx._consts)
        env.update(ctx._env)
        for octx, fn, outputs in originals:
            result = fn(octx.bind(env, ctx._consts))
            results = result if isinstance(result, tuple) else (result,)
            for k, name in outputs:
                env[name] = results[k]
        return env[ctx.node.output[0]]
    return run
