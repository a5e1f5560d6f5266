"""Installing a per-thread hook on the wrappers' one hook point.

Graph building and async execution push a hook with ``installed(hook)``;
the hook receives an ``OpCall`` (``op_type``, ``inputs`` and ``attrs`` by
name, ``run()``). This uses ``opforge._hooks.installed`` where the
dispatcher provides it, else adapts the older positional hook list.
"""

import contextlib
import threading

from opforge import _hooks
from opforge import _opinfo

if hasattr(_hooks, "installed"):
    installed = _hooks.installed
else:  # pragma: no cover - the positional dispatcher predates OpCall
    _local = threading.local()

    class _Call:
        __slots__ = ("op_type", "inputs", "attrs", "_entry", "_args")

        def __init__(self, op_type, entry, args):
            info = _opinfo.get(op_type)
            self.op_type, self._entry, self._args = op_type, entry, args
            self.inputs, self.attrs = {}, {}
            input_names = {a.name for a in info.inputs}
            for name, value in zip(info.params, args):
                (self.inputs if name in input_names else self.attrs)[name] = value

        def run(self):
            return self._entry(*self._args)

    def _dispatch(op_name, entry, args):
        stack = getattr(_local, "stack", None)
        if not stack:
            return entry(*args)
        return stack[-1](_Call(op_name, entry, args))

    @contextlib.contextmanager
    def installed(hook):
        if not hasattr(_local, "stack"):
            _local.stack = []
        if _dispatch not in _hooks.hooks:
            _hooks.hooks.append(_dispatch)
        _local.stack.append(hook)
        try:
            yield
        finally:
            _local.stack.remove(hook)
