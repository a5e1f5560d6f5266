"""The gradients target: gen_<group>_grads.py, gradient declarations rendered as
Python gradient functions (TensorFlow's signature, ``grad(op, *output_grads)``
returning one gradient per flattened input).

The functions call the generated op wrappers, so a gradient is itself
recorded on the tape (higher derivatives) or added to a graph. They read
``op.needs_input_grad`` (per flat input, whether it needs a gradient): a rule
none of whose inputs needs one is not evaluated (they get None), nor is a
local only such rules use, and ``needs_grad(x)`` renders as its entry.
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


def _flat_positions(op: OpDef) -> dict[str, tuple[str, str | None]]:
    """Per input, its flat position in op.inputs (a Python expression) and,
    for a list input, the end of its slice."""
    positions: dict[str, tuple[str, str | None]] = {}
    fixed, listed = 0, ""  # the position: fixed + the lengths of the list inputs before
    for arg in op.inputs:
        start = f"{listed} + {fixed}" if listed and fixed else listed or str(fixed)
        if arg.is_list:
            n = f"op.get_attr({arg.number_attr!r})"
            positions[arg.name] = (start, n if start == "0" else f"{start} + {n}")
            listed, fixed = (f"{listed} + {n}" if listed else n), fixed
        else:
            positions[arg.name] = (start, None)
            fixed += 1
    return positions


def _locals_used(e: GradExpr) -> set[str]:
    if e.kind == "name" and e.name_kind == "local":
        return {e.text}
    return set().union(*(_locals_used(a) for a in e.args)) if e.args else set()


class _Renderer:
    def __init__(self, op: OpDef, local_ops: frozenset[str], local_prefix: str):
        self.op = op
        self.local_ops = local_ops
        self.local_prefix = local_prefix
        self.lines: list[str] = []
        self.temps = 0
        self.positions = _flat_positions(op)

    def needs(self, name: str, element: bool = False) -> str:
        """Whether input `name` needs a gradient: a list input's element i
        (element=True) or any of its elements."""
        start, end = self.positions[name]
        if end is None:
            return f"_need[{start}]"
        if element:
            return "_need[i]" if start == "0" else f"_need[{start} + i]"
        return f"any(_need[{start}:{end}])"

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
        assert a.argument is not None  # a function of an input or attr
        if a.value == "shape":
            return f"list({local(a.argument)}.shape)"
        if a.value == "list":
            return f"[op.get_attr({a.argument!r})]"
        if a.value == "needs_grad":
            return self.needs(a.argument)
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


def _users(rules) -> dict[str, list[str]]:
    """Per local, the inputs whose rules use it, directly or through other locals."""
    users: dict[str, list[str]] = {}
    for rule in reversed(rules):
        if rule.local:
            targets = users.setdefault(rule.targets[0], [])
        else:
            targets = list(rule.targets)
        for name in sorted(_locals_used(rule.expr)):
            into = users.setdefault(name, [])
            into.extend(t for t in targets if t not in into)
    return users


def _in_input_order(op: OpDef, names) -> list[str]:
    return [a.name for a in op.inputs if a.name in names]


def grad_function(op: OpDef, local_ops: frozenset[str] = frozenset(), local_prefix: str = "_lib") -> GradFunction:
    r = _Renderer(op, local_ops, local_prefix)
    body = []
    # Bind inputs (list inputs as slices of the flat op.inputs) and outputs.
    for arg in op.inputs:
        start, end = r.positions[arg.name]
        if end is not None:
            body.append(f"{local(arg.name)} = list(op.inputs[{start}:{end}])")
        else:
            body.append(f"{local(arg.name)} = op.inputs[{start}]")
    for i, out in enumerate(op.outputs):
        body.append(f"{local(out.name)} = op.outputs[{i}]")
    body.append("_need = op.needs_input_grad")
    users = _users(op.gradient.rules)

    def any_needs(targets) -> str:
        return " or ".join(r.needs(t) for t in targets) if targets else "False"

    results = {}
    for rule in op.gradient.rules:
        value = r.expr(rule.expr)
        computes = rule.expr.kind in ("call", "list")  # names and numbers cost nothing
        if rule.local:  # computed once, before the rules that use it, if one of them runs
            body.append(f"{local(rule.targets[0])} = {value} if {any_needs(_in_input_order(op, users.get(rule.targets[0], [])))} "
                        "else None")
        elif rule.per_element:
            (target,) = rule.targets
            cond = f" if {r.needs(target, element=True)} else None" if computes else ""
            results[target] = f"[{value}{cond} for i in range(len({local(target)}))]"
        elif len(rule.targets) == 1:
            results[rule.targets[0]] = f"{value} if {r.needs(rule.targets[0])} else None" if computes else value
        else:
            temp = f"_g{r.temps}"
            r.temps += 1
            body.append(f"{temp} = {value} if {any_needs(rule.targets)} else {(None,) * len(rule.targets)}")
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
