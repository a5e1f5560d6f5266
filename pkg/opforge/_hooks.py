"""The one hook point of every generated wrapper.

A wrapper runs ``if not hooks: return <entry point>(...)``: while ``hooks`` is
empty, eager execution costs one branch. Otherwise it calls ``dispatch``,
which hands a structured ``OpCall`` to this thread's stack of hooks
(``installed(hook)``): graph building, async execution, tracing. The
innermost installed hook sees the call first.

Gradient recording needs no hook: the op call itself checks its inputs'
autograd state in C (swig/py_autograd.cc). While this thread has hooks
installed, the gradient recorder (``opforge.autodiff``) joins the front of
the chain, to mark calls that must be recorded (``record``), so a hook that
would defer them (async) runs them eagerly instead.

A hook is ``hook(call) -> result``. It may build the result itself (a graph
node) or delegate with ``call.run()``, which passes the call to the next hook
down the chain and finally executes it eagerly.
"""

import contextlib
import threading

from opforge import _pywrap_internal as _pw

# One entry per active hook in any thread: the wrappers' fast-path test.
# Mutated in place under _lock.
hooks = []
_lock = threading.Lock()
_local = threading.local()
_recorder = None  # set by opforge.autodiff once imported


def _thread_stack():
    try:
        return _local.stack
    except AttributeError:
        _local.stack = stack = []
        return stack


def _remove(items, item):
    for i in range(len(items) - 1, -1, -1):
        if items[i] is item:
            del items[i]
            return
    raise ValueError("hook is not installed")


def push(hook):
    """Installs ``hook`` on this thread's stack (see ``installed``)."""
    _thread_stack().append(hook)
    with _lock:
        hooks.append(hook)


def pop(hook):
    """Removes ``hook``, which must be this thread's innermost hook."""
    stack = _thread_stack()
    if not stack or stack[-1] is not hook:
        raise ValueError("hooks must be removed innermost first, on the thread that installed them")
    stack.pop()
    with _lock:
        _remove(hooks, hook)


@contextlib.contextmanager
def installed(hook):
    """Routes every op this thread calls through ``hook`` while active."""
    push(hook)
    try:
        yield hook
    finally:
        pop(hook)


def set_recorder(recorder):
    """Sets the recorder that leads every hook chain (None: none)."""
    global _recorder
    _recorder = recorder


_signatures = {}


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
    """One op call as the hooks see it.

    ``inputs`` and ``attrs`` are dicts by argument name, values as the caller
    passed them (a list argument as a list). After ``run()`` executed the op
    with ``record`` set, ``flat_inputs`` (the converted input Tensors, list
    arguments flattened; ``input_tensors`` has them by name),
    ``completed_attrs`` (inferred type and length attrs and defaults
    included) and ``outputs`` (a tuple of Tensors) are set too; a hook that
    executes a call itself (async mode) sets them likewise.
    """

    __slots__ = ("op_type", "entry_point", "args", "record", "_chain", "_next",
                 "flat_inputs", "completed_attrs", "outputs")

    def __init__(self, op_type, entry_point, args, chain):
        self.op_type = op_type
        self.entry_point = entry_point
        self.args = args  # positional, in parameter order
        self._chain = chain
        self._next = 0
        self.record = False  # a hook wants input_tensors etc. after run()
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
        """Passes the call down the chain; the last link executes it eagerly
        (through ``execute()`` when a hook set ``record``)."""
        i = self._next
        if i < len(self._chain):
            self._next = i + 1
            try:
                return self._chain[i](self)
            finally:
                self._next = i
        return self.execute() if self.record else self.entry_point(*self.args)

    def execute(self):
        """Executes the op now, recording its converted inputs, attrs and outputs."""
        sig = signature(self.op_type)
        args = self.args
        result, self.flat_inputs, self.completed_attrs = _pw.execute_record(
            self.op_type, tuple([args[p] for p in sig.input_pos]), tuple([args[p] for p in sig.attr_pos]))
        self.outputs = result if type(result) is tuple else (result,)
        return result

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


def dispatch(op_type, entry_point, args):
    # This thread's hooks, innermost first, after the recorder; with none
    # (another thread's hooks made the wrappers call here), the call runs
    # as on the fast path.
    stack = getattr(_local, "stack", None)
    if not stack:
        return entry_point(*args)
    recorder = _recorder
    chain = ((recorder,) if recorder is not None else ()) + tuple(reversed(stack))
    return OpCall(op_type, entry_point, args, chain).run()
