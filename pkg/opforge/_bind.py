"""What graph building (opforge.graph) still binds in Python until its nodes
are made from the C++ binder's bound calls (cpp/framework/bind.h, which
eager, async, hooks, Dask and `_pywrap_internal.bind` use): values without
a dtype of their own (Python scalars and lists) become constants of their
partner's dtype. Delete this module once opforge.graph calls
``_pywrap_internal.bind``."""

import numpy as np

from opforge import _opinfo
from opforge import _pywrap_internal as _pw
from opforge import dtypes as _dtypes
from opforge import errors as _errors


def bind(op_type, inputs, attrs, typed, convert):
    """Returns a tuple with one item per input arg (a list for list args).

    typed(value) gives the dtype of a value that has one (else None); such
    values pass through convert(value, arg_label) -> item. Others become
    Tensors of the partner's dtype, then go through convert too.
    """
    info = _opinfo.get(op_type)
    missing = [a.name for a in info.inputs if a.name not in inputs]
    if missing:
        raise _errors.InvalidArgumentError(f"{op_type}: missing input '{missing[0]}'")
    values = {a.name: (list(inputs[a.name]) if a.is_list and isinstance(inputs[a.name], (list, tuple))
                       else inputs[a.name]) for a in info.inputs}
    dtypes = {}
    for a in info.inputs:
        items = values[a.name] if a.is_list and isinstance(values[a.name], list) else [values[a.name]]
        for v in items:
            d = typed(v)
            if d is not None and a.type_attr:
                dtypes.setdefault(a.type_attr, d)
    out = []
    for a in info.inputs:
        v = values[a.name]
        if a.is_list and isinstance(v, list):
            out.append([_one(op_type, a, f"{a.name}[{k}]", x, attrs, dtypes, typed, convert)
                        for k, x in enumerate(v)])
        else:
            out.append(_one(op_type, a, a.name, v, attrs, dtypes, typed, convert))
    return tuple(out)


def _one(op_type, arg, label, value, attrs, dtypes, typed, convert):
    if typed(value) is None:
        target = arg.fixed_type or dtypes.get(arg.type_attr) or attrs.get(arg.type_attr)
        try:
            value = _pw.to_tensor(value, target)
        except _errors.OpError as e:
            raise type(e)(f"{op_type}: argument '{label}': {e}") from None
    return convert(value, label)


def dtype_of(value):
    """The dtype of a Tensor or numpy array or numpy scalar, else None."""
    d = getattr(value, "dtype", None)
    if d is None:
        return None
    if isinstance(d, _dtypes.DType):
        return d
    if isinstance(value, (np.ndarray, np.generic)):
        try:
            return _dtypes.as_dtype(d)
        except TypeError:
            return None  # an unsupported numpy dtype: conversion names it
    return None


def as_tensor(value, op_type, label):
    """A Tensor for a value that has a dtype (Tensor, numpy array or scalar)."""
    if isinstance(value, _pw_tensor_type()):
        return value
    try:
        return _pw.to_tensor(value, None)
    except _errors.OpError as e:
        raise type(e)(f"{op_type}: argument '{label}': {e}") from None


def _pw_tensor_type():
    from opforge.tensor import Tensor
    return Tensor


def caller_location():
    """file:line of the innermost frame outside opforge: where the user called."""
    return _pw.caller_location()
