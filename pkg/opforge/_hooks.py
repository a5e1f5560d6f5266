"""The one hook point of every generated wrapper.

A wrapper runs ``if not hooks: return <entry point>(...)``: while ``hooks`` is
empty, eager execution costs one branch. Graph building, gradient recording or
tracing append a callable here; it receives (op_name, entry_point, args) and
returns the result.
"""

hooks = []


def dispatch(op_name, entry_point, args):
    # The most recently pushed hook wins; it may call entry_point itself.
    return hooks[-1](op_name, entry_point, args)
