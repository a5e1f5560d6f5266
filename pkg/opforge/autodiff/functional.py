"""grad, value_and_grad and no_grad."""

import contextlib
import functools

from opforge import _pywrap_internal as _pw
from opforge import errors as _errors
from opforge.autodiff import state, tape


@contextlib.contextmanager
def no_grad():
    """Ops in this block (this thread only) are not recorded."""
    previous = state.set_grad_enabled(False)
    try:
        yield
    finally:
        state.set_grad_enabled(previous)


@contextlib.contextmanager
def enable_grad():
    previous = state.set_grad_enabled(True)
    try:
        yield
    finally:
        state.set_grad_enabled(previous)


def backward(t, grad=None, create_graph=False):
    if grad is None:
        if t.size != 1:
            raise _errors.InvalidArgumentError(
                f"backward: the tensor has shape {t.shape}; a gradient can be created implicitly only for "
                "a single element: pass grad=")
        grad = tape._ones_like(t)
    else:
        grad = _pw.to_tensor(grad, t.dtype) if type(grad) is not type(t) else grad
        if tuple(grad.shape) != tuple(t.shape):
            raise _errors.InvalidArgumentError(
                f"backward: grad has shape {grad.shape} but the tensor has shape {t.shape}")
    tape.backward([t], [grad], create_graph)


def _argnums(argnums, n):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for i in nums:
        if not isinstance(i, int) or not -n <= i < n:
            raise _errors.InvalidArgumentError(f"grad: argnums {argnums!r} out of range for {n} arguments")
    return single, tuple(i % n for i in nums)


def value_and_grad(fn, argnums=0):
    """Returns a function computing ``(fn(*args), d fn / d args[argnums])``.

    ``fn`` must return a single-element float Tensor. Gradients do not touch
    any ``.grad``; nested calls (``grad(grad(f))``) give higher derivatives.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        single, nums = _argnums(argnums, len(args))
        args = list(args)
        metas = []
        nested = False
        from opforge import ops
        for i in nums:
            a = args[i]
            if getattr(a, "_ag", None) is not None and a.requires_grad and state.grad_enabled():
                a = ops.identity(a)  # differentiable w.r.t. the caller's graph too
                nested = True
            else:
                a = tape.make_leaf(_pw.to_tensor(a, None))
            args[i] = a
            metas.append(a._ag)
        with enable_grad():
            out = fn(*args, **kwargs)
        if type(out) is not type(args[nums[0]]) or out.size != 1:
            raise _errors.InvalidArgumentError(
                "grad: the function must return a single-element opforge Tensor, got "
                + (f"shape {out.shape}" if hasattr(out, "shape") else type(out).__name__))
        if not out.requires_grad:
            grads = [None] * len(metas)
        else:
            grads = tape.backward([out], [tape._ones_like(out)], create_graph=nested, capture=metas)
        grads = [ops.zeros_like(args[i]) if g is None else g for i, g in zip(nums, grads)]
        return out, (grads[0] if single else tuple(grads))

    return wrapper


def grad(fn, argnums=0):
    """Returns a function computing the gradient of ``fn`` w.r.t. ``args[argnums]``."""
    vg = value_and_grad(fn, argnums)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return vg(*args, **kwargs)[1]

    return wrapper
