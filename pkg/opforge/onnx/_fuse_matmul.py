"""MatMul -> Add(bias) [-> Relu | Sigmoid | Gelu] chains as one FusedMatMul.

Exported PyTorch Linear layers (and most transformer MLPs) arrive as a
MatMul whose only reader is an Add of a 1-D bias, often followed by an
activation that nothing else reads. The import steps of such a chain become
one step at its last node: the bias and the activation run in the GEMM's
epilogue while each output tile is in cache, instead of one pass over the
product per node. Shapes and dtypes are checked when the step runs; a chain
that does not qualify there (a bias that broadcasts another way, float64,
a batched b) runs unfused, as before.
"""

import numpy as np

from opforge import ops as P
from opforge.onnx._node import dtype_of, shape_of
from opforge.onnx._pack_matmul import packed_linear

_ACTS = {"Relu": ("relu", P.relu), "Sigmoid": ("sigmoid", P.sigmoid)}


def _gelu_act(ctx):
    # Only the exact (erf) form is an epilogue; the tanh form runs unfused.
    if ctx.node.op_type == "Gelu" and ctx.attr("approximate", "none") == "none":
        return "gelu", P.gelu
    return None


class _Deferred:
    """What a fused-away node's output holds: nothing reads it (checked at import)."""


def _matmul_add(mm_ctx, add_ctx, act):
    def run(ctx):
        env, consts = ctx._env, ctx._consts
        m = mm_ctx.bind(env, consts)
        a, b = m.input(0), m.input(1)
        add = add_ctx.bind(env, consts)
        side = 1 if add.node.input[0] == mm_ctx.node.output[0] else 0
        bias = add.input(side)
        name, fn = act if act else ("none", None)
        sb, sa = list(shape_of(b)), list(shape_of(a))
        if (len(sb) == 2 and len(sa) >= 1 and list(shape_of(bias)) == [sb[1]] and sa[-1] == sb[0]
                and all(dtype_of(v) == np.float32 for v in (a, b, bias))):
            y = packed_linear(a, m.known(1), False, bias, name)  # a constant weight: packed once
            return y if y is not None else P.fused_mat_mul(a, b, bias, activation=name)
        y = P.mat_mul(a, b)
        y = P.add(y, bias) if side == 1 else P.add(bias, y)
        return fn(y) if fn else y
    return run


def _deferred(ctx):
    return _Deferred()


def fuse_matmul_chains(steps, graph_outputs):
    """The import steps with each qualifying MatMul -> Add [-> activation]
    chain run as one step at its last node (see the module docstring)."""
    readers, made_by = {}, {}
    for i, (ctx, _, _) in enumerate(steps):
        for name in ctx.node.input:
            readers[name] = readers.get(name, 0) + 1
        if ctx.node.output:
            made_by[ctx.node.output[0]] = i
    private = lambda name: readers.get(name) == 1 and name not in graph_outputs  # noqa: E731
    steps = list(steps)
    fused_adds = {}
    for i, (ctx, fn, outputs) in enumerate(steps):
        if ctx.node.op_type != "Add" or len(ctx.node.input) != 2:
            continue
        for name in ctx.node.input:
            j = made_by.get(name)
            if j is not None and steps[j][0].node.op_type == "MatMul" and private(name) and \
                    ctx.node.input[0] != ctx.node.input[1]:
                steps[i] = (ctx, _matmul_add(steps[j][0], ctx, None), outputs)
                steps[j] = (steps[j][0], _deferred, steps[j][2])
                fused_adds[ctx.node.output[0]] = (j, i)
                break
    for i, (ctx, fn, outputs) in enumerate(steps):
        act = _ACTS.get(ctx.node.op_type) or _gelu_act(ctx)
        src = ctx.node.input[0] if act and ctx.node.input else None
        if src not in fused_adds or not private(src):
            continue
        j, k = fused_adds.pop(src)
        steps[i] = (ctx, _matmul_add(steps[j][0], steps[k][0], act), outputs)
        steps[k] = (steps[k][0], _deferred, steps[k][2])
    return steps
