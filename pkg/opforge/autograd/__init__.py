"""opforge.autograd: PyTorch's ``autograd.Function`` and JAX-style gradients over pytrees.

``Function`` lets Python define an op with its own backward; ``grad`` and
``value_and_grad`` (also ``of.grad``) differentiate with respect to dicts,
lists and tuples of tensors. The tape itself is opforge.autodiff.
"""

from opforge.autograd.function import Function, FunctionCtx
from opforge.autograd.pytree import grad, tree_flatten, tree_unflatten, value_and_grad

__all__ = ["Function", "FunctionCtx", "grad", "value_and_grad", "tree_flatten", "tree_unflatten"]
