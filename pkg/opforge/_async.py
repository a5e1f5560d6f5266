"""Async execution: ops return pending Tensors at once; reads wait.

In ``with opforge.execution_mode("async"):`` every op call (built-in, from
load_op_library, Tensor operators) checks its dtypes, attrs and shapes at
the call site (those errors raise synchronously), then is queued on the C++
engine and returns Tensors whose shape and dtype are known but whose value
is pending. Ops on pending tensors chain without waiting; reading a value
(numpy(), repr, str, __array__, the buffer protocol, item, bool, float)
waits with the GIL released. A kernel error is raised by the first read of
the failed tensor or of anything computed from it, and by flush() if no
read saw it, naming the op and the Python file:line that submitted it.

Borrowed numpy inputs: numpy memory passed to an async op (an array, or a
Tensor that borrows one) is copied at submit (C++, py_async.cc), so writing
to the array after the call cannot change the result, and pool threads never
need the GIL to let go of an array. Tensors that opforge computed are not
copied: don't write through their numpy() view while ops reading them are
queued. ``OPFORGE_EXECUTION=sync`` makes every mode
synchronous (for debugging).
"""

import atexit
import contextlib
import threading

from opforge import _pywrap_internal as _pw

_MODES = ("async", "sync")
_local = threading.local()


# Async mode is an entry of this thread's mode stack in C++ (py_call.cc,
# py_async.cc): a call is bound there (partner dtypes, copies of numpy
# memory, dtype, attr and shape errors at the call site) and queued, naming
# the caller's file:line; one the gradient tape records, or any call under
# OPFORGE_EXECUTION=sync, runs eagerly. A "sync" block pushes an eager entry.
def _check(mode):
    if mode not in _MODES:
        raise ValueError(f"execution mode must be 'async' or 'sync', not {mode!r}")


def _entry(mode):
    return "async" if mode == "async" else "eager"


@contextlib.contextmanager
def execution_mode(mode):
    """Runs ops of this thread in `mode` ("async" or "sync") inside the block."""
    _check(mode)
    _pw.mode_push(_entry(mode), None)
    try:
        yield
    finally:
        _pw.mode_pop(_entry(mode), None)


def set_execution_mode(mode):
    """Sets this thread's execution mode until changed ("async" or "sync")."""
    _check(mode)
    current = getattr(_local, "mode_cm", None)
    if current is not None:
        current.__exit__(None, None, None)
        _local.mode_cm = None
    if mode == "async":
        cm = execution_mode("async")
        cm.__enter__()
        _local.mode_cm = cm


def flush():
    """Waits for every queued op; raises the first kernel error no read saw."""
    _pw.async_flush()


def queue_size():
    """Ops submitted and not yet started."""
    return _pw.async_queue_size()


def pending():
    """Ops queued or running."""
    return _pw.async_pending()


def is_pending(tensor):
    """True while `tensor`'s value is still being computed."""
    return _pw.is_pending(tensor)


# Interpreter exit with work queued: wait for it (kernels finish; nothing is
# torn down under them), dropping errors nobody can read any more.
atexit.register(_pw.async_drain)
