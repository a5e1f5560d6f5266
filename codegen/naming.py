"""Name rules shared by the model, validation and templates.

Op names are CamelCase (``MatMul``); Python function names are their
snake_case (``mat_mul``). Any name that collides with a Python keyword gets a
trailing underscore in Python (``Lambda`` -> ``lambda_``, attr ``from`` ->
``from_``); builtins such as ``sum`` or ``max`` are fine. C++ parameter names
get the same treatment for C++ keywords and for the few names the generated
entry point uses itself (``op``, ``inputs``, ``attrs``...).
"""
from __future__ import annotations

import keyword
import re

OP_NAME_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
GROUP_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
# Arg and attr names: identifiers that do not start with "_" (the generated
# module keeps its own globals under "_" names, so no parameter can shadow them).
ARG_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")

CPP_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char
    char8_t char16_t char32_t class compl concept const consteval constexpr
    constinit const_cast continue co_await co_return co_yield decltype default
    delete do double dynamic_cast else enum explicit export extern false float
    for friend goto if inline int long mutable namespace new noexcept not not_eq
    nullptr operator or or_eq private protected public register reinterpret_cast
    requires return short signed sizeof static static_assert static_cast struct
    switch template this thread_local throw true try typedef typeid typename
    union unsigned using virtual void volatile wchar_t while xor xor_eq
""".split())  # noqa: SIM905
# Names the generated C++ entry point uses in its body.
CPP_RESERVED_LOCALS = frozenset({"op", "inputs", "attrs", "opforge", "std", "PyObject"})


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


def cpp_ident(name: str) -> str:
    """A C++-safe parameter name: keywords and our locals get a trailing ``_``."""
    if name in CPP_KEYWORDS or name in CPP_RESERVED_LOCALS:
        return name + "_"
    return name


def op_python_name(op_name: str) -> str:
    return python_ident(snake_case(op_name))
