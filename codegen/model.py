"""The registry schema as frozen dataclasses.

``X.parse(d)`` builds a node from the registry JSON and ``x.to_dict()`` gives
the same JSON back (``to_dict(parse(d)) == d``, key for key). Parse checks the
shape of the JSON (keys, JSON types) and names the op's file:line on error;
semantic checks live in validate.py. The derived properties below (Python
names, parameters, type hints, docstrings) are all the templates read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import docstrings, naming, pytypes
from .errors import CodegenError

# 2: "params" (the user-visible parameter order, computed in C++) replaced
# "arg_order"; the dtype and attr-type tables come from C++ ("dtypes",
# "attr_types"), not from a copy here.
FORMAT = 2


# --- JSON shape helpers ------------------------------------------------------

def _fields(d: Any, keys: tuple[str, ...], where: str) -> dict:
    if not isinstance(d, dict):
        raise CodegenError(f"{where}: expected an object, got {type(d).__name__}")
    missing = [k for k in keys if k not in d]
    extra = sorted(k for k in d if k not in keys)
    if missing or extra:
        raise CodegenError(f"{where}: missing keys {missing}, unknown keys {extra} "
                           f"(registry format {FORMAT})")
    return d


def _typed(value: Any, types: tuple[type, ...], key: str, where: str, nullable=False):
    if value is None and nullable:
        return None
    # bool is an int subclass: only accept it where bool is asked for.
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        names = "/".join(t.__name__ for t in types) + (" or null" if nullable else "")
        raise CodegenError(f"{where}: {key!r} must be {names}, got {value!r}")
    return value


def _str_list(value: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CodegenError(f"{where}: {key!r} must be a list of strings, got {value!r}")
    return tuple(value)


def _freeze(value: Any) -> Any:
    return tuple(_freeze(v) for v in value) if isinstance(value, list) else value


def _thaw(value: Any) -> Any:
    return [_thaw(v) for v in value] if isinstance(value, tuple) else value


def _tuple_display(names: list[str]) -> str:
    return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"


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
class DTypeInfo:
    """One row of the C++ dtype table (cpp/include/opforge/dtype.h)."""
    name: str
    enum: int
    numpy: str
    size: int
    is_floating: bool
    is_integer: bool

    KEYS = ("name", "enum", "numpy", "size", "is_floating", "is_integer")

    @staticmethod
    def parse(d: Any, where: str = "dtype") -> DTypeInfo:
        _fields(d, DTypeInfo.KEYS, where)
        return DTypeInfo(
            name=_typed(d["name"], (str,), "name", where),
            enum=_typed(d["enum"], (int,), "enum", where),
            numpy=_typed(d["numpy"], (str,), "numpy", where),
            size=_typed(d["size"], (int,), "size", where),
            is_floating=_typed(d["is_floating"], (bool,), "is_floating", where),
            is_integer=_typed(d["is_integer"], (bool,), "is_integer", where))

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in DTypeInfo.KEYS}


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
    """An input or output: ``x: T``, ``x: bool`` or ``values: N * T``."""
    name: str
    type_attr: str | None
    fixed_type: str | None
    number_attr: str | None
    doc: str

    KEYS = ("name", "type_attr", "fixed_type", "number_attr", "doc")

    @staticmethod
    def parse(d: Any, where: str) -> ArgDef:
        _fields(d, ArgDef.KEYS, where)
        return ArgDef(
            name=_typed(d["name"], (str,), "name", where),
            type_attr=_typed(d["type_attr"], (str,), "type_attr", where, nullable=True),
            fixed_type=_typed(d["fixed_type"], (str,), "fixed_type", where, nullable=True),
            number_attr=_typed(d["number_attr"], (str,), "number_attr", where, nullable=True),
            doc=_typed(d["doc"], (str,), "doc", where))

    def to_dict(self) -> dict:
        return {"name": self.name, "type_attr": self.type_attr, "fixed_type": self.fixed_type,
                "number_attr": self.number_attr, "doc": self.doc}

    @property
    def is_list(self) -> bool:
        return self.number_attr is not None

    @property
    def dtype(self) -> str:
        """The attr name or fixed dtype that gives this arg's element type."""
        return self.type_attr if self.type_attr is not None else (self.fixed_type or "?")


@dataclass(frozen=True)
class AttrDef:
    """An attr: ``axis: list(int) = None``, ``T: {float32, int32}``, ``N: int >= 1``."""
    name: str
    type: str
    has_default: bool
    default: Any            # JSON value, lists frozen to tuples; None = "= None"
    allowed: tuple[str, ...] | None
    minimum: int | None
    inferred: bool
    doc: str

    KEYS = ("name", "type", "has_default", "default", "allowed", "minimum", "inferred", "doc")

    @staticmethod
    def parse(d: Any, where: str) -> AttrDef:
        _fields(d, AttrDef.KEYS, where)
        allowed = d["allowed"]
        return AttrDef(
            name=_typed(d["name"], (str,), "name", where),
            type=_typed(d["type"], (str,), "type", where),
            has_default=_typed(d["has_default"], (bool,), "has_default", where),
            default=_freeze(d["default"]),
            allowed=None if allowed is None else _str_list(allowed, "allowed", where),
            minimum=_typed(d["minimum"], (int,), "minimum", where, nullable=True),
            inferred=_typed(d["inferred"], (bool,), "inferred", where),
            doc=_typed(d["doc"], (str,), "doc", where))

    def to_dict(self) -> dict:
        return {"name": self.name, "type": self.type, "has_default": self.has_default,
                "default": _thaw(self.default),
                "allowed": None if self.allowed is None else list(self.allowed),
                "minimum": self.minimum, "inferred": self.inferred, "doc": self.doc}

    @property
    def default_is_none(self) -> bool:
        return self.has_default and self.default is None


@dataclass(frozen=True)
class Param:
    """One Python parameter (and C++ entry-point parameter): an input or a user attr."""
    input: ArgDef | None
    attr: AttrDef | None

    @property
    def name(self) -> str:
        return self.input.name if self.input is not None else self.attr.name

    @property
    def is_input(self) -> bool:
        return self.input is not None

    @property
    def py_name(self) -> str:
        return naming.python_ident(self.name)

    @property
    def cpp_name(self) -> str:
        return naming.cpp_ident(self.name)

    @property
    def has_default(self) -> bool:
        return self.attr is not None and self.attr.has_default

    @property
    def py_default(self) -> str:
        """The default as Python source ("None", "False", "(0, 1)", '"float32"')."""
        return pytypes.py_literal(self.attr.type, self.attr.default)

    @property
    def pyi_hint(self) -> str:
        if self.input is not None:
            return "Sequence[TensorLike]" if self.input.is_list else "TensorLike"
        hint = pytypes.ATTR_HINTS[self.attr.type]
        return hint + " | None" if self.attr.default_is_none else hint

    @property
    def py_decl(self) -> str:
        return f"{self.py_name}={self.py_default}" if self.has_default else self.py_name

    @property
    def pyi_decl(self) -> str:
        decl = f"{self.py_name}: {self.pyi_hint}"
        return f"{decl} = {self.py_default}" if self.has_default else decl

    @property
    def cpp_type(self) -> str:
        return "PyObject*" if self.input is not None else pytypes.CPP_ATTR_TYPES[self.attr.type]

    @property
    def cpp_decl(self) -> str:
        return f"{self.cpp_type} {self.cpp_name}"

    @property
    def cpp_value(self) -> str:
        """How the entry point passes it on: the PyObject* or the moved AttrValue."""
        return self.cpp_name if self.input is not None else f"std::move({self.cpp_name}.value)"


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
            raise CodegenError(f"{where}: unknown attr value kind {kind!r}")
        return GradAttr(name=_typed(d["name"], (str,), "name", where), kind=kind,
                        value=_freeze(d["value"]),
                        argument=_typed(d["argument"], (str,), "argument", where, nullable=True))

    def to_dict(self) -> dict:
        return {"argument": self.argument, "kind": self.kind, "name": self.name, "value": _thaw(self.value)}


@dataclass(frozen=True)
class GradExpr:
    """None, a number (as written), a name (input/output/grad) or an op call."""
    kind: str                 # none | number | name | call
    text: str = ""            # number: as written; name: the name; call: the op
    name_kind: str = ""       # name: input | output | grad | attr
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
        if kind not in ("input", "output", "grad", "attr"):
            raise CodegenError(f"{where}: unknown name kind {kind!r}")
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
        return {"index": self.index, "kind": self.name_kind, "name": self.text}


@dataclass(frozen=True)
class GradRule:
    targets: tuple[str, ...]
    per_element: bool
    spec: str
    expr: GradExpr

    @staticmethod
    def parse(d: Any, where: str) -> GradRule:
        _fields(d, ("expr", "per_element", "spec", "targets"), where)
        spec = _typed(d["spec"], (str,), "spec", where)
        return GradRule(targets=_str_list(d["targets"], "targets", where),
                        per_element=_typed(d["per_element"], (bool,), "per_element", where), spec=spec,
                        expr=GradExpr.parse(d["expr"], f"{where}: {spec!r}"))

    def to_dict(self) -> dict:
        return {"expr": self.expr.to_dict(), "per_element": self.per_element, "spec": self.spec,
                "targets": list(self.targets)}


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
    param_names: tuple[str, ...]   # JSON "params": inputs and user attrs, in order (from C++)
    kernels: tuple[tuple[str, tuple[str, ...]], ...]   # (device, dtypes) in JSON order
    gradient: Gradient

    KEYS = ("name", "group", "source", "summary", "description", "inputs", "outputs",
            "attrs", "params", "kernels", "gradient")

    @staticmethod
    def parse(d: Any, where: str = "op") -> OpDef:
        if isinstance(d, dict):  # name the op and its declaration in every error
            name, src = d.get("name"), d.get("source")
            if isinstance(src, dict) and "file" in src and "line" in src:
                where = f"{src['file']}:{src['line']}: op {name}"
            elif isinstance(name, str):
                where = f"op {name}"
        _fields(d, OpDef.KEYS, where)

        def args(key: str) -> tuple[ArgDef, ...]:
            items = _typed(d[key], (list,), key, where)
            return tuple(ArgDef.parse(a, f"{where}: {key}[{i}]") for i, a in enumerate(items))

        kernels = _typed(d["kernels"], (dict,), "kernels", where)
        return OpDef(
            name=_typed(d["name"], (str,), "name", where),
            group=_typed(d["group"], (str,), "group", where),
            source=Source.parse(d["source"], f"{where}: source"),
            summary=_typed(d["summary"], (str,), "summary", where),
            description=_typed(d["description"], (str,), "description", where),
            inputs=args("inputs"),
            outputs=args("outputs"),
            attrs=tuple(AttrDef.parse(a, f"{where}: attrs[{i}]")
                        for i, a in enumerate(_typed(d["attrs"], (list,), "attrs", where))),
            param_names=_str_list(d["params"], "params", where),
            kernels=tuple((dev, _str_list(types, f"kernels.{dev}", where))
                          for dev, types in kernels.items()),
            gradient=Gradient.parse(d["gradient"], f"{where}: gradient"))

    def to_dict(self) -> dict:
        return {
            "name": self.name, "group": self.group, "source": self.source.to_dict(),
            "summary": self.summary, "description": self.description,
            "inputs": [a.to_dict() for a in self.inputs],
            "outputs": [a.to_dict() for a in self.outputs],
            "attrs": [a.to_dict() for a in self.attrs],
            "params": list(self.param_names),
            "kernels": {dev: list(types) for dev, types in self.kernels},
            "gradient": self.gradient.to_dict(),
        }

    # --- lookups ---------------------------------------------------------------
    @property
    def where(self) -> str:
        """The prefix of every message about this op: ``file:line: op Name``."""
        return f"{self.source}: op {self.name}"

    def find_attr(self, name: str) -> AttrDef | None:
        return next((a for a in self.attrs if a.name == name), None)

    def find_input(self, name: str) -> ArgDef | None:
        return next((a for a in self.inputs if a.name == name), None)

    # --- what the templates read --------------------------------------------------
    @property
    def python_name(self) -> str:
        return naming.op_python_name(self.name)

    @property
    def params(self) -> tuple[Param, ...]:
        """Inputs and non-inferred attrs, in the registry's "params" order."""
        out = []
        for name in self.param_names:
            arg, attr = self.find_input(name), self.find_attr(name)
            if arg is not None:
                out.append(Param(arg, None))
            elif attr is not None:
                out.append(Param(None, attr))
        return tuple(out)

    @property
    def input_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.is_input)

    @property
    def attr_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if not p.is_input)

    @property
    def py_signature(self) -> str:
        return ", ".join(p.py_decl for p in self.params)

    @property
    def pyi_signature(self) -> str:
        return ", ".join(p.pyi_decl for p in self.params)

    @property
    def py_call_args(self) -> str:
        return ", ".join(p.py_name for p in self.params)

    @property
    def py_call_tuple(self) -> str:
        """The parameters as a tuple display: ``(x, y)``, ``(x,)`` or ``()``."""
        return _tuple_display([p.py_name for p in self.params])

    @property
    def py_input_tuple(self) -> str:
        """The input parameters as a tuple display (the generic execute path's inputs)."""
        return _tuple_display([p.py_name for p in self.input_params])

    @property
    def py_attr_tuple(self) -> str:
        """The attr parameters as a tuple display, in cpp_attr_names order."""
        return _tuple_display([p.py_name for p in self.attr_params])

    @property
    def return_hint(self) -> str:
        hints = ["list[Tensor]" if o.is_list else "Tensor" for o in self.outputs]
        if not hints:
            return "None"
        return hints[0] if len(hints) == 1 else f"tuple[{', '.join(hints)}]"

    @property
    def docstring(self) -> str:
        """The Python docstring text (unescaped, unindented)."""
        return docstrings.op_docstring(self)

    @property
    def swig_docstring(self) -> str:
        """The raw extension function's docstring: signature line, then the summary."""
        sig = f"{self.name}({self.py_signature}) -> {self.return_hint}"
        return f"{sig}\n\n{self.summary}" if self.summary else sig

    @property
    def cpp_attr_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.attr_params)


@dataclass(frozen=True)
class GroupModule:
    """One group's generated modules: the group and its ops, sorted by name."""
    group: Group
    ops: tuple[OpDef, ...]

    @property
    def name(self) -> str:
        return self.group.name

    @property
    def fingerprint(self) -> str:
        return self.group.fingerprint

    @property
    def module_name(self) -> str:
        return f"gen_{self.group.name}_ops"

    @property
    def grads_module_name(self) -> str:
        return f"gen_{self.group.name}_grads"

    @property
    def python_names(self) -> tuple[str, ...]:
        """The module's ``__all__``, sorted."""
        return tuple(sorted(op.python_name for op in self.ops))

    @property
    def stub_imports(self) -> tuple[str, ...]:
        """The .pyi import lines, only of names the stubs use (stdlib block first)."""
        hints = " ".join(p.pyi_hint for op in self.ops for p in op.params)
        returns = " ".join(op.return_hint for op in self.ops)
        lines = []
        if "Sequence[" in hints:
            lines += ["from collections.abc import Sequence", ""]
        if "Tensor" in returns:
            lines.append("from opforge import Tensor")
        typing = [n for n in ("DTypeLike", "TensorLike") if n in hints]
        if typing:
            lines.append(f"from opforge._typing import {', '.join(typing)}")
        return tuple(lines)


@dataclass(frozen=True)
class Registry:
    format: int
    attr_types: tuple[str, ...]
    dtypes: tuple[DTypeInfo, ...]
    groups: tuple[Group, ...]
    ops: tuple[OpDef, ...]

    @staticmethod
    def parse(d: Any) -> Registry:
        where = "registry"
        if isinstance(d, dict) and d.get("format") != FORMAT:
            raise CodegenError(f"{where}: format {d.get('format')!r} is not supported "
                               f"(expected {FORMAT})")
        _fields(d, ("format", "attr_types", "dtypes", "groups", "ops"), where)
        fmt = _typed(d["format"], (int,), "format", where)
        groups = _typed(d["groups"], (list,), "groups", where)
        ops = _typed(d["ops"], (list,), "ops", where)
        dtypes = _typed(d["dtypes"], (list,), "dtypes", where)
        return Registry(
            format=fmt,
            attr_types=_str_list(d["attr_types"], "attr_types", where),
            dtypes=tuple(DTypeInfo.parse(t, f"{where}: dtypes[{i}]") for i, t in enumerate(dtypes)),
            groups=tuple(Group.parse(g, f"{where}: groups[{i}]") for i, g in enumerate(groups)),
            ops=tuple(OpDef.parse(o, f"{where}: ops[{i}]") for i, o in enumerate(ops)))

    def to_dict(self) -> dict:
        return {"format": self.format, "attr_types": list(self.attr_types),
                "dtypes": [t.to_dict() for t in self.dtypes],
                "groups": [g.to_dict() for g in self.groups],
                "ops": [o.to_dict() for o in self.ops]}

    @property
    def dtype_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.dtypes)

    @property
    def modules(self) -> tuple[GroupModule, ...]:
        """One per group, sorted by group name; ops sorted by op name."""
        return tuple(
            GroupModule(g, tuple(sorted((o for o in self.ops if o.group == g.name),
                                        key=lambda o: o.name)))
            for g in sorted(self.groups, key=lambda g: g.name))

    @property
    def python_names(self) -> tuple[str, ...]:
        """Every public wrapper, sorted: ``opforge.ops.__all__``."""
        return tuple(sorted(n for m in self.modules for n in m.python_names))
