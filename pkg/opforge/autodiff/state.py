"""Per-tensor autograd state and the per-thread gradient mode.

A Tensor's C part has one slot, ``_ag``, that holds a ``Meta`` or None. The
gradient graph hangs off tensors (PyTorch's design), so no global tape can
capture another thread's work: an op is recorded when one of its inputs
requires a gradient and gradient mode is on in the calling thread.

The check and the recording are in C (swig/py_autograd.cc), in every op
call: ``Meta`` and ``Node`` are C types, and gradient mode is a C
thread-local. No hook is installed for recording, so the wrappers keep their
one-branch fast path while tensors require gradients.
"""

from opforge import _pywrap_internal as _pw
from opforge.autodiff import registry

# Meta(grad_fn=None, index=0): requires_grad, grad, grad_fn, index.
# RegisterGradient's dict is shared with C: a Python gradient makes an op
# declared NoGradient recorded again.
Meta, Node = _pw.autograd_init(registry._python)

grad_enabled = _pw.grad_enabled
set_grad_enabled = _pw.set_grad_enabled  # returns the previous mode
