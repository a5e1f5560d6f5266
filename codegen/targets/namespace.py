"""The Python namespaces: which generated wrappers ``opforge.*`` exports and
which go to ``opforge.raw_ops`` (TensorFlow's name), decided from each op's
registry entry, never from a list of names.

A raw op is a backward op or an optimizer kernel: an op of the ``grad`` group,
one named ``<Op>Grad``, ``<Op>GradGrad`` or ``...Backprop...`` beside its
forward op (GeluGrad in ``nn``), an op of the ``optim`` group (the in-place
updates the optimizers call), or of the ``state`` group (variable and update
ops: users reach them through ``opforge.Variable`` and ``minimize``). Every op stays in its gen_<group>_ops module
either way; this only decides ``opforge.ops.__all__`` (hence ``opforge.*``)
and ``opforge.ops.raw_ops``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import naming

RAW_GROUPS = frozenset({"grad", "optim", "state"})
_RAW_NAME_RE = re.compile(r"(Grad|GradGrad)$|Backprop")


def is_raw(op) -> bool:
    """Whether ``op`` (a registry OpDef: ``.name``, ``.group``) belongs in raw_ops."""
    return op.group in RAW_GROUPS or _RAW_NAME_RE.search(op.name) is not None


@dataclass(frozen=True)
class Namespace:
    user_names: tuple[str, ...]             # opforge.ops.__all__, sorted
    raw_ops: tuple[tuple[str, str], ...]    # (gen_<group>_ops, wrapper), sorted by wrapper

    @staticmethod
    def of(registry) -> Namespace:
        user, raw = [], []
        for group, ops in registry.group_ops():
            for op in ops:
                name = naming.op_python_name(op.name)
                if is_raw(op):
                    raw.append((f"gen_{group.name}_ops", name))
                else:
                    user.append(name)
        return Namespace(tuple(sorted(user)), tuple(sorted(raw, key=lambda mn: mn[1])))

    @property
    def raw_names(self) -> tuple[str, ...]:
        return tuple(name for _, name in self.raw_ops)
