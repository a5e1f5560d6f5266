"""Reverse mode: Nodes and backward.

Each recorded op becomes a ``Node`` (the ``grad_fn`` of its outputs, a C
type built by the op call itself, swig/py_autograd.cc) holding what its
gradient function may read, with TensorFlow's view of an op: ``type``,
``inputs`` (flat; the caller's Tensors where they require a gradient, saved
copies of borrowed writable numpy memory), ``outputs`` (aliases without
autograd state, so a result, its Node and the Node's outputs form no
reference cycle), ``get_attr(name)`` (the completed attrs), ``edges``
(per input, its Meta or None) and ``needs_input_grad`` (per input, whether
its edge requires a gradient: PyTorch's name). ``backward`` walks the Nodes from the roots in
dependency order and calls each op's gradient function (registry.py).
"""

import numpy as np

from opforge import _pywrap_internal as _pw
from opforge import errors as _errors
from opforge.autodiff import registry, state
from opforge.autodiff.state import Meta

def _is_float(dtype):
    return dtype.as_numpy_dtype.kind == "f"


class _DifferentiableView:
    """What a gradient function sees under create_graph: the node, with
    outputs that are part of the graph (fresh aliases holding the node), so
    gradients computed from the outputs are differentiable too."""

    __slots__ = ("type", "inputs", "outputs", "get_attr", "name", "needs_input_grad")

    def __init__(self, node):
        self.type = self.name = node.type
        self.inputs = node.inputs
        self.get_attr = node.get_attr
        self.needs_input_grad = node.needs_input_grad
        outputs = []
        for i, out in enumerate(node.outputs):
            if _is_float(out.dtype):
                out = _pw.to_tensor(out, None)
                out._ag = Meta(node, i)
            outputs.append(out)
        self.outputs = tuple(outputs)


def make_leaf(t):
    if not _is_float(t.dtype):
        raise _errors.InvalidArgumentError(
            f"tensor: only floating-point tensors can require gradients, got dtype {t.dtype.name}")
    t = _pw.to_tensor(np.array(t.numpy()), None)  # owns its memory
    t._ag = Meta()
    return t


def set_requires_grad(t, value):
    ag = t._ag
    if value:
        if not _is_float(t.dtype):
            raise _errors.InvalidArgumentError(
                f"requires_grad: only floating-point tensors can require gradients, got dtype {t.dtype.name}")
        if ag is None:
            t._ag = Meta()
        elif not ag.requires_grad:
            ag.requires_grad = True
        return
    if ag is not None and ag.grad_fn is not None:
        raise _errors.InvalidArgumentError(
            "requires_grad: a tensor computed from others cannot stop requiring gradients; use detach()")
    if ag is not None:
        t._ag = None if ag.grad is None else _keep_grad_only(ag)


def _keep_grad_only(ag):
    ag.requires_grad = False
    return ag


def set_grad(t, value):
    if value is not None:
        value = _pw.to_tensor(value, None)
        if value.shape != t.shape or value.dtype != t.dtype:
            raise _errors.InvalidArgumentError(
                f"grad: expected a gradient of shape {t.shape} and dtype {t.dtype.name}, "
                f"got shape {value.shape} and dtype {value.dtype.name}")
    ag = t._ag
    if ag is None:
        if value is None:
            return
        t._ag = ag = Meta()
        ag.requires_grad = False
    ag.grad = value


def _ones_like(t):
    from opforge import ops
    return ops.ones_like(t)


def _sum_to_shape(grad, shape, op_type, index):
    """Sums a broadcast gradient back to an input's shape."""
    from opforge import ops
    gshape = tuple(grad.shape)
    shape = tuple(shape)
    if gshape == shape:
        return grad
    lead = len(gshape) - len(shape)
    if lead < 0:
        raise _errors.InternalError(f"{op_type}: gradient of input {index} has shape {gshape}, "
                                    f"smaller than the input's {shape}")
    axes = list(range(lead)) + [lead + i for i, d in enumerate(shape) if d == 1 and gshape[lead + i] != 1]
    if axes:
        grad = ops.sum(grad, axes, True)
    return ops.reshape(grad, list(shape))


def backward(roots, grads, create_graph=False, capture=None):
    """Backpropagates `grads` from `roots` (Tensors).

    Without `capture`, gradients accumulate into the .grad of leaves. With
    `capture` (a list of Metas), returns their gradients instead (None where
    none flows) and touches no .grad.
    """
    metas = []
    for r in roots:
        ag = r._ag
        if ag is None or not ag.requires_grad:
            raise _errors.InvalidArgumentError(
                "backward: the tensor does not require gradients (no input of the ops that computed it "
                "requires them): create leaves with of.tensor(..., requires_grad=True)")
        metas.append(ag)

    # Nodes reachable from the roots, and how many edges lead into each.
    deps = {}
    order = []
    stack = [m.grad_fn for m in metas if m.grad_fn is not None]
    for n in stack:
        deps.setdefault(n, 0)
    seen = set(stack)
    while stack:
        node = stack.pop()
        order.append(node)
        for edge in node.edges:
            fn = edge.grad_fn if edge is not None else None
            if fn is None:
                continue
            deps[fn] = deps.get(fn, 0) + 1
            if fn not in seen:
                seen.add(fn)
                stack.append(fn)

    buffers = {}     # node -> [grad per output]
    leaf_grads = {}  # id(meta) -> (meta, grad)
    captured = {id(m): None for m in capture} if capture is not None else None

    def add(meta, grad):
        fn = meta.grad_fn
        if captured is not None and id(meta) in captured:
            prev = captured[id(meta)]
            captured[id(meta)] = grad if prev is None else prev + grad
        if fn is None:
            if captured is None:
                prev = leaf_grads.get(id(meta))
                leaf_grads[id(meta)] = (meta, grad if prev is None else prev[1] + grad)
            return
        slots = buffers.get(fn)
        if slots is None:
            slots = buffers[fn] = [None] * len(fn.outputs)
        prev = slots[meta.index]
        slots[meta.index] = grad if prev is None else prev + grad

    previous_mode = state.set_grad_enabled(create_graph)
    try:
        for meta, g in zip(metas, grads):
            add(meta, g)
        ready = [n for n in deps if deps[n] == 0]
        while ready:
            node = ready.pop()
            out_grads = buffers.pop(node, None) or [None] * len(node.outputs)
            out_grads = [g if g is not None else _zeros(o) for g, o in zip(out_grads, node.outputs)]
            fn = registry.lookup(node.type)
            in_grads = fn(_DifferentiableView(node) if create_graph else node, *out_grads)
            if not isinstance(in_grads, (list, tuple)):
                in_grads = (in_grads,)
            if len(in_grads) != len(node.inputs):
                raise _errors.InternalError(
                    f"{node.type}: its gradient function returned {len(in_grads)} gradients for "
                    f"{len(node.inputs)} inputs")
            for i, (edge, g, x) in enumerate(zip(node.edges, in_grads, node.inputs)):
                if edge is None or not edge.requires_grad:
                    continue
                if g is None:
                    raise _errors.InternalError(
                        f"{node.type}: its gradient function returned None for input {i}, which requires "
                        "a gradient")
                if type(g) is not type(x):
                    g = _pw.to_tensor(g, None)
                g = _sum_to_shape(g, x.shape, node.type, i)
                if g.dtype != x.dtype:
                    raise _errors.InternalError(
                        f"{node.type}: gradient of input {i} has dtype {g.dtype.name}, expected {x.dtype.name}")
                add(edge, g)
                fn_next = edge.grad_fn
                if fn_next is not None:
                    deps[fn_next] -= 1
                    if deps[fn_next] == 0:
                        ready.append(fn_next)
    finally:
        state.set_grad_enabled(previous_mode)

    if captured is not None:
        return [captured[id(m)] for m in capture]
    for meta, g in leaf_grads.values():
        if not create_graph:
            g = _pw.to_tensor(g, None)  # detached
        meta.grad = g if meta.grad is None else _accumulate(meta.grad, g, create_graph)
    return None


def _accumulate(prev, g, create_graph):
    total = prev + g
    return total if create_graph else _pw.to_tensor(total, None)


def _zeros(t):
    from opforge import ops
    return ops.zeros_like(t)
