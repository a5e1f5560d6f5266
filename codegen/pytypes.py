"""Per-attr-type tables: Python type hints, C++ parameter types, Python literals."""
from __future__ import annotations

import json
import math
from typing import Any

# .pyi hint of an attr parameter, by attr type ("| None" is added for "= None").
ATTR_HINTS = {
    "int": "int",
    "float": "float",
    "bool": "bool",
    "string": "str",
    "type": "DTypeLike",
    "shape": "Sequence[int] | int",
    "list(int)": "Sequence[int] | int",
    "list(float)": "Sequence[float]",
    "list(type)": "Sequence[DTypeLike]",
}

# C++ parameter type of an attr in the SWIG entry point; the typemaps in swig/
# convert the Python object into its `opforge::AttrValue value` member.
CPP_ATTR_TYPES = {
    "int": "opforge::py::IntAttr",
    "float": "opforge::py::FloatAttr",
    "bool": "opforge::py::BoolAttr",
    "string": "opforge::py::StringAttr",
    "type": "opforge::py::TypeAttr",
    "shape": "opforge::py::ShapeAttr",
    "list(int)": "opforge::py::IntListAttr",
    "list(float)": "opforge::py::FloatListAttr",
    "list(type)": "opforge::py::TypeListAttr",
}

# How docstrings name a value of each attr type: the alternatives accepted.
ATTR_NOUNS = {
    "int": ("an int",),
    "float": ("a float",),
    "bool": ("a bool",),
    "string": ("a string",),
    "type": ("a dtype",),
    "shape": ("a shape (a sequence of ints)", "an int"),
    "list(int)": ("a sequence of ints", "an int"),
    "list(float)": ("a sequence of floats",),
    "list(type)": ("a sequence of dtypes",),
}


def py_str(s: str) -> str:
    """A double-quoted Python string literal."""
    return json.dumps(s, ensure_ascii=False)


def _py_float(x: Any) -> str:
    f = float(x)
    if math.isnan(f):
        return 'float("nan")'
    if math.isinf(f):
        return 'float("inf")' if f > 0 else '-float("inf")'
    return repr(f)


def _py_tuple(items: list[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def py_literal(attr_type: str, value: Any) -> str:
    """The Python source of an attr value: lists become tuples, dtypes strings."""
    if value is None:
        return "None"
    if attr_type == "bool":
        return "True" if value else "False"
    if attr_type == "int":
        return str(int(value))
    if attr_type == "float":
        return _py_float(value)
    if attr_type in ("string", "type"):
        return py_str(value)
    if attr_type in ("shape", "list(int)"):
        return _py_tuple([str(int(v)) for v in value])
    if attr_type == "list(float)":
        return _py_tuple([_py_float(v) for v in value])
    if attr_type == "list(type)":
        return _py_tuple([py_str(v) for v in value])
    raise ValueError(f"unknown attr type {attr_type!r}")
