"""The element types an opforge Tensor can hold."""

import numpy as np


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


# Enum values match opforge::DType in cpp/include/opforge/dtype.h.
float32 = DType("float32", 1, np.float32)
float64 = DType("float64", 2, np.float64)
int32 = DType("int32", 3, np.int32)
int64 = DType("int64", 4, np.int64)
bool_ = DType("bool", 5, np.bool_)

_BY_ENUM = (None, float32, float64, int32, int64, bool_)
_BY_NAME = {d.name: d for d in _BY_ENUM[1:]}


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
    raise TypeError(f"{value!r} is not an opforge dtype (float32, float64, int32, int64, bool)")


__all__ = ["DType", "float32", "float64", "int32", "int64", "bool_", "as_dtype"]
