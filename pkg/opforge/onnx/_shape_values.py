"""Shape-like inputs of ONNX nodes: ints where they are known when the node
is converted, int64 graph tensors where they are computed at run time (a
graph with symbolic dims), and the helpers that build shape tensors."""

import numpy as np

from opforge import ops as P
from opforge.errors import InvalidArgumentError
from opforge.onnx._node import dtype_of, shape_of


def is_run_time(v):
    """True for a graph tensor whose value exists only when the graph runs."""
    from opforge.graph._graph import SymbolicTensor
    return isinstance(v, SymbolicTensor)


def ints_or_tensor(n, i, what):
    """(list of ints, None) where input i is known now, else (None, its int64 graph tensor)."""
    if n.known(i) is None:
        v = n.input(i)
        if is_run_time(v):
            if dtype_of(v) not in (np.int32, np.int64) or len(shape_of(v)) > 1:
                raise InvalidArgumentError(f"onnx: node {n.where}: input {what!r} must be a 1-D int tensor, "
                                           f"got {dtype_of(v)} of shape {list(shape_of(v))}")
            if len(shape_of(v)) == 0:
                v = P.reshape(v, shape=[1])
            return None, (v if dtype_of(v) == np.int64 else P.cast(v, dtype=np.int64))
    return n.static_ints(i, what), None


def int64_tensor(values):
    return np.array(values, dtype=np.int64).reshape(-1)


def reshape_spec(x, spec):
    """x reshaped to spec: entries are ints, or ("d", i) for x's dim i (known
    now or only at run time: then one Gather from Shape(x) builds the target)."""
    shape = shape_of(x)
    resolved = [shape[s[1]] if isinstance(s, tuple) else s for s in spec]
    if None not in resolved:
        return P.reshape(x, shape=resolved)
    # Unknown dims are gathered from Shape(x); the rest are literals after it.
    lits = [d for d in resolved if d is not None]
    rank, idx, j = len(shape), [], 0
    for s, d in zip(spec, resolved):
        if d is None:
            idx.append(s[1])
        else:
            idx.append(rank + j)
            j += 1
    src = P.shape(x)
    if lits:
        src = P.concat([src, int64_tensor(lits)], axis=0)
    return P.reshape_to(x, P.gather(src, int64_tensor(idx)))


# -- what is known of run-time shape tensors -----------------------------
# A graph with symbolic dims computes Reshape targets at run time
# (Shape -> Gather -> Unsqueeze -> Concat). Their entries are tracked at
# import as ints (known), ("dim", name, i) (dim i of ONNX value `name`) or
# None, so that Reshape can take a constant target where at most one entry
# is unknown (0 copies a dim, -1 infers one): the graph then keeps static
# dims downstream (MatMul's inner dim, attention's heads).

def _entries(ctx, i):
    """(entries, scalar) of input i: a constant's ints, a tracked tensor's entries, else None."""
    if not ctx.has(i):
        return None
    known = ctx.known(i)
    if known is not None:
        if known.dtype.kind not in "iu" or known.ndim > 1:
            return None
        return [int(v) for v in known.reshape(-1)], known.ndim == 0
    return ctx.partials.get(ctx.node.input[i])


# Integer arithmetic on one known entry (Div: non-negative by positive, where
# ONNX's truncation and floor agree).
_ARITH = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
          "Div": lambda a, b: a // b}


def known_ints(ctx, i):
    """Input i's ints when each is known at import (a constant, or a run-time shape
    tensor whose tracked entries are all known), else None."""
    e = _entries(ctx, i)
    return None if e is None or not all(isinstance(v, int) for v in e[0]) else e[0]


def propagate(ctx, results, partials):
    """Records the entries of a node's 1-D int output that moves shape entries around."""
    op, node = ctx.node.op_type, ctx.node
    if not results or not is_run_time(results[0]) or not node.output:
        return
    out = None
    if op == "Shape":
        x = ctx.input(0)
        shape = shape_of(x)
        r = len(shape)
        start, end = ctx.attr("start", 0), ctx.attr("end", r)
        start = min(max(start + r if start < 0 else start, 0), r)
        end = min(max(end + r if end < 0 else end, 0), r)
        out = ([d if d is not None else ("dim", node.input[0], i) for i, d in enumerate(shape)][start:end], False)
    elif op in ("Cast", "Identity") or (op in ("Squeeze", "Unsqueeze", "Reshape") and _entries(ctx, 0)):
        src = _entries(ctx, 0)
        if src is not None:
            out = (src[0], op == "Squeeze" or (op == "Reshape" and not shape_of(results[0])))
    elif op == "Gather":
        src, idx = _entries(ctx, 0), ctx.known(1)
        if src is not None and idx is not None and ctx.attr("axis", 0) == 0 and idx.ndim <= 1:
            n = len(src[0])
            if all(-n <= int(v) < n for v in idx.reshape(-1)):
                out = ([src[0][int(v)] for v in idx.reshape(-1)], idx.ndim == 0)
    elif op == "Concat":
        parts = [_entries(ctx, i) for i in range(ctx.num_inputs)]
        if all(p is not None for p in parts):
            out = ([e for p in parts for e in p[0]], False)
    elif op in _ARITH and ctx.num_inputs == 2:
        # A known entry's arithmetic (Llama's x.shape[-1] // 2 for its rotary halves).
        a, b = _entries(ctx, 0), _entries(ctx, 1)
        if a is not None and b is not None and len(a[0]) == len(b[0]) == 1 and \
                all(isinstance(e, int) for e in a[0] + b[0]) and (op != "Div" or b[0][0] > 0 <= a[0][0]):
            out = ([_ARITH[op](a[0][0], b[0][0])], a[1] and b[1])
    if out is not None:
        partials[node.output[0]] = out


def constant_target(ctx, entries, allowzero):
    """Reshape's target as constant ints (0 copies, at most one -1), or None."""
    x_name = ctx.node.input[0]
    shape = shape_of(ctx.input(0))
    spec = []
    for i, e in enumerate(entries):
        if isinstance(e, tuple):
            _, name, j = e
            if name == x_name and j == i and not allowzero:
                e = 0  # the same dim of the input, at the same place
            else:
                e = None
        spec.append(e)
    unknown = spec.count(None)
    if unknown > 1 or (unknown == 1 and -1 in spec) or (allowzero and None in spec and 0 in spec):
        return None
    del shape
    return np.array([-1 if e is None else e for e in spec], np.int64)
