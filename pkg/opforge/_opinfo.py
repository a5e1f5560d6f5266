"""The compiled registry as the runtime sees it: ``_pywrap_internal.registry_json()``
read by the one schema reader (opforge._schema), once, and again after
load_op_library adds ops (``refresh``).

``registry()`` is the parsed Registry, ``registry_dict()`` its JSON form
(what ``python -m opforge ops/describe`` print from), ``get(op)`` what the
graph builder and async mode need of one op's signature."""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

from opforge import _pywrap_internal as _pw
from opforge import dtypes as _dtypes
from opforge._schema import reader
from opforge._schema.model import Registry


class Arg(NamedTuple):
    name: str
    is_list: bool
    type_attr: str       # "" when the dtype is fixed
    fixed_type: object   # an opforge DType, or None


class OpInfo(NamedTuple):
    name: str
    inputs: tuple        # of Arg, in order
    outputs: tuple       # output names
    params: tuple        # the wrapper's parameters: inputs and non-inferred attrs


_lock = threading.Lock()
_registry: Registry | None = None
_cache: dict[str, OpInfo] = {}


def registry() -> Registry:
    """The compiled registry, built-in ops and loaded libraries' alike."""
    global _registry
    with _lock:
        if _registry is None:
            _registry = reader.read(_pw.registry_json(), "_pywrap_internal.registry_json()")
        return _registry


def registry_dict() -> dict[str, Any]:
    return registry().to_dict()


def refresh() -> None:
    """Forgets what was read: the next call reads the registry again (new ops)."""
    global _registry
    with _lock:
        _registry = None


def _info(op) -> OpInfo:
    inputs = tuple(Arg(a.name, a.is_list, a.type_attr or "",
                       _dtypes.as_dtype(a.fixed_type.name) if a.fixed_type is not None else None)
                   for a in op.inputs)
    return OpInfo(op.name, inputs, tuple(o.name for o in op.outputs), op.param_names)


def get(op_type: str) -> OpInfo:
    info = _cache.get(op_type)
    if info is None:
        ops = {op.name: op for op in registry().ops}
        if op_type not in ops:  # a library loaded since: read again
            refresh()
            ops = {op.name: op for op in registry().ops}
        info = _cache[op_type] = _info(ops[op_type])
    return info
