"""Gradient functions by op type: declared in C++ (rendered by codegen into
``gen_<group>_grads`` modules, or at load time for op libraries) or
registered in Python with ``RegisterGradient``, which takes precedence."""

import importlib
import threading
from collections.abc import Callable
from typing import Any

from opforge import errors as _errors

_lock = threading.Lock()
_python: dict[str, Callable[..., Any]] = {}    # op type -> fn, from RegisterGradient
_declared: dict[str, Callable[..., Any]] = {}  # op type -> fn, from the C++ declarations
_no_gradient: set[str] = set()                 # op types declared .NoGradient()
_loaded = False


def _load_builtin():
    # The generated gradient modules import the op wrappers: load them on
    # first use, not at `import opforge`.
    global _loaded
    with _lock:
        if _loaded:
            return
        from opforge import ops
        for group in ops.GROUPS:
            module = importlib.import_module(f"opforge.ops.gen_{group}_grads")
            _declared.update(module.GRADIENTS)
            _no_gradient.update(module.NO_GRADIENT)
        _loaded = True


def add_declared(gradients, no_gradient):
    """Adds the gradients rendered for an op library's ops."""
    _load_builtin()
    with _lock:
        _declared.update(gradients)
        _no_gradient.update(no_gradient)


def has_no_gradient(op_type):
    if not _loaded:
        _load_builtin()
    return op_type in _no_gradient and op_type not in _python


def lookup(op_type):
    fn = _python.get(op_type)
    if fn is not None:
        return fn
    if not _loaded:
        _load_builtin()
    fn = _declared.get(op_type)
    if fn is None:
        raise _errors.NotFoundError(
            f"{op_type}: no gradient is registered for this op, so it cannot be differentiated. Declare one "
            f"beside its REGISTER_OP with .Gradient(\"x = ...\") (or .NoGradient()), or register one in Python "
            f"with @opforge.RegisterGradient({op_type!r}) over def grad(op, *output_grads)")
    return fn


class RegisterGradient:
    """Decorator registering the gradient function of an op type in Python.

        @of.RegisterGradient("ZeroOut")
        def _zero_out_grad(op, grad):
            return [of.zeros_like(op.inputs[0])]

    The function receives the recorded op (``op.type``, ``op.inputs``,
    ``op.outputs``, ``op.get_attr(name)``) and one gradient per output, and
    returns one gradient per input (None for none). It replaces a gradient
    declared in C++; registering one op type twice is an AlreadyExistsError.
    """

    def __init__(self, op_type):
        if not isinstance(op_type, str):
            raise TypeError("RegisterGradient takes the op type name, e.g. 'ZeroOut'")
        self._op_type = op_type

    def __call__(self, fn):
        with _lock:
            if self._op_type in _python:
                raise _errors.AlreadyExistsError(
                    f"{self._op_type}: a Python gradient is already registered for this op")
            _python[self._op_type] = fn
        return fn
