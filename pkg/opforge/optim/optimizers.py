"""SGD (momentum, weight decay) and Adam over a list of parameter Tensors."""

import numpy as np

from opforge import errors as _errors
from opforge import ops as _ops
from opforge.tensor import tensor


def _zeros_like(p):
    return tensor(np.zeros(tuple(p.shape), dtype=p.dtype.name))


class Optimizer:
    def __init__(self, params, lr, name):
        self.params = list(params)
        if not self.params:
            raise _errors.InvalidArgumentError(f"{name}: got an empty parameter list")
        if not (lr >= 0):
            raise _errors.InvalidArgumentError(f"{name}: lr must be >= 0, got {lr}")
        self.lr = float(lr)

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


class SGD(Optimizer):
    """PyTorch's SGD: momentum, nesterov and (L2) weight decay."""

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(params, lr, "SGD")
        self.momentum, self.weight_decay, self.nesterov = float(momentum), float(weight_decay), bool(nesterov)
        self._accum = [_zeros_like(p) for p in self.params] if momentum else None

    def _update(self, i, p, g):
        if self._accum is None:
            _ops.apply_gradient_descent(p, g, lr=self.lr, weight_decay=self.weight_decay)
        else:
            _ops.apply_momentum(p, self._accum[i], g, lr=self.lr, momentum=self.momentum,
                                weight_decay=self.weight_decay, nesterov=self.nesterov)


class Adam(Optimizer):
    """PyTorch's Adam (bias-corrected; weight_decay is the L2 term added to the gradient)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, lr, "Adam")
        self.betas, self.eps, self.weight_decay = (float(betas[0]), float(betas[1])), float(eps), float(weight_decay)
        self._m = [_zeros_like(p) for p in self.params]
        self._v = [_zeros_like(p) for p in self.params]
        self._steps = [0] * len(self.params)

    def _update(self, i, p, g):
        self._steps[i] += 1
        _ops.apply_adam(p, self._m[i], self._v[i], g, step=self._steps[i], lr=self.lr, beta1=self.betas[0],
                        beta2=self.betas[1], epsilon=self.eps, weight_decay=self.weight_decay)
