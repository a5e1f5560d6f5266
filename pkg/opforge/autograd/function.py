"""autograd.Function: an op written in Python with its own backward (PyTorch's API).

    class Exp(of.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = of.exp(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, dy):
            (y,) = ctx.saved_tensors
            return dy * y

    y = Exp.apply(x)

How it reaches the tape: forward runs with recording off; each float output
then passes through a PythonFunction op (cpp/ops/function_ops.cc) whose
inputs are the arguments that need gradients. The tape records that op like
any other, and its gradient, registered here with @RegisterGradient, calls
``backward``. A Function with several outputs gets one node per output, and
its backward is called once per output that receives a gradient (the others
get zeros); backward must be linear in its gradients, as every correct one is.

Graph mode: ``apply`` on symbolic tensors builds the forward's ops and a
PythonFunction node per output; ``of.gradients`` calls the same registered
gradient, so backward adds its ops to the graph. The context lives as long
as the graph.
"""

import itertools
import threading
import weakref
from typing import Any

from opforge import errors as _errors
from opforge import ops as _ops
from opforge.autodiff import registry as _registry, state as _state

_lock = threading.Lock()
_keys = itertools.count(1)
_contexts: dict[int, list[Any]] = {}  # key -> [function class, ctx, grad positions, [(shape, dtype) per output], live nodes]


class FunctionCtx:
    """What forward leaves for backward: saved tensors and flags (PyTorch's ctx)."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.saved_tensors = tuple(tensors)

    def mark_non_differentiable(self, *outputs):
        self._non_differentiable = {id(o) for o in outputs}

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


def _requires(x):
    ag = getattr(x, "_ag", None)
    return ag is not None and ag.requires_grad


def _is_symbolic(x):
    return type(x).__name__ == "SymbolicTensor"


def _is_float(t):
    dtype = getattr(t, "dtype", None)
    return getattr(dtype, "name", "").startswith("float")


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)``; call ``apply``.

    backward returns one gradient per forward argument (None for those that
    need none, e.g. non-tensor arguments).
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("autograd.Function subclasses must define forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("autograd.Function subclasses must define backward(ctx, *grad_outputs)")

    @classmethod
    def apply(cls, *args, **kwargs):
        symbolic = any(_is_symbolic(a) for a in args)
        recording = _state.grad_enabled() and any(_requires(a) for a in args)
        ctx = FunctionCtx(tuple(_requires(a) or _is_symbolic(a) and _is_float(a) for a in args))
        if recording or symbolic:
            dtypes = {a.dtype.name for a, needs in zip(args, ctx.needs_input_grad) if needs}
            if len(dtypes) > 1:
                raise _errors.UnimplementedError(
                    f"{cls.__name__}.apply: the inputs that need gradients have dtypes {sorted(dtypes)}; "
                    "a Function's differentiable inputs must share one float dtype")
        previous = _state.set_grad_enabled(False)
        try:
            result = cls.forward(ctx, *args, **kwargs)
        finally:
            _state.set_grad_enabled(previous)
        if not (recording or symbolic):
            return result
        positions = [i for i, needs in enumerate(ctx.needs_input_grad) if needs]
        if not positions:
            return result
        xs = [args[i] for i in positions]
        several = isinstance(result, (tuple, list))
        outs = list(result) if several else [result]
        skip = getattr(ctx, "_non_differentiable", set())
        key = next(_keys)
        entry = [cls, ctx, positions, [(list(o.shape), o.dtype.name) if hasattr(o, "dtype") else None
                                       for o in outs], 0]
        graph = next((a.graph for a in args if _is_symbolic(a)), None)
        with _lock:
            # In a graph the context (which holds symbolic tensors of the graph) lives in the
            # graph, so it is freed with it; on the tape, until the call's last node dies.
            store = _contexts if graph is None else graph.__dict__.setdefault("_autograd_functions", {})
            store[key] = entry
        wrapped = []
        for j, o in enumerate(outs):
            if not _is_float(o) or id(o) in skip:
                wrapped.append(o)
                continue
            w = _ops.python_function(xs, o, key, j)
            node = getattr(w, "grad_fn", None)
            if node is not None and graph is None:
                entry[4] += 1
                weakref.finalize(node, _release, key)
            wrapped.append(w)
        if entry[4] == 0 and graph is None:
            _release(key, force=True)
        return type(result)(wrapped) if several else wrapped[0]


def _release(key, force=False):
    with _lock:
        entry = _contexts.get(key)
        if entry is None:
            return
        entry[4] -= 1
        if force or entry[4] <= 0:
            del _contexts[key]


@_registry.RegisterGradient("PythonFunction")
def _python_function_grad(op, dy):
    key, index = op.get_attr("key"), op.get_attr("index")
    store = getattr(getattr(op, "graph", None), "_autograd_functions", None)
    with _lock:
        entry = (_contexts if store is None else store).get(key)
    if entry is None:
        raise _errors.InternalError(f"PythonFunction: the context of call {key} was released")
    cls, ctx, positions, out_specs = entry[:4]
    grads = []
    for j, spec in enumerate(out_specs):
        if j == index:
            grads.append(dy)
        elif spec is None or not ctx.materialize_grads:
            grads.append(None)
        else:
            grads.append(_ops.fill(spec[0], _zero(spec[1])))
    result = cls.backward(ctx, *grads)
    if not isinstance(result, (tuple, list)):
        result = (result,)
    n_args = len(ctx.needs_input_grad)
    if len(result) != n_args:
        raise _errors.InvalidArgumentError(
            f"{cls.__name__}.backward returned {len(result)} gradients; forward took {n_args} arguments")
    xs = op.inputs[:-1]
    out = []
    for p, x in zip(positions, xs):
        g = result[p]
        out.append(_ops.zeros_like(x) if g is None else g)
    return out + [None]


def _zero(dtype):
    import numpy as np
    return np.zeros((), dtype=dtype)
