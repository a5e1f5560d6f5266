"""Analytic (reverse-mode) against numeric (central difference) Jacobians,
like ``tf.test.compute_gradient``."""

import numpy as np

from opforge import _pywrap_internal as _pw
from opforge.autodiff import state, tape


def _name(fn):
    return getattr(fn, "__name__", None) or type(fn).__name__


def _evaluate(fn, arrays):
    with state_no_grad():
        out = fn(*[_pw.to_tensor(a, None) for a in arrays])
    return np.array(out.numpy(), dtype=np.float64)


class state_no_grad:
    def __enter__(self):
        self.previous = state.set_grad_enabled(False)

    def __exit__(self, *exc):
        state.set_grad_enabled(self.previous)


def compute_gradient(fn, inputs, delta=1e-3):
    """Returns ``(theoretical_jacobians, numerical_jacobians)``: two lists,
    one 2-d array per input in each, as ``tf.test.compute_gradient`` does.

    ``fn`` maps Tensors to one Tensor; ``inputs`` are float arrays (or
    values numpy converts to them). Each Jacobian has shape
    ``(output size, input size)``: row k is d out.flat[k] / d input.
    The theoretical one comes from the backward pass, the numerical one
    from central differences of step ``delta``.
    """
    arrays = [np.array(x) for x in inputs]
    for i, a in enumerate(arrays):
        if a.dtype.kind != "f":
            raise TypeError(f"compute_gradient: input {i} has dtype {a.dtype}; gradients need float inputs")
    leaves = [tape.make_leaf(_pw.to_tensor(a, None)) for a in arrays]
    previous = state.set_grad_enabled(True)
    try:
        out = fn(*leaves)
    finally:
        state.set_grad_enabled(previous)
    size = out.size
    analytic = [np.zeros((size, a.size)) for a in arrays]
    if out.requires_grad:
        seed = np.zeros(out.shape, dtype=out.dtype.as_numpy_dtype)
        for k in range(size):
            seed.flat[:] = 0
            seed.flat[k] = 1
            grads = tape.backward([out], [_pw.to_tensor(seed.copy(), None)], capture=[x._ag for x in leaves])
            for i, g in enumerate(grads):
                if g is not None:
                    analytic[i][k] = np.asarray(g.numpy(), dtype=np.float64).reshape(-1)
    numeric = []
    for i, a in enumerate(arrays):
        jac = np.zeros((size, a.size))
        for j in range(a.size):
            plus, minus = [x.copy() for x in arrays], [x.copy() for x in arrays]
            plus[i].flat[j] += delta
            minus[i].flat[j] -= delta
            jac[:, j] = ((_evaluate(fn, plus) - _evaluate(fn, minus)) / (2 * delta)).reshape(-1)
        numeric.append(jac)
    return analytic, numeric


def check_gradients(fn, inputs, atol=1e-5, rtol=1e-4, delta=1e-3):
    """Raises AssertionError naming ``fn`` and the input whose analytic and
    numeric Jacobians differ by more than ``atol + rtol * |numeric|``."""
    theoretical, numerical = compute_gradient(fn, inputs, delta)
    for i, (analytic, numeric) in enumerate(zip(theoretical, numerical)):
        err = np.abs(analytic - numeric)
        bad = err > atol + rtol * np.abs(numeric)
        if bad.any():
            k, j = np.unravel_index(np.argmax(np.where(bad, err, -1)), err.shape)
            raise AssertionError(
                f"gradient of {_name(fn)} w.r.t. input {i} is wrong: d out[{k}] / d in[{j}] is "
                f"{analytic[k, j]!r} analytically but {numeric[k, j]!r} numerically "
                f"({int(bad.sum())} of {bad.size} Jacobian entries off; max error {err.max():.3g})")
