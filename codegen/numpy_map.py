"""The numpy functions that ops compute, derived from their declarations.

An op whose documentation says ``Equivalent to `np.NAME(x, y)` `` (its inputs,
in order, as the arguments) declares that it computes numpy's NAME for the
dtypes it accepts; ``Tensor.__array_ufunc__`` and ``__array_function__`` use
the rendered map (generated/python/numpy_map.py) and check dtypes with numpy
before trusting it. Ops documented only as "Like numpy.X" (different keywords
or semantics) are not in the map.
"""
from __future__ import annotations

import re

from . import naming
from .model import Registry

_EQUIVALENT = re.compile(r"Equivalent to (?:the \w+-argument )?`np\.(\w+)\(([^()`]*)\)`")


def numpy_equivalents(registry: Registry) -> list[tuple[str, str]]:
    """Sorted (numpy name, opforge python name) pairs."""
    pairs = []
    for op in registry.ops:
        m = _EQUIVALENT.search(op.description)
        if not m:
            continue
        args = [a.strip() for a in m.group(2).split(",")]
        if args == [i.name for i in op.inputs]:
            pairs.append((m.group(1), naming.op_python_name(op.name)))
    return sorted(pairs)
