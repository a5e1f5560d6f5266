"""SGD (momentum, weight decay) and Adam over a list of parameter Tensors
(or eager of.Variables), with ``minimize`` for graphs and eager mode."""

import numpy as np

from opforge import _write_generation
from opforge import errors as _errors
from opforge import ops as _ops
from opforge.tensor import tensor


def _zeros_like(p):
    # A slot from opforge's allocator (Fill has no input to record on the
    # tape), which puts blocks of 1 MiB and more on huge pages: numpy's
    # zeros were on 4 KiB pages (below its 4 MiB hugepage threshold, or
    # not at all), and Adam's m and v, coming back after the products of a
    # training step, cost a page walk per 4 KiB (784-1024-1024-10: Adam's
    # share of the step 1.9 -> 1.5 ms; docs/gemm.md).
    return _ops.fill(list(p.shape), np.zeros((), dtype=p.dtype.name))


def _leaf(p):
    from opforge.variables import _EagerVariable
    return p._value if isinstance(p, _EagerVariable) else p


class Optimizer:
    """`params`: Tensors or eager Variables to update with step(); None for
    an optimizer used only through minimize() (TensorFlow 1 style)."""

    def __init__(self, params, lr, name):
        self.params = [] if params is None else [_leaf(p) for p in params]
        if params is not None and not self.params:
            raise _errors.InvalidArgumentError(f"{name}: got an empty parameter list")
        if lr is None or not (lr >= 0):
            raise _errors.InvalidArgumentError(f"{name}: lr must be >= 0, got {lr}")
        self.lr = float(lr)
        self._graph_slots = {}  # (graph, variable, kind) -> slot variable (minimize in graphs)

    def minimize(self, loss, var_list=None, name=None):
        """One training step. In a graph (`loss` a graph tensor): adds the
        gradient and update nodes and returns the one op to run each step
        (var_list: default every trainable variable of the graph). In eager
        mode (`loss` a callable): computes it on the tape, updates var_list
        (default: params, else every trainable eager Variable) and returns the loss."""
        from opforge.graph._graph import SymbolicTensor
        from opforge.optim import minimize as _m
        if isinstance(loss, SymbolicTensor):
            return _m.minimize_graph(self, loss, var_list, name)
        return _m.minimize_eager(self, loss, var_list)

    def _step_leaves(self, leaves):
        """step() over `leaves` (which may differ from params): slots keyed by leaf."""
        index = {id(p): i for i, p in enumerate(self.params)}
        extra = [p for p in leaves if id(p) not in index]
        if extra:
            self._add_params(extra)
            index = {id(p): i for i, p in enumerate(self.params)}
        from opforge.nn.layer import no_grad
        with no_grad():
            for p in leaves:
                if p.grad is not None:
                    self._update(index[id(p)], p, p.grad)
        _write_generation.bump()  # the parameters changed in place

    def _add_params(self, extra):
        self.params.extend(extra)

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def _grads(self):
        """(index, param, grad) for the parameters that have a gradient."""
        for i, p in enumerate(self.params):
            g = getattr(p, "grad", None)
            if g is not None:
                yield i, p, g

    def step(self, grads=None):
        """One update. `grads` (a list matching params) overrides the .grad attributes."""
        items = self._grads() if grads is None else (
            (i, p, g) for i, (p, g) in enumerate(zip(self.params, grads)) if g is not None)
        from opforge.nn.layer import no_grad
        with no_grad():
            for i, p, g in items:
                self._update(i, p, g)
        _write_generation.bump()  # the parameters changed in place


class SGD(Optimizer):
    """PyTorch's SGD: momentum, nesterov and (L2) weight decay."""

    def __init__(self, params=None, lr=None, momentum=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(params, lr, "SGD")
        self.momentum, self.weight_decay, self.nesterov = float(momentum), float(weight_decay), bool(nesterov)
        self._accum = [_zeros_like(p) for p in self.params] if momentum else None

    def _add_params(self, extra):
        super()._add_params(extra)
        if self._accum is not None:
            self._accum.extend(_zeros_like(p) for p in extra)

    def _graph_updates(self, graph, pairs):
        from opforge.ops import raw_ops
        from opforge.optim.minimize import _slot
        out = []
        for v, g in pairs:
            if self.momentum:
                acc = _slot(self, graph, v, "momentum")
                out.append(raw_ops.resource_apply_momentum(
                    grad=g, var=v.name, accum=acc.name, lr=self.lr, momentum=self.momentum,
                    weight_decay=self.weight_decay, nesterov=self.nesterov))
            else:
                out.append(raw_ops.resource_apply_gradient_descent(grad=g, var=v.name, lr=self.lr,
                                                                   weight_decay=self.weight_decay))
        return out

    def _update(self, i, p, g):
        if self._accum is None:
            _ops.apply_gradient_descent(p, g, lr=self.lr, weight_decay=self.weight_decay)
        else:
            _ops.apply_momentum(p, self._accum[i], g, lr=self.lr, momentum=self.momentum,
                                weight_decay=self.weight_decay, nesterov=self.nesterov)


class Adam(Optimizer):
    """PyTorch's Adam (bias-corrected; weight_decay is the L2 term added to the gradient)."""

    def __init__(self, params=None, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, lr, "Adam")
        self.betas, self.eps, self.weight_decay = (float(betas[0]), float(betas[1])), float(eps), float(weight_decay)
        self._m = [_zeros_like(p) for p in self.params]
        self._v = [_zeros_like(p) for p in self.params]
        self._steps = [0] * len(self.params)

    def _add_params(self, extra):
        super()._add_params(extra)
        self._m.extend(_zeros_like(p) for p in extra)
        self._v.extend(_zeros_like(p) for p in extra)
        self._steps.extend(0 for _ in extra)

    def _graph_updates(self, graph, pairs):
        from opforge.ops import raw_ops
        from opforge.optim.minimize import _slot, _step_counter
        step = _step_counter(self, graph).assign_add(np.int64(1))  # this step's number, 1-based
        out = []
        for v, g in pairs:
            m, s = _slot(self, graph, v, "m"), _slot(self, graph, v, "v")
            out.append(raw_ops.resource_apply_adam(
                grad=g, step=step, var=v.name, m=m.name, v=s.name, lr=self.lr, beta1=self.betas[0], beta2=self.betas[1],
                epsilon=self.eps, weight_decay=self.weight_decay))
        return out

    def _update(self, i, p, g):
        self._steps[i] += 1
        _ops.apply_adam(p, self._m[i], self._v[i], g, step=self._steps[i], lr=self.lr, beta1=self.betas[0],
                        beta2=self.betas[1], epsilon=self.eps, weight_decay=self.weight_decay)
