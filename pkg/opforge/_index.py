"""The Python half of the index group (cpp/ops/index_ops.cc).

`nonzero` counts before calling NonZero, whose output size depends on the
values. The scatters' gradients are registered here again (over the rules
declared in C++, which hold for 'none' and 'add') because they depend on the
`reduction` attr, which the C++ gradient language cannot branch on: 'mul',
'max' and 'min' raise UnimplementedError naming the op rather than return a
wrong gradient.
"""

import numpy as np

from opforge import errors
from opforge.autodiff import RegisterGradient
from opforge.ops import gen_index_ops as _gen
from opforge.ops.gen_array_ops import reshape as _reshape, zeros_like as _zeros_like
from opforge.ops.gen_math_ops import equal as _equal, select as _select

__all__ = ["nonzero"]


def nonzero(x):
    """np.array(np.nonzero(x)): the positions of x's nonzero elements, shape [rank, count], int64."""
    a = x.numpy() if hasattr(x, "numpy") else np.asarray(x)
    return _gen.non_zero(x, count=int(np.count_nonzero(a)))


def _differentiable(op):
    r = op.get_attr("reduction")
    if r not in ("none", "add"):
        raise errors.UnimplementedError(
            f"{op.type}: the gradient of reduction {r!r} is not implemented (only 'none' and 'add')")
    return r


def _last_writer(scatter, gather, target_shape, ushape, dupd):
    """With reduction 'none' and a repeated index only the last write counts: only it gets a gradient."""
    ids = np.arange(int(np.prod(ushape, dtype=np.int64)), dtype=np.int64).reshape(ushape)
    written = scatter(np.full(target_shape, -1, dtype=np.int64), ids)
    last = _equal(gather(written), ids)  # shape ushape; ScatterND's slices add trailing dims
    last = _reshape(last, shape=list(ushape) + [1] * (len(dupd.shape) - len(ushape)))
    return _select(last, dupd, _zeros_like(dupd))


@RegisterGradient("ScatterND")
def _scatter_nd_grad(op, dy):
    data, indices, updates = op.inputs
    r = _differentiable(op)
    # 'none' overwrote the addressed slices: their data gets no gradient; 'add' passes dy through.
    dupd = _gen.gather_nd(dy, indices)
    if r == "add":
        return [dy, None, dupd]
    k = int(indices.shape[-1])
    dupd = _last_writer(lambda t, u: _gen.scatter_nd(t, indices, u), lambda t: _gen.gather_nd(t, indices),
                        tuple(data.shape[:k]), tuple(indices.shape[:-1]), dupd)
    return [_gen.scatter_nd(dy, indices, _zeros_like(updates)), None, dupd]


@RegisterGradient("ScatterElements")
def _scatter_elements_grad(op, dy):
    data, indices, updates = op.inputs
    r = _differentiable(op)
    axis = op.get_attr("axis")
    dupd = _gen.gather_elements(dy, indices, axis=axis)
    if r == "add":
        return [dy, None, dupd]
    dupd = _last_writer(lambda t, u: _gen.scatter_elements(t, indices, u, axis=axis),
                        lambda t: _gen.gather_elements(t, indices, axis=axis),
                        tuple(data.shape), tuple(indices.shape), dupd)
    return [_gen.scatter_elements(dy, indices, _zeros_like(updates), axis=axis), None, dupd]
