"""Rewriting graphs: find nodes by op type or by a small pattern, swap in another op.

    import opforge as of
    from opforge import graph_util as gu
    new = gu.replace(graph, "MatMul", "PluginMatMul")        # every MatMul node
    new = gu.replace(graph, gu.TANH_GELU, "Gelu")            # the tanh-GELU chain
    y2 = new.tensor(y)                                       # y's tensor in new.graph

Graphs never change once built (the C++ graph is append-only), so a
rewrite builds a new graph: every node is copied, in order and under its
name, except that each match's root becomes one node of the replacement
op (a built-in, or one from load_op_library), fed by the root's inputs (op
type matches) or the pattern's captures, and the nodes only the match used
are left out. The replacement is bound like any call (its input dtypes are
checked then), and its outputs must have the dtypes of the outputs they
replace and shapes compatible with them, else InvalidArgumentError naming
both. A SavedGraph rewrites the same way (``saved.replace(...)``), keeping
its input and output names.

Patterns: ``op(type, *inputs)`` matches a node of `type` whose inputs match
`inputs` (both orders for commutative ops: Add, Mul, Maximum, Minimum,
Equal, NotEqual, LogicalAnd, LogicalOr); ``capture(name)`` matches any
tensor (one name, one tensor); a number matches a constant all of whose
elements equal it (to float32 rounding); ``either(*patterns)`` the first
alternative that matches.
"""

import math

import numpy as np

from opforge import _pywrap_internal as _pw
from opforge import errors

__all__ = ["op", "capture", "either", "replace", "find", "copy", "Rewrite", "TANH_GELU"]

_COMMUTATIVE = {"Add", "Mul", "Maximum", "Minimum", "Equal", "NotEqual", "LogicalAnd", "LogicalOr"}


class _Op:
    __slots__ = ("type", "inputs")

    def __init__(self, op_type, inputs):
        self.type, self.inputs = op_type, tuple(inputs)

    def __repr__(self):
        return f"op({self.type!r}, {', '.join(map(repr, self.inputs))})"


class _Capture:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"capture({self.name!r})"


class _Either:
    __slots__ = ("options",)

    def __init__(self, options):
        self.options = tuple(options)

    def __repr__(self):
        return f"either({', '.join(map(repr, self.options))})"


def op(op_type, *inputs):
    """A pattern: a node of `op_type` whose inputs match `inputs` (patterns, captures, numbers)."""
    return _Op(op_type, inputs)


def capture(name):
    """A pattern matching any tensor, bound to `name` (the replacement's inputs)."""
    return _Capture(name)


def either(*patterns):
    """A pattern matching the first of `patterns` that matches."""
    return _Either(patterns)


def _tanh_gelu():
    x = capture("x")
    cube = either(op("Pow", x, 3.0), op("Mul", op("Mul", x, x), x), op("Mul", x, op("Mul", x, x)))
    inner = op("Mul", math.sqrt(2 / math.pi), op("Add", x, op("Mul", 0.044715, cube)))
    half = op("Add", 1.0, op("Tanh", inner))
    return either(op("Mul", op("Mul", 0.5, x), half), op("Mul", op("Mul", x, half), 0.5),
                  op("Mul", 0.5, op("Mul", x, half)), op("Mul", x, op("Mul", 0.5, half)))


# 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3))), as GPT-2 writes it
# (x**3 as Pow or two Muls, the 0.5 on either side): capture "x".
TANH_GELU = _tanh_gelu()


# -- matching ---------------------------------------------------------------

def _const_value(t):
    o = t.op
    return o.get_attr("value").numpy() if o.type == "Const" else None


def _match(pattern, t, binds, used):
    """Does tensor `t` match `pattern`? Fills binds (captures) and used (node ids)."""
    if isinstance(pattern, _Capture):
        have = binds.get(pattern.name)
        if have is None:
            binds[pattern.name] = t
            return True
        return have is t
    if isinstance(pattern, (int, float)) and not isinstance(pattern, bool):
        v = _const_value(t)
        ok = v is not None and v.size > 0 and v.dtype.kind in "fi" and bool(
            np.all(np.abs(v.astype(np.float64) - pattern) <= 1e-6 * max(1.0, abs(pattern))))
        if ok:
            used.add(t.op._id)  # the constant goes with the match when nothing else reads it
        return ok
    if isinstance(pattern, _Either):
        for p in pattern.options:
            b, u = dict(binds), set(used)
            if _match(p, t, b, u):
                binds.clear(), binds.update(b), used.clear(), used.update(u)
                return True
        return False
    if isinstance(pattern, _Op):
        node = t.op
        if node.type != pattern.type or t.value_index != 0:
            return False
        ins = node.inputs
        if len(ins) != len(pattern.inputs):
            return False
        orders = [ins]
        if pattern.type in _COMMUTATIVE and len(ins) == 2:
            orders.append(ins[::-1])
        for order in orders:
            b, u = dict(binds), set(used)
            if all(_match(p, x, b, u) for p, x in zip(pattern.inputs, order)):
                u.add(node._id)
                binds.clear(), binds.update(b), used.clear(), used.update(u)
                return True
        return False
    raise errors.InvalidArgumentError(f"graph_util: {pattern!r} is not a pattern (op, capture, either, a number)")


class Match:
    """One match: ``root`` (the Operation replaced), ``captures`` ({name:
    tensor}), ``nodes`` (ids of the matched nodes)."""

    __slots__ = ("root", "captures", "nodes")

    def __init__(self, root, captures, nodes):
        self.root, self.captures, self.nodes = root, captures, nodes

    def __repr__(self):
        return f"<graph_util.Match root='{self.root.name}' captures={sorted(self.captures)}>"


def find(graph, match):
    """The matches of `match` (an op type or a pattern) in `graph`, in node order,
    none overlapping (an earlier root wins)."""
    graph = getattr(graph, "graph", graph)
    if isinstance(match, str):
        return [Match(node, {}, {node._id}) for node in graph.get_operations() if node.type == match]
    out, taken = [], set()
    for node in reversed(graph.get_operations()):  # from the outputs up: a chain matches at its top
        if node._id in taken or len(node.outputs) != 1:
            continue
        binds, used = {}, set()
        if _match(match, node.outputs[0], binds, used) and not used & taken:
            taken |= used
            out.append(Match(node, binds, used))
    return out[::-1]


# -- rebuilding -------------------------------------------------------------

class Rewrite:
    """A rewritten graph: ``graph``, ``count`` (matches replaced),
    ``tensor(old)``: the tensor of the new graph standing for `old`."""

    def __init__(self, graph, mapping, count):
        self.graph, self._map, self.count = graph, mapping, count

    def op(self, old):
        """The Operation of the new graph standing for Operation `old`."""
        return self.tensor(old.outputs[0]).op

    def tensor(self, old):
        try:
            return self._map[old._ref()]
        except KeyError:
            raise errors.NotFoundError(
                f"graph_util: '{old.name}' has no counterpart in the rewritten graph (it was inside a match)") from None


def copy(graph):
    """A copy of `graph` (every node, same names) as a Rewrite."""
    return _rebuild(graph, [], None, None, None)


def replace(graph, match, replacement, inputs=None, attrs=None):
    """Replaces each match of `match` in `graph` by a node of op `replacement`.

    match: an op type ("MatMul") or a pattern (op, capture, either;
    TANH_GELU). replacement: a registered op's name (built-in or from a
    loaded library). inputs: the replacement's inputs by capture name, in
    order (default: the root's inputs for an op type; the captures in the
    order the pattern first meets them). attrs: the replacement's attrs.
    Returns a Rewrite (a SavedGraph for a SavedGraph). Raises NotFoundError
    when nothing matches."""
    saved = graph if hasattr(graph, "outputs") and hasattr(graph, "run") else None
    g = saved.graph if saved is not None else graph
    from opforge.graph import _nodes
    _nodes.op_def(replacement)  # NotFoundError now, naming it, when it is not registered
    found = find(g, match)
    if not found:
        raise errors.NotFoundError(f"graph_util.replace: nothing in the graph matches {match!r}")
    rewrite = _rebuild(g, found, replacement, inputs, attrs)
    if saved is None:
        return rewrite
    return type(saved)(rewrite.graph, {k: rewrite.tensor(v) for k, v in saved.inputs.items()},
                       {k: rewrite.tensor(v) for k, v in saved.outputs.items()}, {}, None,
                       init_ops=[rewrite.op(o) for o in saved._init_ops])


def _dead_nodes(graph, found):
    """Matched nodes (bar roots) that only their match reads: left out of the rewrite."""
    consumers = _pw.graph_consumers(graph._handle)
    dead, changed = set(), True
    while changed:
        changed = False
        for m in found:
            for n in m.nodes - {m.root._id} - dead:
                if all(c == m.root._id or c in dead for c in consumers[n]):
                    dead.add(n)
                    changed = True
    return dead


def _rebuild(graph, found, replacement, inputs, attrs):
    import opforge as of
    from opforge.graph import Graph, _nodes
    roots = {m.root._id: m for m in found}
    dead = _dead_nodes(graph, found) if found else set()
    new = Graph()
    mapping = {}
    with new.as_default():
        for node in graph.get_operations():
            n = node._id
            if n in dead:
                continue
            if node.type == "Placeholder":
                t = node.outputs[0]
                mapping[(n, 0)] = of.placeholder(t.dtype, None if t.shape is None else list(t.shape), name=node.name)
                continue
            if node.type == "Const":
                mapping[(n, 0)] = of.constant(node.get_attr("value"), name=node.name)
                continue
            if n in roots:
                outs = _replacement(roots[n], replacement, inputs, attrs, mapping, new)
            else:
                flat = [mapping[t._ref()] for t in node.inputs]
                outs = _nodes.add_node(new, node.type, flat, _nodes.user_attrs(node), name=node.name)
            for i, t in enumerate(outs):
                mapping[(n, i)] = t
    return Rewrite(new, mapping, len(found))


def _replacement(m, replacement, inputs, attrs, mapping, graph):
    from opforge.graph import _nodes
    root = m.root
    if inputs is not None:
        missing = [k for k in inputs if k not in m.captures]
        if missing:
            raise errors.InvalidArgumentError(
                f"graph_util.replace: inputs {missing} are not captures of the pattern ({sorted(m.captures)})")
        olds = [m.captures[k] for k in inputs]
    elif m.captures:
        olds = list(m.captures.values())
    else:
        olds = list(root.inputs)
    flat = [mapping[t._ref()] for t in olds]
    try:
        outs = _nodes.add_node(graph, replacement, flat, dict(attrs or {}), name=root.name)
    except errors.OpError as e:
        raise type(e)(f"graph_util.replace: {replacement} cannot replace node '{root.name}' ({root.type}): {e}") \
            from None
    if len(outs) != len(root.outputs):
        raise errors.InvalidArgumentError(
            f"graph_util.replace: {replacement} has {len(outs)} outputs but node '{root.name}' ({root.type}) has "
            f"{len(root.outputs)}")
    for old, t in zip(root.outputs, outs):
        if t.dtype != old.dtype:
            raise errors.InvalidArgumentError(
                f"graph_util.replace: {replacement} gives {t.dtype.name} where node '{root.name}' ({root.type}) "
                f"gave {old.dtype.name}")
        if not _shapes_fit(old.shape, t.shape):
            raise errors.InvalidArgumentError(
                f"graph_util.replace: {replacement} gives shape {_fmt(t.shape)} where node '{root.name}' "
                f"({root.type}) gave {_fmt(old.shape)}")
    return outs


def _shapes_fit(a, b):
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _fmt(shape):
    return "unknown rank" if shape is None else "[" + ", ".join("None" if d is None else str(d) for d in shape) + "]"
