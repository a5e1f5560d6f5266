"""The stub target: views for gen_<group>_ops.pyi (type hints, imports)."""
from __future__ import annotations

from dataclasses import dataclass

from ..model import AttrType, Group, OpDef
from .python import PyOp, PyParam, module_name

# The hint of an attr parameter, by attr type ("| None" is added for "= None").
ATTR_HINTS = {
    AttrType.INT: "int",
    AttrType.FLOAT: "float",
    AttrType.BOOL: "bool",
    AttrType.STRING: "str",
    AttrType.TYPE: "DTypeLike",
    AttrType.SHAPE: "Sequence[int] | int",
    AttrType.LIST_INT: "Sequence[int] | int",
    AttrType.LIST_FLOAT: "Sequence[float]",
    AttrType.LIST_TYPE: "Sequence[DTypeLike]",
}


def param_hint(p: PyParam) -> str:
    if p.is_input:
        return "Sequence[TensorLike]" if p.param.input.is_list else "TensorLike"
    attr = p.param.attr
    hint = ATTR_HINTS[attr.type]
    return hint + " | None" if attr.default_is_none else hint


def return_hint(op: OpDef) -> str:
    hints = ["list[Tensor]" if o.is_list else "Tensor" for o in op.outputs]
    if not hints:
        return "None"
    return hints[0] if len(hints) == 1 else f"tuple[{', '.join(hints)}]"


@dataclass(frozen=True)
class StubParam:
    py_name: str
    hint: str
    default: str | None

    @property
    def decl(self) -> str:
        """``x: TensorLike`` or ``keepdims: bool = False``."""
        decl = f"{self.py_name}: {self.hint}"
        return decl if self.default is None else f"{decl} = {self.default}"


@dataclass(frozen=True)
class StubOp:
    python_name: str
    params: tuple[StubParam, ...]
    return_hint: str
    summary: str

    @staticmethod
    def of(op: OpDef) -> StubOp:
        py = PyOp.of(op)
        params = tuple(StubParam(p.py_name, param_hint(p), p.default) for p in py.params)
        return StubOp(py.python_name, params, return_hint(op), op.summary)

    @property
    def signature(self) -> str:
        return ", ".join(p.decl for p in self.params)


@dataclass(frozen=True)
class StubModule:
    name: str
    ops: tuple[StubOp, ...]

    @staticmethod
    def of(group: Group, ops: tuple[OpDef, ...]) -> StubModule:
        return StubModule(group.name, tuple(StubOp.of(o) for o in ops))

    @property
    def module_name(self) -> str:
        return module_name(self.name)

    @property
    def python_names(self) -> tuple[str, ...]:
        return tuple(sorted(op.python_name for op in self.ops))

    @property
    def imports(self) -> tuple[str, ...]:
        """The import lines, only of names the stubs use (stdlib block first)."""
        hints = " ".join(p.hint for op in self.ops for p in op.params)
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
