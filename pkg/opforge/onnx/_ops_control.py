"""ONNX control flow: If, Loop and Scan, run by the importer.

A body (a graph attribute) is mapped like the main graph: each node through
its converter, checked at import, reading the enclosing scopes' values by
name. If runs the branch its condition picks; Loop and Scan unroll, one
body run per iteration. The values that steer them (If's condition, Loop's
trip count and conditions) must be known when the node runs: always in an
eager run; in a compiled graph only where they fold to constants, else the
node raises UnimplementedError and the model runs eagerly.
"""

import collections

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx import _functions, _node, _take, _validate
from opforge.onnx._node import INT, INTS, converter, shape_of

GRAPH = 5
_OPSET = {_functions.OPSET_ATTR: INT}
_MAX_ITERATIONS = 1 << 20  # a Loop with neither trip count nor condition stops here, with an error


class Body:
    """One graph attribute of a node, mapped: run(n, values) -> its outputs."""

    def __init__(self, n, attr):
        from opforge.onnx._importer import _check_all_mapped  # the importer imports this module
        a = n.node.attribute
        g = next(x.g for x in a if x.name == attr)
        opset = n.attr(_functions.OPSET_ATTR)
        if opset is None:
            raise n.fail(f"the opset of {attr!r} is unknown (import the model with opforge.onnx)",
                         UnimplementedError)
        self.inputs = [vi.name for vi in g.input]
        self.outputs = [vi.name for vi in g.output]
        self.consts = {t.name: _validate.tensor_to_numpy(t, f"initializer {t.name!r} of {attr!r}")
                       for t in g.initializer}
        _check_all_mapped(g.node)
        local = set(self.inputs) | set(self.consts) | {o for x in g.node for o in x.output if o}
        outer = {x for node in g.node for x in list(node.input) + _validate.outer_names(node)
                 if x and x not in local}
        self.steps = []
        for i, node in enumerate(_validate.check_graph(g, self.inputs + list(self.consts) + sorted(outer))):
            conv, version = _node.check_supported(node, opset, i)
            ctx = _node.NodeCtx(node, version, {}, i)
            if conv.check is not None:
                conv.check(ctx)
            self.steps.append((ctx, conv.fn, [(k, name) for k, name in enumerate(node.output) if name]))

    def run(self, n, values):
        if len(values) != len(self.inputs):
            raise n.fail(f"the body takes {len(self.inputs)} inputs, got {len(values)}")
        local = dict(self.consts)
        local.update(zip(self.inputs, values))
        env = collections.ChainMap(local, n._env)  # outer values by name; writes stay local
        consts = collections.ChainMap(self.consts, n._consts)
        for proto, fn, outputs in self.steps:
            result = fn(proto.bind(env, consts))
            results = result if isinstance(result, tuple) else (result,)
            for k, name in outputs:
                if k >= len(results):
                    raise n.fail(f"output {k} ({name!r}) of {proto.where} is not supported", UnimplementedError)
                env[name] = results[k]
        return [env[name] for name in self.outputs]


def _checker(*attrs):
    def check(n):
        for a in attrs:
            Body(n, a)
    return check


def _flag(n, v, what):
    """The one boolean a tensor holds (its value must be known now)."""
    a = v if isinstance(v, np.ndarray) else None
    if a is None:
        try:
            a = np.asarray(v.numpy())
        except Exception:  # noqa: BLE001 -- a graph tensor: no value until the graph runs
            raise n.fail(f"{what} must have a value when the node runs (it steers the control flow)",
                         UnimplementedError) from None
    if a.size != 1:
        raise n.fail(f"{what} must hold one value, got shape {list(a.shape)}")
    return bool(a.reshape(-1)[0])


def _stack(n, values, axis, what):
    if not values:
        raise n.fail(f"{what}: no iterations ran, so its shape is unknown", UnimplementedError)
    shape = list(shape_of(values[0]))
    if None in shape:
        raise n.fail(f"{what} needs static shapes, got {shape}", UnimplementedError)
    axis = axis + len(shape) + 1 if axis < 0 else axis
    shape.insert(axis, 1)
    parts = [P.reshape(v, shape=shape) for v in values]
    return P.concat(parts, axis=axis) if len(parts) > 1 else parts[0]


_IF_VERSIONS = (1, 11, 13, 16, 19, 21, 23, 24, 25)


@converter("If", _IF_VERSIONS, {"then_branch": GRAPH, "else_branch": GRAPH, **_OPSET},
           check=_checker("then_branch", "else_branch"))
def _if(n):
    cond = n.known(0)
    taken = _flag(n, cond if cond is not None else n.input(0), "cond")
    return tuple(Body(n, "then_branch" if taken else "else_branch").run(n, []))


@converter("Loop", _IF_VERSIONS, {"body": GRAPH, **_OPSET}, check=_checker("body"))
def _loop(n):
    body = Body(n, "body")
    trip = int(n.static(0, "M").reshape(-1)[0]) if n.has(0) else None
    cond = _flag(n, n.input(1), "cond") if n.has(1) else True
    carried = [n.input(i) for i in range(2, n.num_inputs)]
    k = len(carried)
    scans = [[] for _ in range(len(body.outputs) - 1 - k)]
    i = 0
    while cond and (trip is None or i < trip):
        if trip is None and i >= _MAX_ITERATIONS:
            raise n.fail(f"ran {i} iterations without the condition turning false", UnimplementedError)
        outs = body.run(n, [np.array(i, np.int64), np.array(cond)] + carried)
        if n.has(1) or trip is None:
            cond = _flag(n, outs[0], "the body's condition")
        carried = outs[1:1 + k]
        for j, v in enumerate(outs[1 + k:]):
            scans[j].append(v)
        i += 1
    return tuple(carried + [_stack(n, s, 0, f"scan output {j}") for j, s in enumerate(scans)])


def _axes(n, name, count, ranks):
    axes = n.attr(name, [0] * count)
    if len(axes) != count:
        raise n.fail(f"{name} {axes} must have {count} entries")
    return [n.axis(a, r, name) for a, r in zip(axes, ranks)]


@converter("Scan", (9, 11, 16, 19, 21, 23, 24, 25),
           {"body": GRAPH, "num_scan_inputs": INT, "scan_input_axes": INTS, "scan_input_directions": INTS,
            "scan_output_axes": INTS, "scan_output_directions": INTS, **_OPSET}, check=_checker("body"))
def _scan(n):
    body = Body(n, "body")
    m = n.attr("num_scan_inputs")
    values = n.inputs()
    if m is None or not 0 < m <= len(values):
        raise n.fail(f"num_scan_inputs {m} must be in 1..{len(values)}")
    state, xs = values[:len(values) - m], values[len(values) - m:]
    in_axes = _axes(n, "scan_input_axes", m, [len(shape_of(x)) for x in xs])
    in_dirs = n.attr("scan_input_directions", [0] * m)
    lengths = {shape_of(x)[a] for x, a in zip(xs, in_axes)}
    if len(lengths) != 1 or None in lengths:
        raise n.fail(f"the scan inputs must have one static length, got {sorted(lengths, key=str)}")
    steps = lengths.pop()
    k = len(body.outputs) - len(state)
    scans = [[] for _ in range(k)]
    for t in range(steps):
        slices = [_take.take(x, np.array(steps - 1 - t if d else t, np.int64), a)
                  for x, a, d in zip(xs, in_axes, in_dirs)]
        outs = body.run(n, state + slices)
        state = outs[:len(state)]
        for j, v in enumerate(outs[len(state):]):
            scans[j].append(v)
    out_dirs = n.attr("scan_output_directions", [0] * k)
    out_axes = n.attr("scan_output_axes", [0] * k)
    if len(out_axes) != k or len(out_dirs) != k:
        raise n.fail(f"scan_output_axes/directions must have {k} entries")
    stacked = [_stack(n, s[::-1] if d else s, a, f"scan output {j}")
               for j, (s, a, d) in enumerate(zip(scans, out_axes, out_dirs))]
    return tuple(state + stacked)
