"""opforge.Tensor: a C type from the extension plus the methods defined here.

The C part (shape, dtype, numpy(), the buffer protocol, creation from op
results) lives in swig/py_tensor.cc; the operators and conveniences of
_TensorMethods are copied onto that type and call the generated wrappers.
"""

import numpy as np

from opforge import _pywrap_internal as _pw
from opforge import dtypes as _dtypes
from opforge import errors as _errors


def _ops():
    # Imported lazily: the generated modules import this one.
    from opforge import ops
    return ops


class _TensorMethods:
    # Make `ndarray <op> Tensor` call the Tensor's reflected operator.
    __array_priority__ = 100
    __hash__ = None  # == is element-wise, as in numpy

    def __array__(self, dtype=None, copy=None):
        array = self.numpy()
        if dtype is not None and np.dtype(dtype) != array.dtype:
            return array.astype(dtype)
        return array.copy() if copy else array

    def __repr__(self):
        body = np.array2string(self.numpy(), separator=", ", prefix="opforge.Tensor(")
        return f"opforge.Tensor({body}, dtype={self.dtype.name})"

    def __str__(self):
        return str(self.numpy())

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self):
        return bool(self.numpy())

    def __float__(self):
        return float(self.numpy())

    def __int__(self):
        return int(self.numpy())

    def __index__(self):
        return self.numpy().__index__()

    def __getitem__(self, key):
        # numpy indexing on the zero-copy view; contiguous results stay views.
        return _pw.to_tensor(np.asarray(self.numpy()[key]), None)

    def item(self):
        return self.numpy().item()

    def tolist(self):
        return self.numpy().tolist()

    def astype(self, dtype):
        return _ops().cast(self, dtype)

    def reshape(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        return _ops().reshape(self, shape)

    @property
    def T(self):
        return _ops().transpose(self)

    def sum(self, axis=None, keepdims=False):
        return _ops().sum(self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        return _ops().mean(self, axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return _ops().max(self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return _ops().min(self, axis, keepdims)

    def __add__(self, other): return _ops().add(self, other)
    def __radd__(self, other): return _ops().add(other, self)
    def __sub__(self, other): return _ops().sub(self, other)
    def __rsub__(self, other): return _ops().sub(other, self)
    def __mul__(self, other): return _ops().mul(self, other)
    def __rmul__(self, other): return _ops().mul(other, self)
    def __truediv__(self, other): return _ops().div(self, other)
    def __rtruediv__(self, other): return _ops().div(other, self)
    def __pow__(self, other): return _ops().pow(self, other)
    def __rpow__(self, other): return _ops().pow(other, self)
    def __matmul__(self, other): return _ops().mat_mul(self, other)
    def __rmatmul__(self, other): return _ops().mat_mul(other, self)
    def __neg__(self): return _ops().neg(self)
    def __abs__(self): return _ops().abs(self)
    def __eq__(self, other): return _ops().equal(self, other)
    def __ne__(self, other): return _ops().not_equal(self, other)
    def __lt__(self, other): return _ops().less(self, other)
    def __le__(self, other): return _ops().less_equal(self, other)
    def __gt__(self, other): return _ops().greater(self, other)
    def __ge__(self, other): return _ops().greater_equal(self, other)
    def __and__(self, other): return _ops().logical_and(self, other)
    def __rand__(self, other): return _ops().logical_and(other, self)
    def __or__(self, other): return _ops().logical_or(self, other)
    def __ror__(self, other): return _ops().logical_or(other, self)
    def __invert__(self): return _ops().logical_not(self)


Tensor = _pw._init(_TensorMethods, _dtypes._BY_ENUM, _errors._BY_CODE)
Tensor.__module__ = "opforge"


def tensor(value, dtype=None):
    """Returns `value` as an opforge Tensor.

    numpy arrays that are C-contiguous, aligned and native-endian are
    borrowed without a copy (the Tensor keeps the array alive); Python
    scalars and nested lists are converted (to `dtype` when given).
    """
    return _pw.to_tensor(value, dtype)
