"""How op and parameter names are spelled in Python (validation and every target use it).

Op names are CamelCase (``MatMul``); Python function names are their
snake_case (``mat_mul``). Any name that collides with a Python keyword gets a
trailing underscore in Python (``Lambda`` -> ``lambda_``, attr ``from`` ->
``from_``); builtins such as ``sum`` or ``max`` are fine. C++ spellings are
the SWIG target's (targets/swig.py).
"""
from __future__ import annotations

import keyword
import re

# Group names become module names (gen_<group>_ops).
GROUP_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


def snake_case(name: str) -> str:
    """``MatMul`` -> ``mat_mul``, ``Conv2DBackprop`` -> ``conv2d_backprop``."""
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i > 0:
            prev = name[i - 1]
            nxt = name[i + 1] if i + 1 < len(name) else ""
            if prev.islower() or (prev.isupper() and nxt.islower()):
                out.append("_")
        out.append(c.lower())
    return "".join(out)


def python_ident(name: str) -> str:
    """A Python-safe spelling of ``name``: keywords get a trailing ``_``."""
    return name + "_" if keyword.iskeyword(name) else name


def op_python_name(op_name: str) -> str:
    return python_ident(snake_case(op_name))
