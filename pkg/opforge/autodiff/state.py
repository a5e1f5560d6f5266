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
import weakref

from opforge import _hooks

_mode = threading.local()
_lock = threading.RLock()  # RLock: Meta.__del__ may run while it is held
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
        before = _live
        _live += delta
        if before == 0 and _live > 0:
            _hooks.set_recorder(_recorder)
        elif before > 0 and _live == 0:
            _hooks.set_recorder(None)


class Meta:
    """What autograd knows of one tensor.

    ``grad_fn`` is the Node that computed it (None for leaves); the aliases
    of outputs that a Node keeps for its gradient refer to it weakly, so a
    tensor, its Node and the Node's saved outputs form no reference cycle
    (Tensor is not tracked by the cyclic GC).
    """

    __slots__ = ("requires_grad", "grad", "_fn", "index", "__weakref__")

    def __init__(self, grad_fn=None, index=0, weak=False):
        self.requires_grad = True
        self.grad = None
        self._fn = weakref.ref(grad_fn) if weak else grad_fn
        self.index = index  # which output of grad_fn
        _count(1)

    @property
    def grad_fn(self):
        fn = self._fn
        return fn() if type(fn) is weakref.ref else fn

    def __del__(self):
        try:
            _count(-1)
        except Exception:  # interpreter shutdown
            pass
