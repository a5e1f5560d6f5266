"""The gradients target: gen_<group>_grads.py, gradient declarations rendered as
Python gradient functions (TensorFlow's signature, ``grad(op, *output_grads)``
returning one gradient per flattened input).

The functions call the generated op wrappers, so a gradient is itself
recorded on the tape (higher derivatives) or added to a graph.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from .. import naming
from ..model import GradAttr, GradExpr, Group, OpDef


@dataclass(frozen=True)
class GradFunction:
    op: str
    name: str                  # the Python function's name
    params: tuple[str, ...]    # op, then one d<output> per output
    body: tuple[str, ...]      # lines, without indentation


def local(name: str) -> str:
    """The Python variable for an input, output or d<output> name."""
    name = naming.python_ident(name)
    return name + "_" if name in ("op", "i", "_k", "_v", "_ops", "_h", "_lib") else name


def _literal(value) -> str:
    return repr(json.loads(json.dumps(value)) if not isinstance(value, tuple) else list(value))


class _Renderer:
    def __init__(self, op: OpDef, local_ops: frozenset[str], local_prefix: str):
        self.op = op
        self.local_ops = local_ops
        self.local_prefix = local_prefix
        self.lines: list[str] = []
        self.temps = 0

    def wrapper(self, op_name: str) -> str:
        prefix = self.local_prefix if op_name in self.local_ops else "_ops"
        return f"{prefix}.{naming.op_python_name(op_name)}"

    def attr(self, a: GradAttr) -> str:
        if a.kind == "literal":
            return _literal(a.value)
        if a.kind == "attr":
            return f"op.get_attr({a.value!r})"
        if a.kind == "index":
            return "i"
        if a.value == "shape":
            return f"list({local(a.argument)}.shape)"
        if a.value == "list":
            return f"[op.get_attr({a.argument!r})]"
        return f"_h.inverse_perm(op.get_attr({a.argument!r}))"

    def expr(self, e: GradExpr) -> str:
        if e.kind == "none":
            return "None"
        if e.kind == "number":
            return e.text
        if e.kind == "name":
            return f"op.get_attr({e.text!r})" if e.name_kind == "attr" else local(e.text)
        if e.kind == "list":
            items = [self.expr(a) for a in e.args]
            if e.text == "append":
                return f"[*{items[0]}, {items[1]}]"
            if e.text == "replace":  # element i (of a per-element rule) replaced
                return f"[{items[1]} if _k == i else _v for _k, _v in enumerate({items[0]})]"
            return f"[{', '.join(items)}]"
        args = [self.expr(a) for a in e.args]
        args += [f"{naming.python_ident(a.name)}={self.attr(a)}" for a in e.attrs]
        return f"{self.wrapper(e.text)}({', '.join(args)})"


def grad_function(op: OpDef, local_ops: frozenset[str] = frozenset(), local_prefix: str = "_lib") -> GradFunction:
    r = _Renderer(op, local_ops, local_prefix)
    body = []
    # Bind inputs (list inputs as slices of the flat op.inputs) and outputs.
    offset = "0"
    for arg in op.inputs:
        if arg.is_list:
            n = f"op.get_attr({arg.number_attr!r})"
            end = n if offset == "0" else f"{offset} + {n}"
            body.append(f"{local(arg.name)} = list(op.inputs[{offset}:{end}])")
            offset = end
        else:
            body.append(f"{local(arg.name)} = op.inputs[{offset}]")
            offset = "1" if offset == "0" else f"{offset} + 1"
    for i, out in enumerate(op.outputs):
        body.append(f"{local(out.name)} = op.outputs[{i}]")
    results = {}
    for rule in op.gradient.rules:
        value = r.expr(rule.expr)
        if rule.local:  # computed once, before the rules that use it
            body.append(f"{local(rule.targets[0])} = {value}")
        elif rule.per_element:
            (target,) = rule.targets
            results[target] = f"[{value} for i in range(len({local(target)}))]"
        elif len(rule.targets) == 1:
            results[rule.targets[0]] = value
        else:
            temp = f"_g{r.temps}"
            r.temps += 1
            body.append(f"{temp} = {value}")
            for k, t in enumerate(rule.targets):
                results[t] = f"{temp}[{k}]"
    returned = []
    for arg in op.inputs:
        got = results.get(arg.name)
        if arg.is_list:
            returned.append(f"*{got}" if got else f"*[None] * len({local(arg.name)})")
        else:
            returned.append(got or "None")
    body.append(f"return [{', '.join(returned)}]")
    params = ("op",) + tuple(local(f"d{o.name}") for o in op.outputs)
    return GradFunction(op=op.name, name=f"_{naming.snake_case(op.name)}_grad", params=params, body=tuple(body))


@dataclass(frozen=True)
class GradModule:
    """One gen_<group>_grads module (or an op library's gradient functions)."""
    group: str
    functions: tuple[GradFunction, ...]
    no_gradient: tuple[str, ...]    # ops declared NoGradient(), sorted

    @staticmethod
    def of(group: Group, ops: tuple[OpDef, ...], library: bool = False) -> GradModule:
        """For an op library, calls of its own ops go through its module (``_lib``)."""
        local_ops = frozenset(op.name for op in ops) if library else frozenset()
        return GradModule(group.name,
                          tuple(grad_function(op, local_ops) for op in ops if op.gradient.rules),
                          tuple(sorted(op.name for op in ops if op.gradient.none)))

    @property
    def module_name(self) -> str:
        return f"gen_{self.group}_grads"
