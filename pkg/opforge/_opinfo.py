"""What the graph builder and async mode need to know of an op's signature,
read from the registry JSON (refreshed when load_op_library adds ops)."""

import json
from typing import NamedTuple

from opforge import _pywrap_internal as _pw
from opforge import dtypes as _dtypes


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


_cache = {}


def _load():
    for op in json.loads(_pw.registry_json())["ops"]:
        inputs = tuple(Arg(a["name"], bool(a.get("number_attr")), a.get("type_attr") or "",
                           _dtypes.as_dtype(a["fixed_type"]) if a.get("fixed_type") else None)
                       for a in op["inputs"])
        _cache[op["name"]] = OpInfo(op["name"], inputs, tuple(o["name"] for o in op["outputs"]),
                                    tuple(op["params"]))


def get(op_type):
    info = _cache.get(op_type)
    if info is None:
        _load()
        info = _cache[op_type]
    return info
