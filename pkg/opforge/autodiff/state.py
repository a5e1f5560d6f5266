"""Per-tensor autograd state and the per-thread gradient mode.

A Tensor's C part has one slot, ``_ag``, that holds a ``Meta`` or None. The
gradient graph hangs off tensors (PyTorch's design), so no global tape can
capture another thread's work: an op is recorded when one of its inputs
requires a gradient and gradient mode is on in the calling thread.

While any Meta that requires grad is alive, the recorder is installed on
the wrappers' hook (opforge/_hooks.py); once none is, the hook is removed
and ops take the one-branch fast path again.
"""

import threading

from opforge import _hooks

_mode = threading.local()
_lock = threading.Lock()  # held only around int updates, which trigger no GC
_live = 0
_recorder = None  # set by tape.py


def grad_enabled():
    return getattr(_mode, "enabled", True)


def set_grad_enabled(enabled):
    previous = grad_enabled()
    _mode.enabled = bool(enabled)
    return previous


def _count(delta):
    global _live
    with _lock:
        _live += delta
        live = _live
    if live == delta or live == 0:  # a transition: 0 -> 1 or 1 -> 0
        with _lock:  # decide on the current count; another thread may have moved it
            _hooks.set_recorder(_recorder if _live > 0 else None)


class Meta:
    """What autograd knows of one tensor: whether it requires a gradient,
    its accumulated ``grad``, and the Node that computed it (``grad_fn``,
    None for leaves) with the output ``index``."""

    __slots__ = ("requires_grad", "grad", "grad_fn", "index", "__weakref__")

    def __init__(self, grad_fn=None, index=0):
        self.requires_grad = True
        self.grad = None
        self.grad_fn = grad_fn
        self.index = index
        _count(1)

    def __del__(self):
        try:
            _count(-1)
        except Exception:  # interpreter shutdown
            pass
