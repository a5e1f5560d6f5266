"""The Python target: views for gen_<group>_ops.py and the ops package ``__init__``.

Parameter names get a trailing ``_`` when they are Python keywords (see
naming.py), defaults become Python source (lists as tuples, dtypes as their
names). A built-in op's function is its C++ entry point itself, exported
under the op's Python name with a text signature and the docstring
(``public_doc``; swig/py_entry_points.cc), so a call runs no Python frame.
Where that cannot be (a custom library's op, a default that is not a plain
literal) the wrapper is a ``def`` that passes all its parameters
positionally to the entry point, in the op's parameter order.
"""
from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass
from typing import Any

from .. import naming
from ..model import AttrType, DType, Group, OpDef, Param, Registry
from . import docstrings


# --- literals and filters ----------------------------------------------------------

def py_str(s: str) -> str:
    """A double-quoted Python string literal (the ``pystr`` filter)."""
    return json.dumps(s, ensure_ascii=False)


def pydoc(text: str, indent: int = 4) -> str:
    """Escapes text for a triple-quoted docstring and indents lines after the first
    (the ``pydoc`` filter)."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"').replace("\r", "\\r")
    text = text.replace("\t", "\\t")
    text = "".join(c if c == "\n" or c >= " " else f"\\x{ord(c):02x}" for c in text)
    if text.endswith('"'):
        text = text[:-1] + '\\"'
    pad = " " * indent
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    body = "\n".join((pad + line) if line.strip() else "" for line in lines[1:])
    return f"{lines[0]}\n{body}\n{pad}"


def _py_float(x: Any) -> str:
    f = float(x)
    if math.isnan(f):
        return 'float("nan")'
    if math.isinf(f):
        return 'float("inf")' if f > 0 else '-float("inf")'
    return repr(f)


def tuple_display(items: list[str]) -> str:
    """``(a, b)``, ``(a,)`` or ``()``."""
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


_SCALAR_LITERALS = {
    AttrType.INT: lambda v: str(int(v)),
    AttrType.FLOAT: _py_float,
    AttrType.BOOL: lambda v: "True" if v else "False",
    AttrType.STRING: py_str,
    AttrType.TYPE: lambda v: py_str(v.name if isinstance(v, DType) else v),
}
_ELEMENT = {AttrType.SHAPE: AttrType.INT, AttrType.LIST_INT: AttrType.INT,
            AttrType.LIST_FLOAT: AttrType.FLOAT, AttrType.LIST_TYPE: AttrType.TYPE}


def py_literal(attr_type: AttrType, value: Any) -> str:
    """The Python source of an attr value: lists become tuples, dtypes strings."""
    if value is None:
        return "None"
    if attr_type.is_list:
        return tuple_display([_SCALAR_LITERALS[_ELEMENT[attr_type]](v) for v in value])
    return _SCALAR_LITERALS[attr_type](value)


# --- views -----------------------------------------------------------------------

@dataclass(frozen=True)
class PyParam:
    """One parameter of a wrapper."""
    param: Param            # the schema node (docstrings read its arg or attr)
    py_name: str            # "from_" for attr "from"
    default: str | None     # Python source of the default; None if it has none

    @staticmethod
    def of(param: Param) -> PyParam:
        attr = param.attr
        default = py_literal(attr.type, attr.default) if attr is not None and attr.has_default else None
        return PyParam(param, naming.python_ident(param.name), default)

    @property
    def name(self) -> str:
        return self.param.name

    @property
    def is_input(self) -> bool:
        return self.param.is_input

    @property
    def decl(self) -> str:
        """``x`` or ``axis=None``."""
        return self.py_name if self.default is None else f"{self.py_name}={self.default}"


@dataclass(frozen=True)
class PyOp:
    """One wrapper function."""
    op: OpDef
    python_name: str
    params: tuple[PyParam, ...]

    @staticmethod
    def of(op: OpDef) -> PyOp:
        return PyOp(op, naming.op_python_name(op.name), tuple(PyParam.of(p) for p in op.params))

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def signature(self) -> str:
        return ", ".join(p.decl for p in self.params)

    @property
    def call_args(self) -> str:
        return ", ".join(p.py_name for p in self.params)

    @property
    def call_tuple(self) -> str:
        """The parameters as a tuple display: ``(x, y)``, ``(x,)`` or ``()``."""
        return tuple_display([p.py_name for p in self.params])

    @property
    def input_tuple(self) -> str:
        """The inputs as a tuple display (the generic execute path's inputs)."""
        return tuple_display([p.py_name for p in self.params if p.is_input])

    @property
    def attr_tuple(self) -> str:
        """The attr parameters as a tuple display, in parameter order."""
        return tuple_display([p.py_name for p in self.params if not p.is_input])

    @property
    def docstring(self) -> str:
        """The docstring text (unescaped, unindented: the ``pydoc`` filter does that)."""
        return docstrings.op_docstring(self)

    @property
    def text_signature(self) -> bool:
        """Whether Python can read this signature off a builtin's docstring
        (inspect takes only literal defaults there)."""
        try:
            for p in self.params:
                if p.default is not None:
                    ast.literal_eval(p.default)
        except ValueError:
            return False
        return True

    @property
    def public_doc(self) -> str:
        """The entry point's docstring as exported: ``name(signature)``, the
        ``--`` line that makes it the builtin's text signature, then the docstring."""
        return f"{self.python_name}({self.signature})\n--\n\n{self.docstring}"


@dataclass(frozen=True)
class PyModule:
    """One gen_<group>_ops.py module."""
    name: str               # the group
    fingerprint: str
    ops: tuple[PyOp, ...]   # sorted by op name

    @staticmethod
    def of(group: Group, ops: tuple[OpDef, ...]) -> PyModule:
        return PyModule(group.name, group.fingerprint, tuple(PyOp.of(o) for o in ops))

    @property
    def module_name(self) -> str:
        return module_name(self.name)

    @property
    def python_names(self) -> tuple[str, ...]:
        """The module's ``__all__``, sorted."""
        return tuple(sorted(op.python_name for op in self.ops))


@dataclass(frozen=True)
class PyPackage:
    """The ops package ``__init__``: every module, re-exported."""
    modules: tuple[PyModule, ...]

    @staticmethod
    def of(registry: Registry) -> PyPackage:
        return PyPackage(tuple(PyModule.of(g, ops) for g, ops in registry.group_ops()))

    @property
    def python_names(self) -> tuple[str, ...]:
        """Every public wrapper, sorted: ``opforge.ops.__all__``."""
        return tuple(sorted(n for m in self.modules for n in m.python_names))


def module_name(group: str) -> str:
    return f"gen_{group}_ops"
