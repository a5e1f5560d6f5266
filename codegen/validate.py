"""Semantic checks on a parsed Registry. Every message starts with file:line.

``validate(registry)`` returns the list of problems (empty when fine);
``check(registry)`` raises CodegenError with all of them.
"""
from __future__ import annotations

import re
from typing import Any

from . import naming
from .errors import CodegenError
from .model import AttrDef, OpDef, Registry

FINGERPRINT_RE = re.compile(r"^[0-9a-f]{16}$")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return _is_int(v) or isinstance(v, float)


# Checks of default values by attr type; `dtypes` are the registry's dtype names.
_VALUE_CHECKS = {
    "int": (lambda v, dtypes: _is_int(v), "an int"),
    "float": (lambda v, dtypes: _is_number(v), "a number"),
    "bool": (lambda v, dtypes: isinstance(v, bool), "true or false"),
    "string": (lambda v, dtypes: isinstance(v, str), "a string"),
    "type": (lambda v, dtypes: v in dtypes, "a dtype name"),
    "shape": (lambda v, dtypes: isinstance(v, tuple) and all(map(_is_int, v)), "a list of ints"),
    "list(int)": (lambda v, dtypes: isinstance(v, tuple) and all(map(_is_int, v)),
                  "a list of ints"),
    "list(float)": (lambda v, dtypes: isinstance(v, tuple) and all(map(_is_number, v)),
                    "a list of numbers"),
    "list(type)": (lambda v, dtypes: isinstance(v, tuple) and all(x in dtypes for x in v),
                   "a list of dtype names"),
}


def _check_attr(op: OpDef, attr: AttrDef, bound: set[str], errors: list[str],
                registry: Registry) -> None:
    at = f"{op.where}: attr {attr.name!r}"
    if attr.type not in registry.attr_types or attr.type not in _VALUE_CHECKS:
        errors.append(f"{at}: unknown attr type {attr.type!r} "
                      f"(known: {', '.join(registry.attr_types)})")
        return
    dtypes = registry.dtype_names
    if attr.has_default and attr.default is not None:
        ok, what = _VALUE_CHECKS[attr.type]
        if not ok(attr.default, dtypes):
            errors.append(f"{at}: default {attr.default!r} is not {what}")
        elif attr.allowed and attr.type == "type" and attr.default not in attr.allowed:
            errors.append(f"{at}: default {attr.default!r} is not one of {list(attr.allowed)}")
    if not attr.has_default and attr.default is not None:
        errors.append(f"{at}: has a default value but has_default is false")
    if attr.allowed and attr.type not in ("type", "list(type)"):
        errors.append(f"{at}: allowed dtypes only apply to type attrs, not {attr.type}")
    for dtype in attr.allowed or ():
        if dtype not in dtypes:
            errors.append(f"{at}: unknown dtype {dtype!r} in allowed")
    if attr.minimum is not None and attr.type not in ("int", "float"):
        errors.append(f"{at}: a minimum only applies to int and float attrs")
    elif (attr.minimum is not None and attr.has_default and _is_number(attr.default)
          and attr.default < attr.minimum):
        errors.append(f"{at}: default {attr.default!r} is below the minimum {attr.minimum}")
    if attr.inferred and attr.name not in bound:
        errors.append(f"{at}: marked inferred but no input binds it")
    if not attr.inferred and attr.name in bound:
        errors.append(f"{at}: bound by an input, so it must be inferred")


def _check_args(op: OpDef, errors: list[str], dtypes: tuple[str, ...]) -> set[str]:
    """Checks inputs and outputs; returns the attr names the inputs bind."""
    bound: set[str] = set()
    for kind, args in (("input", op.inputs), ("output", op.outputs)):
        for arg in args:
            at = f"{op.where}: {kind} {arg.name!r}"
            if (arg.type_attr is None) == (arg.fixed_type is None):
                errors.append(f"{at}: needs exactly one of type_attr and fixed_type")
            if arg.fixed_type is not None and arg.fixed_type not in dtypes:
                errors.append(f"{at}: unknown dtype {arg.fixed_type!r}")
            if arg.type_attr is not None:
                attr = op.find_attr(arg.type_attr)
                if attr is None or attr.type != "type":
                    errors.append(f"{at}: type attr {arg.type_attr!r} is not a `type` attr")
                elif kind == "input":
                    bound.add(attr.name)
            if arg.number_attr is not None:
                attr = op.find_attr(arg.number_attr)
                if attr is None or attr.type != "int":
                    errors.append(f"{at}: number attr {arg.number_attr!r} is not an `int` attr")
                elif kind == "input":
                    bound.add(attr.name)
    return bound


def _check_names(op: OpDef, errors: list[str]) -> None:
    where = op.where
    if not naming.OP_NAME_RE.match(op.name):
        errors.append(f"{where}: op name must be CamelCase ([A-Z][A-Za-z0-9]*)")
    for kind, items in (("input", op.inputs), ("output", op.outputs), ("attr", op.attrs)):
        for item in items:
            if not naming.ARG_NAME_RE.match(item.name):
                errors.append(f"{where}: {kind} name {item.name!r} is not an identifier "
                              "(letters, digits and _, starting with a letter)")
    for kind, names in (("input/attr", [a.name for a in op.inputs + op.attrs]),
                        ("output", [a.name for a in op.outputs])):
        for name in sorted({n for n in names if names.count(n) > 1}):
            errors.append(f"{where}: duplicate {kind} name {name!r}")
    declared = [a.name for a in op.inputs] + [a.name for a in op.attrs if not a.inferred]
    if sorted(op.param_names) != sorted(declared):
        errors.append(f"{where}: params {list(op.param_names)} is not a permutation of "
                      f"the inputs and non-inferred attrs {declared}")
    elif [n for n in op.param_names if op.find_input(n)] != [a.name for a in op.inputs]:
        errors.append(f"{where}: params lists the inputs in another order than inputs")


def _check_params(op: OpDef, errors: list[str]) -> None:
    params = op.params
    seen_default = None
    for p in params:
        if p.has_default:
            seen_default = p
        elif seen_default is not None:
            errors.append(f"{op.where}: parameter {p.name!r} without a default follows "
                          f"{seen_default.name!r} which has one; declare it earlier")
    for lang, names in (("Python", [p.py_name for p in params]),
                        ("C++", [p.cpp_name for p in params])):
        for name in sorted({n for n in names if names.count(n) > 1}):
            errors.append(f"{op.where}: two parameters are both spelled {name!r} in {lang}")


def validate(registry: Registry) -> list[str]:
    errors: list[str] = []
    groups = {}
    for g in registry.groups:
        if not naming.GROUP_NAME_RE.match(g.name):
            errors.append(f"registry: group name {g.name!r} must match [a-z][a-z0-9_]*")
        if not FINGERPRINT_RE.match(g.fingerprint):
            errors.append(f"registry: group {g.name!r}: fingerprint {g.fingerprint!r} "
                          "is not 16 lowercase hex digits")
        if g.name in groups:
            errors.append(f"registry: duplicate group {g.name!r}")
        groups[g.name] = g

    op_names: dict[str, OpDef] = {}
    py_names: dict[str, OpDef] = {}
    for op in registry.ops:
        if op.group not in groups:
            errors.append(f"{op.where}: group {op.group!r} is not listed in groups")
        if op.name in op_names:
            errors.append(f"{op.where}: duplicate op name, first declared at "
                          f"{op_names[op.name].source}")
        op_names.setdefault(op.name, op)
        if op.python_name in py_names and py_names[op.python_name].name != op.name:
            other = py_names[op.python_name]
            errors.append(f"{op.where}: Python name {op.python_name!r} is also the name of "
                          f"op {other.name} ({other.source})")
        py_names.setdefault(op.python_name, op)
        if not op.summary.strip():
            errors.append(f"{op.where}: no summary (give the op a .Doc(...))")
        for dev, dtypes in op.kernels:
            for dtype in dtypes:
                if dtype not in registry.dtype_names:
                    errors.append(f"{op.where}: kernel {dev}/{dtype}: unknown dtype")
        _check_names(op, errors)
        bound = _check_args(op, errors, registry.dtype_names)
        for attr in op.attrs:
            _check_attr(op, attr, bound, errors, registry)
        _check_params(op, errors)
    return errors


def check(registry: Registry) -> Registry:
    errors = validate(registry)
    if errors:
        raise CodegenError(errors)
    return registry
