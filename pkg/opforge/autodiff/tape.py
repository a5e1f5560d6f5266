"""Reverse mode: Nodes and backward.

Each recorded op becomes a ``Node`` (the ``grad_fn`` of its outputs, a C
type built by the op call itself, swig/py_autograd.cc) holding what its
gradient function may read, with TensorFlow's view of an op: ``type``,
``inputs`` (flat; the caller's Tensors where they require a gradient, saved
copies of borrowed writable numpy memory), ``outputs`` (aliases without
autograd state, so a result, its Node and the Node's outputs form no
reference cycle), ``get_attr(name)`` (the completed attrs), ``edges``
(per input, its Meta or None) and ``needs_input_grad`` (per input, whether
its edge requires a gradient: PyTorch's name). ``backward`` runs the one
backward sweep (sweep.py, shared with ``opforge.gradients``) over the Nodes.

A leaf may carry post-accumulate hooks (PyTorch's
``register_post_accumulate_grad_hook``): backward stores such a leaf's
``.grad`` as soon as its gradient is final and calls its hooks then, while
the sweep goes on; other leaves get theirs when the sweep ends.
"""

import weakref

import numpy as np

from opforge import _pywrap_internal as _pw
from opforge import errors as _errors
from opforge.autodiff import registry, state
from opforge.autodiff import sweep as sweep_mod
from opforge.autodiff.state import Meta

def _is_float(dtype):
    return dtype.is_floating


class _DifferentiableView:
    """What a gradient function sees under create_graph: the node, with
    outputs that are part of the graph (fresh aliases holding the node), so
    gradients computed from the outputs are differentiable too."""

    __slots__ = ("type", "inputs", "outputs", "get_attr", "name", "needs_input_grad")

    def __init__(self, node, needs_input_grad):
        self.type = self.name = node.type
        self.inputs = node.inputs
        self.get_attr = node.get_attr
        self.needs_input_grad = needs_input_grad
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


# Meta -> [(weakref to the tensor, hook or weakref to a bound method's target)].
# Weak keys and tensors: a hook never keeps its tensor alive (it receives it).
_post_hooks: weakref.WeakKeyDictionary[object, list] = weakref.WeakKeyDictionary()


class _HookHandle:
    __slots__ = ("_meta", "_entry")

    def __init__(self, meta, entry):
        self._meta, self._entry = weakref.ref(meta), entry

    def remove(self):
        meta = self._meta()
        hooks = _post_hooks.get(meta) if meta is not None else None
        if hooks and self._entry in hooks:
            hooks.remove(self._entry)
            if not hooks:
                del _post_hooks[meta]


def register_post_accumulate_grad_hook(t, hook):
    """Calls hook(t) each time backward has stored t's final gradient in
    ``t.grad`` (t: a leaf that requires grad), while the rest of the
    backward sweep still runs. A bound method is held weakly (its object
    going away removes the hook). Returns a handle whose remove() undoes it."""
    ag = t._ag
    if ag is None or not ag.requires_grad or ag.grad_fn is not None:
        raise _errors.InvalidArgumentError(
            "register_post_accumulate_grad_hook: the tensor must be a leaf that requires grad "
            "(of.tensor(..., requires_grad=True))")
    if not callable(hook):
        raise _errors.InvalidArgumentError(
            f"register_post_accumulate_grad_hook: hook must be callable, got {type(hook).__name__}")
    target = weakref.WeakMethod(hook) if hasattr(hook, "__self__") and hasattr(hook, "__func__") else hook
    entry = (weakref.ref(t), target, target is not hook)
    _post_hooks.setdefault(ag, []).append(entry)
    return _HookHandle(ag, entry)


def _run_post_hooks(meta):
    for tensor_ref, target, weak in list(_post_hooks.get(meta, ())):
        t, hook = tensor_ref(), (target() if weak else target)
        if t is not None and hook is not None:
            hook(t)


def _ones_like(t):
    from opforge import ops
    return ops.ones_like(t)


class _TapeAdapter(sweep_mod.Adapter):
    """The tape as the sweep reads it: values are Metas, nodes the C Nodes
    (their ``edges`` are the inputs' Metas, None where no gradient flows)."""

    strict = True

    def __init__(self, create_graph):
        self.create_graph = create_graph

    def producer(self, meta):
        return meta.grad_fn, meta.index

    def edges(self, node):
        return [(e, e is not None and e.requires_grad, x) for e, x in zip(node.edges, node.inputs)]

    def num_outputs(self, node):
        return len(node.outputs)

    def zeros(self, node, index):
        return _zeros(node.outputs[index])

    def view(self, node, needs_input_grad):
        if self.create_graph:
            return _DifferentiableView(node, needs_input_grad)
        return sweep_mod.with_needs(node, needs_input_grad)

    def prepare(self, grad, x):
        return grad if type(grad) is type(x) else _pw.to_tensor(grad, None)


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
    stored = set()

    def store(meta, g):
        if not create_graph:
            g = _pw.to_tensor(g, None)  # detached
        meta.grad = g if meta.grad is None else _accumulate(meta.grad, g, create_graph)

    def on_leaf(meta, g):  # a hooked leaf's gradient is final: store it and tell the hooks now
        if meta in _post_hooks:
            store(meta, g)
            stored.add(id(meta))
            _run_post_hooks(meta)

    hooked = capture is None and len(_post_hooks) > 0
    previous_mode = state.set_grad_enabled(create_graph)
    try:
        leaf_grads, captured = sweep_mod.sweep(_TapeAdapter(create_graph), list(zip(metas, grads)),
                                               capture if capture is not None else (),
                                               on_leaf if hooked else None)
    finally:
        state.set_grad_enabled(previous_mode)
    if capture is not None:
        return [captured[id(m)] for m in capture]
    for meta, g in leaf_grads.values():
        if id(meta) not in stored:
            store(meta, g)
    return None


def _accumulate(prev, g, create_graph):
    total = prev + g
    return total if create_graph else _pw.to_tensor(total, None)


def _zeros(t):
    from opforge import ops
    return ops.zeros_like(t)
