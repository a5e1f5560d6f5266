"""opforge.dask's view: each op's wrapper on dask arrays, by its category.

The category comes from the C++ declaration (``OpDefBuilder::Category``,
exported as the registry's "category"). Every wrapper is one call into
``opforge._dask_strategies``: ``<category>(op name, eager wrapper, inputs,
attrs)``, the inputs in declaration order and the attrs by C++ name, so the
strategies can run shape-only inference (``_pywrap_internal.infer``) on them.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import SchemaError
from ..model import Group, OpDef
from .python import PyOp

# What a strategy needs from the op's declaration beyond its category.
_NEEDS = {
    "reduction": ((1,), ("axis", "keepdims")),
    "mean": ((1,), ("axis", "keepdims")),
    "arg_reduction": ((1,), ("axis", "keepdims")),
    "contraction": ((2,), ("transpose_a", "transpose_b")),
}


_HOW = {
    "elementwise": "runs per block (da.blockwise, numpy broadcasting)",
    "reduction": "reduces each block, then the partial results (da.reduction)",
    "mean": "Sum's reduction over the count of the reduced axes",
    "arg_reduction": "candidates per block, then the best (dask's arg-reduction)",
    "contraction": "a product per pair of blocks along k, then a sum over k",
    "whole_axis": "rechunks its axis into one chunk, then runs per block",
    "layout": "dask's own function for it",
    "none": "cannot run on dask arrays: raises UnimplementedError",
}


def _check(op: OpDef) -> None:
    if op.category == "none":
        return
    if len(op.outputs) != 1:
        raise SchemaError(f"{op.where}: category {op.category!r} needs exactly one output "
                           f"(declare Category(\"none\"))")
    if op.category in _NEEDS:
        counts, attrs = _NEEDS[op.category]
        missing = [a for a in attrs if op.find_attr(a) is None]
        if len(op.inputs) not in counts or missing:
            raise SchemaError(f"{op.where}: category {op.category!r} needs {counts[0]} input(s) "
                               f"and the attrs {list(attrs)} (missing {missing})")
    if not op.inputs and op.category != "layout":
        raise SchemaError(f"{op.where}: category {op.category!r} needs an input")


@dataclass(frozen=True)
class DaskOp:
    """One wrapper: the eager wrapper's signature, a strategy call for its body."""
    py: PyOp
    category: str

    @staticmethod
    def of(op: OpDef) -> DaskOp:
        _check(op)
        return DaskOp(PyOp.of(op), op.category)

    @property
    def python_name(self) -> str:
        return self.py.python_name

    @property
    def signature(self) -> str:
        return self.py.signature

    @property
    def call(self) -> str:
        name = self.py.name
        if self.category == "none":
            return f"_s.unimplemented({name!r})"
        by_name = {p.name: p.py_name for p in self.py.params}
        inputs = [by_name.get(i.name, i.name) for i in self.py.op.inputs]
        attrs = ", ".join(f"{p.name!r}: {p.py_name}" for p in self.py.params if not p.is_input)
        tup = "(" + ", ".join(inputs) + ("," if len(inputs) == 1 else "") + ")"
        return f"_s.{self.category}({name!r}, _ops.{self.python_name}, {tup}, {{{attrs}}})"

    @property
    def how(self) -> str:
        """The docstring's line on how it runs."""
        return _HOW[self.category]

    @property
    def summary(self) -> str:
        return self.py.op.summary


@dataclass(frozen=True)
class DaskModule:
    ops: tuple[DaskOp, ...]           # sorted by op name
    library: str | None = None        # a load_op_library module's path, else None

    @staticmethod
    def of(ops: tuple[OpDef, ...], library: str | None = None) -> DaskModule:
        return DaskModule(tuple(DaskOp.of(o) for o in sorted(ops, key=lambda o: o.name)), library)

    @property
    def python_names(self) -> tuple[str, ...]:
        return tuple(sorted(o.python_name for o in self.ops))


def module_of(groups: list[tuple[Group, tuple[OpDef, ...]]]) -> DaskModule:
    return DaskModule.of(tuple(op for _, ops in groups for op in ops))
