"""ONNX operators mapped onto opforge ops that only some builds have.

Gelu, Gather and the fused LayerNorm come with the training ops; each
converter registers only when its op is in this build, so the map never
promises an operator it cannot run.
"""

import numpy as np

from opforge import ops as P
from opforge.onnx._node import STRING, converter, dtype_of, shape_of

if hasattr(P, "gelu"):
    def _check_gelu(n):
        if n.attr("approximate", "none") not in ("none", "tanh"):
            raise n.fail(f"approximate must be 'none' or 'tanh', got {n.attr('approximate')!r}")

    @converter("Gelu", (20,), {"approximate": STRING}, check=_check_gelu)
    def _gelu(n):
        x = n.input(0)
        if n.attr("approximate", "none") == "none":
            return P.gelu(x)
        dt = dtype_of(x)
        if dt in (np.float32, np.float64) and hasattr(P, "gelu_tanh"):
            return P.gelu_tanh(x)
        c = lambda v: np.array(v, dtype=dt)  # noqa: E731
        inner = P.mul(c(np.sqrt(2 / np.pi)), P.add(x, P.mul(c(0.044715), P.mul(x, P.mul(x, x)))))
        return P.mul(P.mul(c(0.5), x), P.add(c(1), P.tanh(inner)))


if hasattr(P, "gather"):
    from opforge.onnx._node import INT

    @converter("Gather", (1, 11, 13), {"axis": INT})
    def _gather(n):
        params, idx = n.input(0), n.input(1)
        shape = shape_of(params)
        axis = n.axis(n.attr("axis", 0), len(shape))
        it = dtype_of(idx)
        if it not in (np.int32, np.int64):
            raise n.fail(f"indices must be int32 or int64, got {it}")
        # ONNX counts negative indices from the end; opforge's Gather does not.
        dim = np.array(shape[axis], dtype=it)
        idx = P.select(P.less(idx, np.array(0, dtype=it)), P.add(idx, dim), idx)
        if dtype_of(params) == np.bool_:  # Gather has no bool kernel: through int32 and back
            return P.not_equal(_gather_axis(P.cast(params, dtype=np.dtype(np.int32)), idx, shape, axis),
                               np.zeros((), np.int32))
        return _gather_axis(params, idx, shape, axis)

    def _gather_axis(params, idx, shape, axis):
        if axis == 0:
            return P.gather(params, idx)
        rank, r = len(shape), len(shape_of(idx))
        front = P.transpose(params, perm=[axis] + [i for i in range(rank) if i != axis])
        g = P.gather(front, idx)  # indices dims, then params' dims without axis
        perm = [r + k for k in range(axis)] + list(range(r)) + [r + k for k in range(axis, rank - 1)]
        return P.transpose(g, perm=perm)
