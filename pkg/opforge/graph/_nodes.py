"""Reading a node's declaration-level facts and adding a node from them.

A node's inputs are stored flattened (a list arg takes N slots); saving,
loading and rewriting graphs need them back by argument, and the attrs a
caller gives (not the inferred T and N). Both come from the registry.
"""

from opforge import errors as _errors


_by_name: tuple = (None, {})  # (the registry read, its ops by name)


def _ops():
    global _by_name
    from opforge import _opinfo  # on first use: the schema model costs `import opforge` 10 ms
    reg = _opinfo.registry()
    if _by_name[0] is not reg:
        _by_name = (reg, {op.name: op for op in reg.ops})
    return _by_name[1]


def op_def(op_type):
    """The registry's declaration of `op_type` (built-in or from a loaded library)."""
    ops = _ops()
    if op_type not in ops:
        from opforge import _opinfo
        _opinfo.refresh()  # a library loaded since the registry was read
        ops = _ops()
    op = ops.get(op_type)
    if op is None:
        raise _errors.NotFoundError(f"no op named {op_type!r} is registered (a library not loaded?)")
    return op


def all_attrs(op):
    """Every attr of an Operation by name, inferred ones (T, N) included."""
    from opforge import _pywrap_internal as _pw
    return dict(_pw.graph_node_attrs(op.graph._handle, op._id))


def user_attrs(op):
    """The attrs of an Operation a caller gives (inferred ones left out)."""
    attrs = all_attrs(op)
    return {a.name: attrs[a.name] for a in op_def(op.type).attrs if not a.inferred}


def grouped_inputs(op_type, flat, attrs):
    """Flattened input values -> {arg name: value, or a list for a list arg}; attrs give list lengths."""
    decl = op_def(op_type)
    out, i = {}, 0
    for arg in decl.inputs:
        if arg.number_attr:
            n = int(attrs[arg.number_attr])
            out[arg.name] = list(flat[i:i + n])
            i += n
        else:
            if i >= len(flat):
                raise _errors.InvalidArgumentError(f"{op_type}: {len(flat)} inputs given, more needed")
            out[arg.name] = flat[i]
            i += 1
    if i != len(flat):
        raise _errors.InvalidArgumentError(f"{op_type}: {len(flat)} inputs given, {i} expected")
    return out


def add_node(graph, op_type, flat_inputs, attrs, name=None):
    """Adds a node of `op_type` to `graph` from flattened inputs and user attrs;
    returns its outputs as a tuple."""
    decl = op_def(op_type)
    user = {a.name for a in decl.attrs if not a.inferred}
    # List lengths (N) are inferred: count them from the flat inputs when not given.
    known = dict(attrs)
    lists = [a for a in decl.inputs if a.number_attr]
    if lists:
        fixed = len(decl.inputs) - len(lists)
        if len(lists) == 1 and lists[0].number_attr not in known:
            known[lists[0].number_attr] = len(flat_inputs) - fixed
    inputs = grouped_inputs(op_type, list(flat_inputs), known)
    out = graph.create_op(op_type, inputs, {k: v for k, v in attrs.items() if k in user}, name=name)
    return out if isinstance(out, tuple) else (out,)
