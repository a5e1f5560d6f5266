"""The registry schema as frozen dataclasses; it speaks no target language.

``X.parse(d)`` builds a node from the registry JSON and ``x.to_dict()`` gives
the same JSON back (``to_dict(parse(d)) == d``, key for key). Parsing checks
the shape of the JSON (keys, JSON types, values that fit the attr type,
dtype names that the dtype table knows) and names the op's file:line on
error. What the C++ registry checks at registration (names, defaults,
constraints, parameter order) is not checked again. How a target spells any
of this (Python names and literals, stub hints, C++ types) lives in
wrappers/ (Python) and codegen/targets/ (stubs, SWIG).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Union

from .errors import SchemaError

# 2: per-op "params" (the user-visible parameter order, computed in C++)
# replaced "arg_order"; the dtype and attr-type tables come from C++.
FORMAT = 2


# --- JSON shape helpers ------------------------------------------------------

def _fields(d: Any, keys: tuple[str, ...], where: str) -> dict:
    if not isinstance(d, dict):
        raise SchemaError(f"{where}: expected an object, got {type(d).__name__}")
    missing = [k for k in keys if k not in d]
    extra = sorted(k for k in d if k not in keys)
    if missing or extra:
        raise SchemaError(f"{where}: missing keys {missing}, unknown keys {extra} "
                           f"(registry format {FORMAT})")
    return d


def _optional_flag(d: dict, key: str, where: str) -> tuple[dict, bool]:
    """An optional ``key: true`` (written only where true) split off `d`."""
    if not isinstance(d, dict) or key not in d:
        return d, False
    if d[key] is not True:
        raise SchemaError(f"{where}: {key!r} is written only as true, got {d[key]!r}")
    return {k: v for k, v in d.items() if k != key}, True


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)   # bool is an int subclass


def _is_number(v: Any) -> bool:
    return _is_int(v) or isinstance(v, float)


def _typed(value: Any, types: tuple[type, ...], key: str, where: str, nullable=False):
    if value is None and nullable:
        return None
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        names = "/".join(t.__name__ for t in types) + (" or null" if nullable else "")
        raise SchemaError(f"{where}: {key!r} must be {names}, got {value!r}")
    return value


def _str_list(value: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SchemaError(f"{where}: {key!r} must be a list of strings, got {value!r}")
    return tuple(value)


def _freeze(value: Any) -> Any:
    return tuple(_freeze(v) for v in value) if isinstance(value, list) else value


def _thaw(value: Any) -> Any:
    return [_thaw(v) for v in value] if isinstance(value, tuple) else value


# --- dtypes and attr types ---------------------------------------------------------

@dataclass(frozen=True)
class DType:
    """One row of the registry's dtype table (OPFORGE_DTYPES in cpp/include/opforge/dtype.h)."""
    name: str
    enum: int
    numpy: str
    size: int
    is_floating: bool
    is_integer: bool

    KEYS = ("name", "enum", "numpy", "size", "is_floating", "is_integer")

    @staticmethod
    def parse(d: Any, where: str) -> DType:
        _fields(d, DType.KEYS, where)
        return DType(
            name=_typed(d["name"], (str,), "name", where),
            enum=_typed(d["enum"], (int,), "enum", where),
            numpy=_typed(d["numpy"], (str,), "numpy", where),
            size=_typed(d["size"], (int,), "size", where),
            is_floating=_typed(d["is_floating"], (bool,), "is_floating", where),
            is_integer=_typed(d["is_integer"], (bool,), "is_integer", where))

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in DType.KEYS}

    def __str__(self) -> str:
        return self.name


class DTypeTable:
    """Dtypes by name; resolving an unknown name is a parse error at ``where``."""

    def __init__(self, dtypes: tuple[DType, ...], where: str = "registry: dtypes"):
        self.dtypes = dtypes
        self._by_name = {d.name: d for d in dtypes}
        if len(self._by_name) != len(dtypes):
            raise SchemaError(f"{where}: a dtype name is listed twice")

    def get(self, name: Any, key: str, where: str) -> DType:
        dtype = self._by_name.get(name) if isinstance(name, str) else None
        if dtype is None:
            raise SchemaError(f"{where}: {key!r}: {name!r} is not a dtype "
                               f"(known: {', '.join(self._by_name)})")
        return dtype

    def get_list(self, names: Any, key: str, where: str) -> tuple[DType, ...]:
        if not isinstance(names, list):
            raise SchemaError(f"{where}: {key!r} must be a list of dtype names, got {names!r}")
        return tuple(self.get(n, key, where) for n in names)


class AttrType(enum.Enum):
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    STRING = "string"
    TYPE = "type"
    SHAPE = "shape"
    LIST_INT = "list(int)"
    LIST_FLOAT = "list(float)"
    LIST_TYPE = "list(type)"

    @property
    def is_list(self) -> bool:
        return self in (AttrType.SHAPE, AttrType.LIST_INT, AttrType.LIST_FLOAT,
                        AttrType.LIST_TYPE)

    @staticmethod
    def parse(value: Any, where: str) -> AttrType:
        try:
            return AttrType(value)
        except ValueError:
            known = ", ".join(t.value for t in AttrType)
            raise SchemaError(f"{where}: unknown attr type {value!r} (known: {known})") from None


# An attr value: a Python scalar, a DType, or a tuple of either (lists).
AttrValue = Union[int, float, bool, str, DType, tuple]

_SCALAR_CHECKS = {
    AttrType.INT: (_is_int, "an int"),
    AttrType.FLOAT: (_is_number, "a number"),
    AttrType.BOOL: (lambda v: isinstance(v, bool), "true or false"),
    AttrType.STRING: (lambda v: isinstance(v, str), "a string"),
}
_ELEMENT = {AttrType.SHAPE: AttrType.INT, AttrType.LIST_INT: AttrType.INT,
            AttrType.LIST_FLOAT: AttrType.FLOAT, AttrType.LIST_TYPE: AttrType.TYPE}


def _parse_value(t: AttrType, value: Any, dtypes: DTypeTable, where: str) -> AttrValue:
    if t is AttrType.TYPE:
        return dtypes.get(value, "default", where)
    if t.is_list:
        if not isinstance(value, list):
            raise SchemaError(f"{where}: default {value!r} is not a list")
        return tuple(_parse_value(_ELEMENT[t], v, dtypes, where) for v in value)
    ok, what = _SCALAR_CHECKS[t]
    if not ok(value):
        raise SchemaError(f"{where}: default {value!r} is not {what}")
    return value


def _value_json(value: AttrValue | None) -> Any:
    if isinstance(value, DType):
        return value.name
    if isinstance(value, tuple):
        return [_value_json(v) for v in value]
    return value


# --- schema --------------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    file: str
    line: int

    @staticmethod
    def parse(d: Any, where: str = "source") -> Source:
        _fields(d, ("file", "line"), where)
        return Source(_typed(d["file"], (str,), "file", where),
                      _typed(d["line"], (int,), "line", where))

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line}

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Group:
    name: str
    fingerprint: str

    @staticmethod
    def parse(d: Any, where: str = "group") -> Group:
        _fields(d, ("name", "fingerprint"), where)
        return Group(_typed(d["name"], (str,), "name", where),
                     _typed(d["fingerprint"], (str,), "fingerprint", where))

    def to_dict(self) -> dict:
        return {"name": self.name, "fingerprint": self.fingerprint}


@dataclass(frozen=True)
class ArgDef:
    """An input or output: ``x: T`` (type_attr), ``x: bool`` (fixed_type) or ``values: N * T``."""
    name: str
    type_attr: str | None
    fixed_type: DType | None
    number_attr: str | None
    doc: str
    transpose_attr: str | None = None   # TransposeAttr(): the bool attr reading it transposed

    KEYS = ("name", "type_attr", "fixed_type", "number_attr", "doc")

    @staticmethod
    def parse(d: Any, where: str, dtypes: DTypeTable) -> ArgDef:
        transpose_attr = None
        if isinstance(d, dict) and "transpose_attr" in d:  # written only where declared
            transpose_attr = _typed(d["transpose_attr"], (str,), "transpose_attr", where)
            d = {k: v for k, v in d.items() if k != "transpose_attr"}
        _fields(d, ArgDef.KEYS, where)
        type_attr = _typed(d["type_attr"], (str,), "type_attr", where, nullable=True)
        fixed = d["fixed_type"]
        if (type_attr is None) == (fixed is None):
            raise SchemaError(f"{where}: needs exactly one of type_attr and fixed_type")
        return ArgDef(
            name=_typed(d["name"], (str,), "name", where),
            type_attr=type_attr,
            fixed_type=None if fixed is None else dtypes.get(fixed, "fixed_type", where),
            number_attr=_typed(d["number_attr"], (str,), "number_attr", where, nullable=True),
            doc=_typed(d["doc"], (str,), "doc", where),
            transpose_attr=transpose_attr)

    def to_dict(self) -> dict:
        out = {"name": self.name, "type_attr": self.type_attr,
               "fixed_type": None if self.fixed_type is None else self.fixed_type.name,
               "number_attr": self.number_attr, "doc": self.doc}
        if self.transpose_attr is not None:
            out["transpose_attr"] = self.transpose_attr
        return out

    @property
    def is_list(self) -> bool:
        return self.number_attr is not None


@dataclass(frozen=True)
class AttrDef:
    """An attr: ``axis: list(int) = None``, ``T: {float32, int32}``, ``N: int >= 1``.

    ``default`` is typed by ``type`` (ints, floats, DTypes, tuples for lists);
    None with ``has_default`` is a declared ``= None``.
    """
    name: str
    type: AttrType
    has_default: bool
    default: AttrValue | None
    allowed: tuple[DType, ...] | None
    minimum: int | None
    inferred: bool
    doc: str
    resource: bool = False          # "name: resource": a string naming a resource (stateful ops)

    KEYS = ("name", "type", "has_default", "default", "allowed", "minimum", "inferred", "doc")

    @staticmethod
    def parse(d: Any, where: str, dtypes: DTypeTable) -> AttrDef:
        d, resource = _optional_flag(d, "resource", where)
        _fields(d, AttrDef.KEYS, where)
        name = _typed(d["name"], (str,), "name", where)
        at = f"{where} ({name})"
        attr_type = AttrType.parse(d["type"], at)
        has_default = _typed(d["has_default"], (bool,), "has_default", at)
        default = d["default"]
        if default is not None:
            if not has_default:
                raise SchemaError(f"{at}: has a default value but has_default is false")
            default = _parse_value(attr_type, default, dtypes, at)
        allowed = d["allowed"]
        return AttrDef(
            name=name,
            type=attr_type,
            has_default=has_default,
            default=default,
            allowed=None if allowed is None else dtypes.get_list(allowed, "allowed", at),
            minimum=_typed(d["minimum"], (int,), "minimum", at, nullable=True),
            inferred=_typed(d["inferred"], (bool,), "inferred", at),
            doc=_typed(d["doc"], (str,), "doc", at),
            resource=resource)

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"name": self.name, "type": self.type.value, "has_default": self.has_default,
                               "default": _value_json(self.default),
                               "allowed": None if self.allowed is None else [t.name for t in self.allowed],
                               "minimum": self.minimum, "inferred": self.inferred, "doc": self.doc}
        if self.resource:
            out["resource"] = True
        return out

    @property
    def default_is_none(self) -> bool:
        return self.has_default and self.default is None


@dataclass(frozen=True)
class Param:
    """One user-visible parameter of an op: an input, or an attr that is not inferred."""
    input: ArgDef | None
    attr: AttrDef | None

    @property
    def name(self) -> str:
        if self.input is not None:
            return self.input.name
        assert self.attr is not None  # a Param is an input or an attr
        return self.attr.name

    @property
    def is_input(self) -> bool:
        return self.input is not None

    @property
    def has_default(self) -> bool:
        return self.attr is not None and self.attr.has_default


@dataclass(frozen=True)
class Kernels:
    """The dtypes that have a kernel, per device, in JSON order."""
    device: str
    dtypes: tuple[DType, ...]


# --- gradient declarations (cpp/framework/gradient.h) -------------------------

@dataclass(frozen=True)
class GradAttr:
    """An attr passed in a gradient expression: a literal (JSON value), a
    forward attr, the list element index ``i``, or shape()/inverse_perm()."""
    name: str
    kind: str          # literal | attr | index | function
    value: Any         # literal: the value; attr/function: the name; index: None
    argument: str | None

    KINDS = ("literal", "attr", "index", "function")

    @staticmethod
    def parse(d: Any, where: str) -> GradAttr:
        _fields(d, ("argument", "kind", "name", "value"), where)
        kind = _typed(d["kind"], (str,), "kind", where)
        if kind not in GradAttr.KINDS:
            raise SchemaError(f"{where}: unknown attr value kind {kind!r}")
        return GradAttr(name=_typed(d["name"], (str,), "name", where), kind=kind,
                        value=_freeze(d["value"]),
                        argument=_typed(d["argument"], (str,), "argument", where, nullable=True))

    def to_dict(self) -> dict:
        return {"argument": self.argument, "kind": self.kind, "name": self.name, "value": _thaw(self.value)}


@dataclass(frozen=True)
class GradExpr:
    """None, a number (as written), a name (input/output/grad), an op call or
    a list (for a list input: literal, append(list, e), replace(list, e))."""
    kind: str                 # none | number | name | call | list
    text: str = ""            # number: as written; name: the name; call: the op; list: literal | append | replace
    name_kind: str = ""       # name: input | output | grad | attr | local
    index: int = 0            # name: which input or output
    args: tuple[GradExpr, ...] = ()
    attrs: tuple[GradAttr, ...] = ()

    @staticmethod
    def parse(d: Any, where: str) -> GradExpr:
        if d is None:
            return GradExpr("none")
        if isinstance(d, dict) and "number" in d:
            _fields(d, ("number",), where)
            return GradExpr("number", text=_typed(d["number"], (str,), "number", where))
        if isinstance(d, dict) and "list" in d:
            _fields(d, ("elements", "list"), where)
            text = _typed(d["list"], (str,), "list", where)
            elements = tuple(GradExpr.parse(a, f"{where}: elements[{i}]")
                             for i, a in enumerate(_typed(d["elements"], (list,), "elements", where)))
            if text not in ("literal", "append", "replace") or (text != "literal" and len(elements) != 2):
                raise SchemaError(f"{where}: unknown list expression {text!r} of {len(elements)} elements")
            return GradExpr("list", text=text, args=elements)
        if isinstance(d, dict) and "op" in d:
            _fields(d, ("args", "attrs", "op"), where)
            return GradExpr(
                "call", text=_typed(d["op"], (str,), "op", where),
                args=tuple(GradExpr.parse(a, f"{where}: args[{i}]")
                           for i, a in enumerate(_typed(d["args"], (list,), "args", where))),
                attrs=tuple(GradAttr.parse(a, f"{where}: attrs[{i}]")
                            for i, a in enumerate(_typed(d["attrs"], (list,), "attrs", where))))
        _fields(d, ("index", "kind", "name"), where)
        kind = _typed(d["kind"], (str,), "kind", where)
        if kind not in ("input", "output", "grad", "attr", "local"):
            raise SchemaError(f"{where}: unknown name kind {kind!r}")
        return GradExpr("name", text=_typed(d["name"], (str,), "name", where), name_kind=kind,
                        index=_typed(d["index"], (int,), "index", where))

    def to_dict(self) -> Any:
        if self.kind == "none":
            return None
        if self.kind == "number":
            return {"number": self.text}
        if self.kind == "call":
            return {"args": [a.to_dict() for a in self.args], "attrs": [a.to_dict() for a in self.attrs],
                    "op": self.text}
        if self.kind == "list":
            return {"elements": [a.to_dict() for a in self.args], "list": self.text}
        return {"index": self.index, "kind": self.name_kind, "name": self.text}


@dataclass(frozen=True)
class GradRule:
    targets: tuple[str, ...]    # input names; a local (`let name = ...`): its name
    per_element: bool
    spec: str
    expr: GradExpr
    local: bool = False

    @staticmethod
    def parse(d: Any, where: str) -> GradRule:
        _fields(d, ("expr", "local", "per_element", "spec", "targets"), where)
        spec = _typed(d["spec"], (str,), "spec", where)
        return GradRule(targets=_str_list(d["targets"], "targets", where),
                        per_element=_typed(d["per_element"], (bool,), "per_element", where), spec=spec,
                        expr=GradExpr.parse(d["expr"], f"{where}: {spec!r}"),
                        local=_typed(d["local"], (bool,), "local", where))

    def to_dict(self) -> dict:
        return {"expr": self.expr.to_dict(), "local": self.local, "per_element": self.per_element,
                "spec": self.spec, "targets": list(self.targets)}


@dataclass(frozen=True)
class Gradient:
    none: bool                  # declared NoGradient()
    rules: tuple[GradRule, ...]

    @staticmethod
    def parse(d: Any, where: str) -> Gradient:
        _fields(d, ("none", "rules"), where)
        return Gradient(none=_typed(d["none"], (bool,), "none", where),
                        rules=tuple(GradRule.parse(r, f"{where}: rules[{i}]")
                                    for i, r in enumerate(_typed(d["rules"], (list,), "rules", where))))

    def to_dict(self) -> dict:
        return {"none": self.none, "rules": [r.to_dict() for r in self.rules]}

    @property
    def declared(self) -> bool:
        return self.none or bool(self.rules)


def _category(value: Any, where: str) -> str:
    category = _typed(value, (str,), "category", where)
    if category not in OpDef.CATEGORIES:
        raise SchemaError(f"{where}: category {category!r} is not one of {OpDef.CATEGORIES}")
    return category


@dataclass(frozen=True)
class OpDef:
    name: str
    group: str
    source: Source
    summary: str
    description: str
    inputs: tuple[ArgDef, ...]
    outputs: tuple[ArgDef, ...]
    attrs: tuple[AttrDef, ...]
    param_names: tuple[str, ...]    # JSON "params": inputs and non-inferred attrs, in order
    kernels: tuple[Kernels, ...]
    gradient: Gradient
    category: str                   # how it distributes (OpDefBuilder::Category): "none", ...
    stateful: bool = False          # SetIsStateful(): reads or changes state (resources, draw counters)

    KEYS = ("name", "group", "source", "summary", "description", "inputs", "outputs",
            "attrs", "params", "kernels", "gradient", "category")
    CATEGORIES = ("elementwise", "reduction", "mean", "arg_reduction", "contraction",
                  "whole_axis", "layout", "none")

    @staticmethod
    def parse(d: Any, dtypes: DTypeTable, where: str = "op") -> OpDef:
        if isinstance(d, dict):  # name the op and its declaration in every error
            name, src = d.get("name"), d.get("source")
            if isinstance(src, dict) and "file" in src and "line" in src:
                where = f"{src['file']}:{src['line']}: op {name}"
            elif isinstance(name, str):
                where = f"op {name}"
        d, stateful = _optional_flag(d, "stateful", where)
        _fields(d, OpDef.KEYS, where)

        def args(key: str) -> tuple[ArgDef, ...]:
            items = _typed(d[key], (list,), key, where)
            return tuple(ArgDef.parse(a, f"{where}: {key}[{i}]", dtypes)
                         for i, a in enumerate(items))

        attrs = tuple(AttrDef.parse(a, f"{where}: attrs[{i}]", dtypes)
                      for i, a in enumerate(_typed(d["attrs"], (list,), "attrs", where)))
        inputs = args("inputs")
        param_names = _str_list(d["params"], "params", where)
        declared = {a.name for a in inputs} | {a.name for a in attrs if not a.inferred}
        unknown = [n for n in param_names if n not in declared]
        if unknown:
            raise SchemaError(f"{where}: params names {unknown}, which are neither "
                               "inputs nor attrs that are not inferred")
        bools = {a.name for a in attrs if a.type is AttrType.BOOL and not a.inferred}
        for a in inputs:
            if a.transpose_attr is not None and (a.is_list or a.transpose_attr not in bools):
                raise SchemaError(f"{where}: input {a.name!r} names transpose_attr "
                                  f"{a.transpose_attr!r}, which is not a bool attr (or the input is a list)")
        kernels = _typed(d["kernels"], (dict,), "kernels", where)
        return OpDef(
            name=_typed(d["name"], (str,), "name", where),
            group=_typed(d["group"], (str,), "group", where),
            source=Source.parse(d["source"], f"{where}: source"),
            summary=_typed(d["summary"], (str,), "summary", where),
            description=_typed(d["description"], (str,), "description", where),
            inputs=inputs,
            outputs=args("outputs"),
            attrs=attrs,
            param_names=param_names,
            kernels=tuple(Kernels(dev, dtypes.get_list(types, f"kernels.{dev}", where))
                          for dev, types in kernels.items()),
            gradient=Gradient.parse(d["gradient"], f"{where}: gradient"),
            category=_category(d["category"], where),
            stateful=stateful)

    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "name": self.name, "group": self.group, "source": self.source.to_dict(),
            "summary": self.summary, "description": self.description,
            "inputs": [a.to_dict() for a in self.inputs],
            "outputs": [a.to_dict() for a in self.outputs],
            "attrs": [a.to_dict() for a in self.attrs],
            "params": list(self.param_names),
            "kernels": {k.device: [t.name for t in k.dtypes] for k in self.kernels},
            "gradient": self.gradient.to_dict(),
            "category": self.category,
        }
        if self.stateful:
            out["stateful"] = True
        return out

    @property
    def where(self) -> str:
        """The prefix of every message about this op: ``file:line: op Name``."""
        return f"{self.source}: op {self.name}"

    def find_attr(self, name: str) -> AttrDef | None:
        return next((a for a in self.attrs if a.name == name), None)

    def find_input(self, name: str) -> ArgDef | None:
        return next((a for a in self.inputs if a.name == name), None)

    @property
    def params(self) -> tuple[Param, ...]:
        """Inputs and non-inferred attrs, in the registry's "params" order."""
        return tuple(Param(self.find_input(n), None) if self.find_input(n) is not None
                     else Param(None, self.find_attr(n)) for n in self.param_names)

    @property
    def input_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.is_input)

    @property
    def attr_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if not p.is_input)


@dataclass(frozen=True)
class Registry:
    format: int
    attr_types: tuple[AttrType, ...]    # C++'s, in its order
    dtypes: tuple[DType, ...]
    groups: tuple[Group, ...]
    ops: tuple[OpDef, ...]

    @staticmethod
    def parse(d: Any) -> Registry:
        where = "registry"
        if isinstance(d, dict) and d.get("format") != FORMAT:  # before the keys: they differ
            raise SchemaError(f"{where}: format {d.get('format')!r} is not supported "
                               f"(expected {FORMAT}); rebuild the dump tool")
        _fields(d, ("format", "attr_types", "dtypes", "groups", "ops"), where)
        # Every attr type C++ knows must be one this generator can render.
        attr_types = tuple(AttrType.parse(t, f"{where}: attr_types")
                           for t in _str_list(d["attr_types"], "attr_types", where))
        dtypes = tuple(DType.parse(t, f"{where}: dtypes[{i}]")
                       for i, t in enumerate(_typed(d["dtypes"], (list,), "dtypes", where)))
        table = DTypeTable(dtypes)
        groups = _typed(d["groups"], (list,), "groups", where)
        ops = _typed(d["ops"], (list,), "ops", where)
        return Registry(
            format=d["format"],
            attr_types=attr_types,
            dtypes=dtypes,
            groups=tuple(Group.parse(g, f"{where}: groups[{i}]") for i, g in enumerate(groups)),
            ops=tuple(OpDef.parse(o, table, f"{where}: ops[{i}]") for i, o in enumerate(ops)))

    def to_dict(self) -> dict:
        return {"format": self.format, "attr_types": [t.value for t in self.attr_types],
                "dtypes": [t.to_dict() for t in self.dtypes],
                "groups": [g.to_dict() for g in self.groups],
                "ops": [o.to_dict() for o in self.ops]}

    @property
    def dtype_table(self) -> DTypeTable:
        return DTypeTable(self.dtypes)

    def group_ops(self) -> tuple[tuple[Group, tuple[OpDef, ...]], ...]:
        """Each group with its ops: groups sorted by name, ops by op name."""
        return tuple(
            (g, tuple(sorted((o for o in self.ops if o.group == g.name), key=lambda o: o.name)))
            for g in sorted(self.groups, key=lambda g: g.name))
