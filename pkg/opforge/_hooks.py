"""Tracing hooks: user functions that see every op call of a thread.

Every generated wrapper makes one call into C++, which binds the call and
hands it to this thread's mode stack (cpp/framework/mode_stack.h): eager,
async, or a hook installed here. ``installed(hook)`` pushes a hook entry on
the calling thread's stack; the innermost entry sees a call first. A hook
is ``hook(call) -> result``: it may build the result itself or delegate with
``call.run()``, which passes the call to the entry below it (another hook,
async mode, and at the bottom eager execution).

A hook is a Python function the user wrote, so it is the one mode that
crosses back into Python; the built-in modes never do. Gradient recording is
no hook either: a call whose input requires a gradient is recorded by the
eager execution in C++ (swig/py_autograd.cc), and ``call.record`` is already
true when a hook sees such a call (async mode then runs it eagerly).
"""

import contextlib
import os
import threading

from opforge import _pywrap_internal as _pw

# Every hook installed in any thread (informational: the wrappers do not
# read it; each thread's own stack is in C++). Mutated in place under _lock.
hooks: list = []
_lock = threading.Lock()


def push(hook):
    """Installs ``hook`` on this thread's mode stack (see ``installed``)."""
    _pw.mode_push("hook", hook)
    with _lock:
        hooks.append(hook)


def pop(hook):
    """Removes ``hook``, which must be this thread's innermost mode."""
    _pw.mode_pop("hook", hook)  # ValueError unless innermost, on this thread
    with _lock:
        for i in range(len(hooks) - 1, -1, -1):
            if hooks[i] is hook:
                del hooks[i]
                break


@contextlib.contextmanager
def installed(hook):
    """Routes every op this thread calls through ``hook`` while active."""
    push(hook)
    try:
        yield hook
    finally:
        pop(hook)


_signatures: dict = {}


class Signature:
    """An op's parameters: the wrappers pass inputs and attrs interleaved in
    declaration order; ``input_pos`` and ``attr_pos`` find them there."""

    __slots__ = ("inputs", "is_list", "attrs", "input_pos", "attr_pos")

    def __init__(self, op_type):
        self.inputs, self.is_list, self.attrs, params = _pw.op_signature(op_type)
        self.input_pos = tuple(params.index(n) for n in self.inputs)
        self.attr_pos = tuple(params.index(n) for n in self.attrs)


def signature(op_type):
    sig = _signatures.get(op_type)
    if sig is None:
        sig = _signatures[op_type] = Signature(op_type)
    return sig


class OpCall:
    """One op call as a hook sees it (built by the C++ call path).

    ``inputs`` and ``attrs`` are dicts by argument name, values as the caller
    passed them (a list argument as a list). ``record`` is true when the
    gradient tape records the call; a hook may set it to ask for the call's
    facts: after ``run()`` executed the op with ``record`` set,
    ``flat_inputs`` (the converted input Tensors, list arguments flattened;
    ``input_tensors`` has them by name), ``completed_attrs`` (inferred type
    and length attrs and defaults included) and ``outputs`` (a tuple of
    Tensors) are set too.
    """

    __slots__ = ("op_type", "args", "record", "_level", "flat_inputs", "completed_attrs", "outputs")

    def __init__(self, op_type, args, level, record):
        self.op_type = op_type
        self.args = args  # positional, in parameter order
        self._level = level  # the mode entries below the hook that has the call
        self.record = record
        self.flat_inputs = self.completed_attrs = self.outputs = None

    @property
    def inputs(self):
        sig = signature(self.op_type)
        return {n: self.args[p] for n, p in zip(sig.inputs, sig.input_pos)}

    @property
    def attrs(self):
        sig = signature(self.op_type)
        return {n: self.args[p] for n, p in zip(sig.attrs, sig.attr_pos)}

    def run(self):
        """Passes the call to the mode entry below the hook; eager execution at the bottom."""
        return _pw.op_call_run(self, False)

    def execute(self):
        """Executes the op eagerly now, whatever modes are below, recording its facts."""
        self.record = True
        return _pw.op_call_run(self, True)

    @property
    def input_tensors(self):
        """The converted inputs by argument name (list arguments as lists)."""
        sig = signature(self.op_type)
        tensors, slot, flat = {}, 0, self.flat_inputs
        for name, listed, pos in zip(sig.inputs, sig.is_list, sig.input_pos):
            count = len(self.args[pos]) if listed else 1
            tensors[name] = list(flat[slot:slot + count]) if listed else flat[slot]
            slot += count
        return tensors

    def __repr__(self):
        return f"OpCall({self.op_type}, inputs={self.inputs!r}, attrs={self.attrs!r})"


# The package's directories: frames there are not "the caller" of an op
# (errors and async submits name the user's file:line). The extension and
# the generated wrappers may live apart from the sources (an editable build).
def _package_dirs():
    dirs = {os.path.dirname(os.path.abspath(p)) for p in (__file__, _pw.__file__)}
    return tuple(sorted(d + os.sep for d in dirs))


_pw.hooks_init(OpCall, _package_dirs())
