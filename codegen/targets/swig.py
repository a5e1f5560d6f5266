"""The SWIG target: views for generated/swig/gen_<group>_ops.i and the index gen_ops.i.

Each op gets a C++ entry point ``opforge::gen::<Op>`` (METH_FASTCALL |
METH_KEYWORDS, added to the module at init) taking its parameters as an
array in the op's parameter order, which OpBinding (swig/py_call.h) binds;
OpBinding is told the Python function's name and parameter names, for calls
by keyword. The entry points name no parameters in C++; ``cpp_ident`` (a
name's C++-safe spelling) serves the validator's spelling check.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model import Group, OpDef, Param, Registry, Source
from . import pyi
from .python import PyOp

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
# Names the generated entry point uses in its body.
CPP_RESERVED_LOCALS = frozenset({"op", "inputs", "attrs", "opforge", "std", "PyObject"})


def cpp_ident(name: str) -> str:
    """A C++-safe parameter name: keywords and our locals get a trailing ``_``."""
    if name in CPP_KEYWORDS or name in CPP_RESERVED_LOCALS:
        return name + "_"
    return name


def cstr(text: str) -> str:
    """A double-quoted C/SWIG string literal (the ``cstr`` filter)."""
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c < " " or c == "\x7f":
            out.append(f"\\{ord(c):03o}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


@dataclass(frozen=True)
class SwigParam:
    name: str  # as declared: the comment above the entry point names it

    @staticmethod
    def of(param: Param) -> SwigParam:
        return SwigParam(param.name)


@dataclass(frozen=True)
class SwigOp:
    name: str
    source: Source
    docstring: str
    params: tuple[SwigParam, ...]
    python_name: str
    py_params: tuple[str, ...]  # the Python wrapper's parameter names

    @staticmethod
    def of(op: OpDef) -> SwigOp:
        # The raw extension function's docstring: Python signature line, then the summary.
        py = PyOp.of(op)
        sig = f"{op.name}({py.signature}) -> {pyi.return_hint(op)}"
        doc = f"{sig}\n\n{op.summary}" if op.summary else sig
        return SwigOp(op.name, op.source, doc, tuple(SwigParam.of(p) for p in op.params), py.python_name,
                      tuple(p.py_name for p in py.params))


@dataclass(frozen=True)
class SwigModule:
    name: str
    ops: tuple[SwigOp, ...]

    @staticmethod
    def of(group: Group, ops: tuple[OpDef, ...]) -> SwigModule:
        return SwigModule(group.name, tuple(SwigOp.of(o) for o in ops))


@dataclass(frozen=True)
class SwigIndex:
    """gen_ops.i: %includes every group's file."""
    groups: tuple[str, ...]

    @staticmethod
    def of(registry: Registry) -> SwigIndex:
        return SwigIndex(tuple(g.name for g, _ in registry.group_ops()))
