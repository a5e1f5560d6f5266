"""The element types an opforge Tensor can hold.

Derived from the C++ dtype table (cpp/include/opforge/dtype.h) through the
extension, so there is no second list to keep in step.
"""

import numpy as np

from opforge import _pywrap_internal

# Dtypes whose numpy dtype lives in an optional package, imported on first use.
_EXTRA_NUMPY = {"bfloat16": "ml_dtypes"}


def _import_numpy_dtype(np_name):
    module = _EXTRA_NUMPY.get(np_name)
    if module is None:
        return np.dtype(np_name)
    try:
        mod = __import__(module)
    except ImportError:
        raise ImportError(f"opforge.{np_name} needs the {module} package for its numpy dtype: "
                          f"pip install 'opforge[{module}]'") from None
    return np.dtype(getattr(mod, np_name))


class DType:
    """An opforge element type; compares equal to its numpy equivalent.

    bfloat16's numpy dtype is ml_dtypes' (an optional dependency), imported
    only when something asks for it (``as_numpy_dtype``, ``np.dtype(of.bfloat16)``).
    """

    __slots__ = ("name", "_enum", "_np_name", "_np_cache", "itemsize", "is_floating", "is_integer")

    def __init__(self, name, enum, np_name, itemsize=None, is_floating=None, is_integer=None):
        self.name = name
        self._enum = enum
        self._np_name = np_name
        self._np_cache = None if np_name in _EXTRA_NUMPY else np.dtype(np_name)
        self.itemsize = self._np_cache.itemsize if itemsize is None else itemsize
        self.is_floating = (self._np_cache.kind == "f") if is_floating is None else bool(is_floating)
        self.is_integer = (self._np_cache.kind in "iu") if is_integer is None else bool(is_integer)

    @property
    def as_numpy_dtype(self):
        if self._np_cache is None:
            self._np_cache = _import_numpy_dtype(self._np_name)
        return self._np_cache

    _np = as_numpy_dtype

    @property
    def dtype(self):
        # numpy reads this attribute: np.dtype(of.float32), np.zeros(3, dtype=of.float32).
        return self.as_numpy_dtype

    def __eq__(self, other):
        if isinstance(other, DType):
            return self is other
        if isinstance(other, str):
            return other == self.name or (other not in _BY_NAME and _lookup_numpy(other) is self)
        try:
            return _from_numpy(np.dtype(other)) is self
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"opforge.{self.name}"

    def __reduce__(self):
        return (as_dtype, (self.name,))


def _from_table():
    """(name, enum, numpy name, size, is_floating, is_integer) rows -> DTypes by enum."""
    by_enum = [None]
    for name, enum, np_name, size, floating, integer in _pywrap_internal.dtype_table():
        d = DType(name, enum, np_name, size, floating, integer)
        if enum != len(by_enum) or (d._np_cache is not None and d._np_cache.itemsize != size):
            raise ImportError(f"opforge: dtype table row {name!r} is inconsistent with numpy")
        by_enum.append(d)
    return tuple(by_enum)


_BY_ENUM = _from_table()
_BY_NAME = {d.name: d for d in _BY_ENUM[1:]}
_BY_NUMPY = {d._np_cache: d for d in _BY_ENUM[1:] if d._np_cache is not None}
# Python names: "bool" would shadow the builtin, so it is bool_ (as in numpy).
_PY_NAMES = {d.name: d.name + "_" if d.name == "bool" else d.name for d in _BY_ENUM[1:]}
globals().update({_PY_NAMES[n]: d for n, d in _BY_NAME.items()})


def _from_numpy(np_dtype):
    """The opforge DType of a numpy dtype, or None. Recognises ml_dtypes'
    bfloat16 by its type's name, so nothing is imported."""
    d = _BY_NUMPY.get(np_dtype)
    if d is None and np_dtype.kind == "V" and np_dtype.itemsize == 2 and np_dtype.type.__name__ == "bfloat16":
        d = _BY_NAME["bfloat16"]
    return d


def _lookup_numpy(value):
    try:
        return _from_numpy(np.dtype(value))
    except TypeError:
        return None


def as_dtype(value):
    """Returns the opforge DType for a DType, numpy dtype-like or name."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    if value is not None:
        d = _lookup_numpy(value)
        if d is not None:
            return d
    raise TypeError(f"{value!r} is not an opforge dtype ({', '.join(_BY_NAME)})")


_PROMOTION = _pywrap_internal.promotion_table()


def promote_types(a, b):
    """The dtype two dtypes promote to, by opforge's one promotion table (C++,
    next to the dtype table): the Array API's rules, with bfloat16 and
    int/float mixing as JAX has them. float16 with bfloat16 gives float32;
    int8 with uint8 gives int16; an int with a float gives the float; bool
    with anything gives the other. A signed int with uint64 has no
    promotion: TypeError.
    """
    da, db = as_dtype(a), as_dtype(b)
    r = _PROMOTION[da._enum - 1][db._enum - 1]
    if r == 0:
        raise TypeError(f"opforge has no promotion for {da.name} with {db.name}: cast one of them first")
    return _BY_ENUM[r]


def result_type(*dtypes):
    """promote_types folded over one or more dtypes (or arrays/Tensors with a .dtype)."""
    if not dtypes:
        raise TypeError("result_type() needs at least one dtype")
    out = None
    for v in dtypes:
        d = as_dtype(v.dtype) if hasattr(v, "dtype") and not isinstance(v, (DType, np.dtype, type)) else as_dtype(v)
        out = d if out is None else promote_types(out, d)
    return out


__all__ = ["DType", *_PY_NAMES.values(), "as_dtype", "promote_types", "result_type"]
