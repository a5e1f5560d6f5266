"""Averaging in graphs: ``DistributedOptimizer(opt).minimize(loss)`` on a
graph tensor (horovod's ``hvd.DistributedOptimizer(opt).minimize(loss)`` in
TensorFlow 1), and the rank-0 broadcast of a graph's variables.

minimize's gradient nodes are followed by MpiGroupedAllreduce nodes (tensor
fusion), one per bucket: by dtype, last layers first, up to `fusion_bytes`,
as the eager optimizer buckets them. The update nodes read the gradients
back as slices of the fused outputs. Each bucket's collective has a control
dependency on the one before, so every process runs them in one order
whatever the Session's inter-op threads; and a bucket starts as soon as its
own gradients and the previous bucket are done, so with more than one
inter-op thread it overlaps the rest of the backward pass.
"""
from __future__ import annotations

import math

import numpy as np

from opforge.distributed import _collectives as C
from opforge.distributed._overlap import make_buckets


def average_gradients(pairs, fusion_bytes: int, op: str, name: str):
    """(variable, gradient) pairs -> the same pairs with each gradient
    replaced by its cross-process average (graph nodes; default graph)."""
    import opforge as of
    shapes = [tuple(int(d) for d in v.shape) for v, _ in pairs]
    dtypes = [g.dtype.name for _, g in pairs]
    nbytes = [math.prod(s) * np.dtype(g.dtype.as_numpy_dtype).itemsize for s, (_, g) in zip(shapes, pairs)]
    out = [g for _, g in pairs]
    previous: list = []
    for b, idx in enumerate(make_buckets(dtypes, nbytes, fusion_bytes)):
        with of.control_dependencies(previous):
            fused = C.grouped_allreduce([out[i] for i in idx], op=op, fusion_bytes=fusion_bytes,
                                        name=f"{name}.bucket{b}")
        at = 0
        for i in idx:
            n = math.prod(shapes[i])
            out[i] = of.reshape(of.ops.slice(fused, [at], [n]), shapes[i])
            at += n
        previous = [fused]
    return [(v, g) for (v, _), g in zip(pairs, out)]


def broadcast_variables(var_list=None, root: int = 0, name: str = "variables"):
    """One graph op that sets every variable of `var_list` (default: all
    variables of the default graph, optimizer slots included) to the `root`
    process's value; run it once after the initializer (horovod's
    ``broadcast_global_variables``). The broadcasts run one after another, in
    `var_list`'s order, on every process."""
    import opforge as of
    from opforge import errors
    from opforge import variables as _v
    if not _v._in_graph():
        raise errors.InvalidArgumentError(
            "broadcast_variables: builds a graph op (call it inside graph.as_default()); "
            "in eager mode use broadcast_parameters")
    var_list = _v.global_variables() if var_list is None else list(var_list)
    if not var_list:
        raise errors.InvalidArgumentError("broadcast_variables: the graph has no variables")
    previous: list = []
    for i, v in enumerate(var_list):
        if not isinstance(v, _v._GraphVariable):
            raise errors.InvalidArgumentError(f"broadcast_variables: {v!r} is not a graph variable")
        with of.control_dependencies(previous):
            previous = [v.assign(C.broadcast(v, root=root, name=f"{name}.{i}"))]
    return of.group(*previous, name=f"{name}/broadcast")
