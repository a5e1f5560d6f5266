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
