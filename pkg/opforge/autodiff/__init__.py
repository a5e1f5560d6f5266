"""Reverse-mode automatic differentiation on opforge's op hook.

Gradients are declared beside each op in C++ and rendered by codegen; the
recorder (tape.py) runs on the wrappers' hook while tensors that require
gradients exist.
"""

from opforge.autodiff.functional import backward, enable_grad, grad, no_grad, value_and_grad
from opforge.autodiff.registry import RegisterGradient
from opforge.autodiff.tape import make_leaf, set_grad, set_requires_grad

__all__ = ["RegisterGradient", "backward", "enable_grad", "grad", "make_leaf", "no_grad",
           "set_grad", "set_requires_grad", "value_and_grad"]
