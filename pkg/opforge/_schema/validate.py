"""What generated wrappers need of a parsed Registry. Every message starts with file:line.

The C++ registry validates each declaration when it is registered (names,
attr types, defaults and constraints, type and number attrs, duplicates,
parameter order: cpp/framework/op_def_builder.cc), and parsing checks the
JSON's shape (model.py). What is left is what only the generated code cares
about: names that become Python modules, functions and parameters must be
usable and distinct there, and every op needs a summary for its docstring.

``validate(registry)`` returns the list of problems (empty when fine);
``check(registry)`` raises SchemaError with all of them.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from . import naming
from .errors import SchemaError
from .model import OpDef, Registry

Spellings = Mapping[str, Callable[[str], str]]

FINGERPRINT_RE = re.compile(r"^[0-9a-f]{16}$")


def _check_op(op: OpDef, errors: list[str], spellings: Spellings) -> None:
    for kind, items in (("input", op.inputs), ("output", op.outputs), ("attr", op.attrs)):
        for item in items:
            # The generated module keeps its own globals under "_" names.
            if item.name.startswith("_"):
                errors.append(f"{op.where}: {kind} name {item.name!r} starts with '_', which "
                              "generated wrappers keep for their own names")
    params = op.params
    for lang, spell in {"Python": naming.python_ident, **spellings}.items():
        names = [spell(p.name) for p in params]
        for name in sorted({n for n in names if names.count(n) > 1}):
            errors.append(f"{op.where}: two parameters are both spelled {name!r} in {lang}")
    if not op.summary.strip():
        errors.append(f"{op.where}: no summary (give the op a .Doc(...))")


def validate(registry: Registry, spellings: Spellings | None = None) -> list[str]:
    errors: list[str] = []
    groups = set()
    for g in registry.groups:
        if not naming.GROUP_NAME_RE.match(g.name):
            errors.append(f"registry: group name {g.name!r} must match [a-z][a-z0-9_]* "
                          "(it names the module gen_<group>_ops)")
        if not FINGERPRINT_RE.match(g.fingerprint):
            errors.append(f"registry: group {g.name!r}: fingerprint {g.fingerprint!r} "
                          "is not 16 lowercase hex digits")
        groups.add(g.name)

    py_names: dict[str, OpDef] = {}
    for op in registry.ops:
        if op.group not in groups:
            errors.append(f"{op.where}: group {op.group!r} is not listed in groups")
        py_name = naming.op_python_name(op.name)
        other = py_names.setdefault(py_name, op)
        if other is op:
            pass
        elif other.name == op.name:
            errors.append(f"{op.where}: duplicate op name, first declared at {other.source}")
        else:
            errors.append(f"{op.where}: Python name {py_name!r} is also the name of "
                          f"op {other.name} ({other.source})")
        _check_op(op, errors, spellings or {})
    return errors


def check(registry: Registry, spellings: Spellings | None = None) -> Registry:
    errors = validate(registry, spellings)
    if errors:
        raise SchemaError(errors)
    return registry
