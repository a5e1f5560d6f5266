"""The element types an opforge Tensor can hold.

Derived from the C++ dtype table (cpp/include/opforge/dtype.h) through the
extension, so there is no second list to keep in step.
"""

import numpy as np

from opforge import _pywrap_internal


class DType:
    """An opforge element type; compares equal to its numpy equivalent."""

    __slots__ = ("name", "_enum", "_np")

    def __init__(self, name, enum, np_dtype):
        self.name = name
        self._enum = enum
        self._np = np.dtype(np_dtype)

    @property
    def as_numpy_dtype(self):
        return self._np

    @property
    def dtype(self):
        # numpy reads this attribute: np.dtype(of.float32), np.zeros(3, dtype=of.float32).
        return self._np

    @property
    def itemsize(self):
        return self._np.itemsize

    def __eq__(self, other):
        if isinstance(other, DType):
            return self is other
        try:
            return self._np == np.dtype(other)
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
    for name, enum, np_name, size, _floating, _integer in _pywrap_internal.dtype_table():
        d = DType(name, enum, np_name)
        if enum != len(by_enum) or d.itemsize != size:
            raise ImportError(f"opforge: dtype table row {name!r} is inconsistent with numpy")
        by_enum.append(d)
    return tuple(by_enum)


_BY_ENUM = _from_table()
_BY_NAME = {d.name: d for d in _BY_ENUM[1:]}
# Python names: "bool" would shadow the builtin, so it is bool_ (as in numpy).
_PY_NAMES = {d.name: d.name + "_" if d.name == "bool" else d.name for d in _BY_ENUM[1:]}
globals().update({_PY_NAMES[n]: d for n, d in _BY_NAME.items()})


def as_dtype(value):
    """Returns the opforge DType for a DType, numpy dtype-like or name."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    try:
        np_dtype = np.dtype(value)
    except TypeError:
        np_dtype = None
    for d in _BY_ENUM[1:]:
        if np_dtype is not None and d._np == np_dtype:
            return d
    raise TypeError(f"{value!r} is not an opforge dtype ({', '.join(_BY_NAME)})")


__all__ = ["DType", *_PY_NAMES.values(), "as_dtype"]
