"""Tensor.__array_ufunc__ and __array_function__: numpy calls on Tensors.

A numpy function runs as an opforge op only when the op is known to compute
it (the generated map opforge.ops.numpy_map, derived from the declarations,
plus the handlers below for the reductions and shape functions) and numpy's
own dtype rules give the dtypes the op gives. Everything else -- unmapped
functions, out=, where=, dtype=, promotions opforge refuses, errors -- runs
numpy's implementation on the zero-copy views, so the answer (or the
exception) is numpy's. Results of an opforge dtype come back as Tensors.
"""

import numpy as np

from opforge import _pywrap_internal as _pw
from opforge import dtypes as _dtypes
from opforge import errors as _errors

_SUPPORTED = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.bool_))
_SCALARS = (bool, int, float)


class _Declined(Exception):
    """A handler cannot compute this call exactly: numpy will."""


def _ops():
    from opforge import ops
    return ops


# This module is imported on first use, after opforge.tensor is complete.
from opforge.tensor import Tensor  # noqa: E402


def _tensor_type():
    return Tensor


_ufunc_table = None


def _ufuncs():
    # {numpy ufunc object: opforge wrapper}; aliases (np.abs, np.absolute) share one object.
    global _ufunc_table
    if _ufunc_table is None:
        from opforge.ops.numpy_map import NUMPY_EQUIVALENTS
        ops = _ops()
        table = {}
        for numpy_name, op_name in NUMPY_EQUIVALENTS.items():
            fn = getattr(np, numpy_name, None)
            if isinstance(fn, np.ufunc):
                table[fn] = getattr(ops, op_name)
        table[np.matmul] = ops.mat_mul  # a gufunc; MatMul documents numpy's 1-D rules
        _ufunc_table = table
    return _ufunc_table


# ---- conversions -------------------------------------------------------------

def _to_numpy(x):
    """Tensors (also inside lists and tuples) become their zero-copy numpy views."""
    if isinstance(x, _tensor_type()):
        return x.numpy()
    if isinstance(x, (list, tuple)):
        return type(x)(_to_numpy(v) for v in x)
    return x


def _wrap(result):
    """numpy results of an opforge dtype come back as Tensors."""
    if isinstance(result, (np.ndarray, np.generic)) and result.dtype in _SUPPORTED:
        return _pw.to_tensor(np.asarray(result), None)
    if isinstance(result, tuple):
        return tuple(_wrap(r) for r in result)
    if isinstance(result, list):
        return [_wrap(r) for r in result]
    return result


def _dtype_of(x):
    """The dtype numpy would see for x, or a Python scalar type (NEP 50 weak scalars)."""
    if type(x) is Tensor or isinstance(getattr(x, "dtype", None), _dtypes.DType):
        return x.dtype._np  # also graph tensors: the op then adds a node
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype
    if type(x) in _SCALARS:
        return type(x)
    raise _Declined


def _foreign(values):
    # Another array type with its own protocol: let it (or numpy) decide.
    tensor = _tensor_type()
    return any(not isinstance(v, (tensor, np.ndarray, np.generic) + _SCALARS)
               and hasattr(type(v), "__array_ufunc__") for v in values)


# ---- __array_ufunc__ ---------------------------------------------------------------

_MISSING = object()
_plans: dict = {}  # (ufunc, *input dtypes) -> (op, numpy's output dtype), or None: numpy computes it


def _plan(ufunc, dtypes):
    op = _ufuncs().get(ufunc)
    if op is None or len(dtypes) != ufunc.nin:
        return None
    try:
        resolved = ufunc.resolve_dtypes(dtypes + (None,) * ufunc.nout)
    except (TypeError, ValueError):
        return None
    # No casting of array inputs: numpy's loop must run on the dtypes as given.
    for given, loop in zip(dtypes, resolved):
        if isinstance(given, np.dtype) and given != loop:
            return None
    return op, resolved[ufunc.nin]


def _ufunc_via_op(ufunc, inputs):
    key = (ufunc, *map(_dtype_of, inputs))
    plan = _plans.get(key, _MISSING)
    if plan is _MISSING:
        plan = _plan(ufunc, key[1:])
        if len(_plans) < 4096:
            _plans[key] = plan
    if plan is None:
        raise _Declined
    op, out_dtype = plan
    try:
        result = op(*inputs)
    except _errors.OpError:
        raise _Declined from None  # numpy computes it, or raises its own error
    if result.dtype._np != out_dtype:
        raise _Declined
    return result


def array_ufunc(ufunc, method, inputs, kwargs):
    if method == "__call__" and not kwargs:
        try:
            return _ufunc_via_op(ufunc, inputs)
        except _Declined:
            pass
    out = kwargs.get("out", ())
    if _foreign(inputs + tuple(out) + (kwargs.get("where"),)):
        return NotImplemented
    np_kwargs = {k: _to_numpy(v) for k, v in kwargs.items()}  # out is a tuple, where= may be a Tensor
    result = getattr(ufunc, method)(*(_to_numpy(x) for x in inputs), **np_kwargs)
    if out:
        # numpy returns the out arrays: hand back the objects the caller passed.
        results = result if isinstance(result, tuple) else (result,)
        final = tuple(_wrap(r) if o is None else o for o, r in zip(out, results))
        return final if isinstance(result, tuple) else final[0]
    return _wrap(result)


# ---- __array_function__ --------------------------------------------------------------

_NO_VALUE = np._NoValue


def _axis_list(axis):
    if axis is None:
        return None
    if isinstance(axis, tuple):
        return list(axis)
    return [axis]


def _plain(**given):
    """Declines unless every numpy-only keyword is at its default."""
    for value in given.values():
        if value is not None and value is not _NO_VALUE:
            raise _Declined


def _same_dtype(x, dtype):
    if dtype is not None and np.dtype(dtype) != _as_tensor(x).dtype.as_numpy_dtype:
        raise _Declined


def _as_tensor(x):
    if isinstance(x, _tensor_type()):
        return x
    if isinstance(x, np.ndarray) and x.dtype in _SUPPORTED:
        return _pw.to_tensor(x, None)
    raise _Declined


def _reduce(op_name, numpy_keeps_int32):
    def handler(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NO_VALUE, where=_NO_VALUE):
        _plain(out=out, initial=initial, where=where)
        x = _as_tensor(a)
        if dtype is None and not numpy_keeps_int32 and x.dtype.name in ("int32", "bool"):
            raise _Declined  # numpy accumulates these in int64
        _same_dtype(x, dtype)
        return getattr(_ops(), op_name)(x, _axis_list(axis), bool(keepdims))
    return handler


def _extremum(op_name):
    def handler(a, axis=None, out=None, keepdims=False, initial=_NO_VALUE, where=_NO_VALUE):
        _plain(out=out, initial=initial, where=where)
        return getattr(_ops(), op_name)(_as_tensor(a), _axis_list(axis), bool(keepdims))
    return handler


def _mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=_NO_VALUE):
    _plain(out=out, where=where)
    x = _as_tensor(a)
    _same_dtype(x, dtype)
    return _ops().mean(x, _axis_list(axis), bool(keepdims))


def _arg(op_name):
    def handler(a, axis=None, out=None, *, keepdims=False):
        _plain(out=out)
        if axis is not None and not isinstance(axis, (int, np.integer)):
            raise _Declined
        return getattr(_ops(), op_name)(_as_tensor(a), None if axis is None else int(axis), bool(keepdims))
    return handler


def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    _plain(out=out, dtype=dtype)
    if axis is None or not isinstance(arrays, (list, tuple)) or not arrays:
        raise _Declined
    pieces = [_as_tensor(a) for a in arrays]
    if len({p.dtype for p in pieces}) != 1:
        raise _Declined  # numpy promotes
    return _ops().concat(pieces, int(axis))


def _reshape(a, /, shape=None, order="C", *, newshape=None, copy=None):
    _plain(copy=copy)
    if order != "C" or (shape is None) == (newshape is None):
        raise _Declined
    shape = shape if shape is not None else newshape
    return _ops().reshape(_as_tensor(a), [shape] if isinstance(shape, (int, np.integer)) else list(shape))


def _transpose(a, axes=None):
    return _ops().transpose(_as_tensor(a), None if axes is None else list(axes))


def _where(condition, x=_NO_VALUE, y=_NO_VALUE):
    if x is _NO_VALUE or y is _NO_VALUE:
        raise _Declined  # the one-argument form is nonzero()
    dtypes = [_dtype_of(v) for v in (condition, x, y)]
    if dtypes[0] != np.dtype(bool):
        raise _Declined
    # numpy's (weak-scalar) promotion must agree with opforge's partner rule.
    weak = {bool: False, int: 0, float: 0.0}
    expected = np.result_type(*(d if isinstance(d, np.dtype) else weak[d] for d in dtypes[1:]))
    if expected not in _SUPPORTED:
        raise _Declined
    result = _ops().select(condition, x, y)
    if result.dtype.as_numpy_dtype != expected:
        raise _Declined
    return result


_FUNCTIONS = {
    np.sum: _reduce("sum", numpy_keeps_int32=False),
    np.prod: _reduce("prod", numpy_keeps_int32=False),
    np.mean: _mean,
    np.max: _extremum("max"),
    np.min: _extremum("min"),
    np.argmax: _arg("arg_max"),
    np.argmin: _arg("arg_min"),
    np.concatenate: _concatenate,
    np.reshape: _reshape,
    np.transpose: _transpose,
    np.where: _where,
}


def array_function(func, types, args, kwargs):
    tensor = _tensor_type()
    if not all(issubclass(t, (tensor, np.ndarray)) for t in types):
        return NotImplemented
    handler = _FUNCTIONS.get(func)
    if handler is not None:
        try:
            return handler(*args, **kwargs)
        except (_Declined, _errors.OpError, TypeError):
            pass  # numpy decides: its answer, or its own exception
    np_args = tuple(_to_numpy(a) for a in args)
    np_kwargs = {k: _to_numpy(v) for k, v in kwargs.items()}
    out = kwargs.get("out")
    result = func._implementation(*np_args, **np_kwargs)
    if out is not None and isinstance(out, tensor) and result is np_kwargs["out"]:
        return out
    return _wrap(result)
