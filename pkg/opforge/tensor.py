"""opforge.Tensor: a C type from the extension plus the methods defined here.

The C part (shape, dtype, numpy(), the buffer protocol, creation from op
results) lives in swig/py_tensor.cc; the operators and conveniences of
_TensorMethods are copied onto that type and call the generated wrappers.
"""

import numpy as np

from opforge import _pywrap_internal as _pw
from opforge import dtypes as _dtypes
from opforge import errors as _errors


from opforge import ops as _ops  # the generated wrappers (they do not import this module)

# Bound once: a reflected operator costs one call of the wrapper, no lookup.
_add, _sub, _mul, _div, _pow = _ops.add, _ops.sub, _ops.mul, _ops.div, _ops.pow
_matmul, _and, _or = _ops.mat_mul, _ops.logical_and, _ops.logical_or

_protocols = None


def _np_protocols():
    global _protocols
    if _protocols is None:  # imported on first use: `import opforge` stays lean
        from opforge import _numpy_protocols
        _protocols = _numpy_protocols
    return _protocols


class _TensorMethods:
    # Make `ndarray <op> Tensor` call the Tensor's reflected operator.
    __array_priority__ = 100
    __hash__ = None  # == is element-wise, as in numpy

    def __array__(self, dtype=None, copy=None):
        # numpy 2's contract: copy=False must not copy (or raise), True always copies.
        array = self.numpy()
        if dtype is not None and np.dtype(dtype) != array.dtype:
            if copy is False:
                raise ValueError(f"Tensor.__array__: converting {self.dtype.name} to {np.dtype(dtype)} "
                                 "needs a copy, but copy=False was passed")
            return array.astype(dtype)
        return array.copy() if copy else array

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _np_protocols().array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _np_protocols().array_function(func, types, args, kwargs)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Exports the tensor through DLPack (numpy's exporter on the zero-copy view).

        The capsule keeps this tensor's memory alive; read-only tensors are
        flagged read-only (DLPack >= 1.0, so pass max_version=(1, 0) or newer).
        """
        if stream is not None:
            raise BufferError("Tensor.__dlpack__: opforge tensors live on the CPU; stream must be None")
        if self.dtype.name == "bfloat16":  # numpy's exporter has no bfloat16: opforge's own (py_dlpack.cc)
            if dl_device is not None and tuple(dl_device) != (1, 0):
                raise BufferError(f"Tensor.__dlpack__: opforge tensors live on the CPU, not {dl_device}")
            src = self.copy() if copy else self
            return _pw.dlpack_export(src, int(max_version is not None and max_version[0] >= 1))
        return self.numpy().__dlpack__(max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return (1, 0)  # (kDLCPU, device 0)

    # ---- pickle and copies: numpy pickles the view (protocol 5: out of band)

    def __reduce_ex__(self, protocol):
        if self.dtype.name == "bfloat16":  # as float32 (exact): unpickling needs no ml_dtypes
            return (_from_float32, (_ops.cast(self, _dtypes.float32).numpy(), "bfloat16"))
        return (tensor, (self.numpy(),))

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def copy(self):
        """A new tensor with its own (writable) copy of the data."""
        return _pw.to_tensor(self.numpy().copy(), None)

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def itemsize(self):
        return self.dtype.itemsize

    def __format__(self, spec):
        # numpy's rules: a 0-d tensor formats its value, others only with "".
        return self.numpy().__format__(spec)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __setitem__(self, key, value):
        ag = self._ag
        if ag is not None and ag.requires_grad:
            # The tape may hold this tensor's values: writing them would make gradients wrong.
            raise _errors.InvalidArgumentError(
                "Tensor.__setitem__: this tensor requires grad, and writing into it in place would make "
                "recorded gradients wrong; assign into t.detach().copy() instead")
        view = self.numpy()
        if not view.flags.writeable:
            raise _errors.InvalidArgumentError(
                "Tensor.__setitem__: this tensor is read-only (it borrows read-only memory); "
                "assign into t.copy() instead")
        view[key] = value

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
        return _ops.cast(self, dtype)

    def reshape(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        return _ops.reshape(self, shape)

    @property
    def T(self):
        return _ops.transpose(self)

    def sum(self, axis=None, keepdims=False):
        return _ops.sum(self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        return _ops.mean(self, axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return _ops.max(self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return _ops.min(self, axis, keepdims)

    # The operators, for SymbolicTensor (graph views) and other subclasses:
    # opforge.Tensor has them as C slots that call the ops directly
    # (swig/py_tensor_ops.cc), and these are not copied onto it. Defs, not
    # the op functions themselves: those are builtins, which do not bind self.
    def __add__(self, other): return _ops.add(self, other)
    def __sub__(self, other): return _ops.sub(self, other)
    def __mul__(self, other): return _ops.mul(self, other)
    def __truediv__(self, other): return _ops.div(self, other)
    def __pow__(self, other): return _ops.pow(self, other)
    def __matmul__(self, other): return _ops.mat_mul(self, other)
    def __neg__(self): return _ops.neg(self)
    def __abs__(self): return _ops.abs(self)
    def __eq__(self, other): return _ops.equal(self, other)
    def __ne__(self, other): return _ops.not_equal(self, other)
    def __lt__(self, other): return _ops.less(self, other)
    def __le__(self, other): return _ops.less_equal(self, other)
    def __gt__(self, other): return _ops.greater(self, other)
    def __ge__(self, other): return _ops.greater_equal(self, other)
    def __and__(self, other): return _ops.logical_and(self, other)
    def __or__(self, other): return _ops.logical_or(self, other)
    def __invert__(self): return _ops.logical_not(self)

    def __radd__(self, other): return _add(other, self)
    def __rsub__(self, other): return _sub(other, self)
    def __rmul__(self, other): return _mul(other, self)
    def __rtruediv__(self, other): return _div(other, self)
    def __rpow__(self, other): return _pow(other, self)
    def __rmatmul__(self, other): return _matmul(other, self)
    def __rand__(self, other): return _and(other, self)
    def __ror__(self, other): return _or(other, self)

    # --- gradients (opforge.autodiff) --------------------------------------
    @property
    def requires_grad(self):
        """True for a leaf marked to get gradients and for results computed from one."""
        ag = self._ag
        return ag is not None and ag.requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        _autodiff().set_requires_grad(self, value)

    @property
    def grad(self):
        """The gradient accumulated by backward() (None until then); assignable."""
        ag = self._ag
        return None if ag is None else ag.grad

    @grad.setter
    def grad(self, value):
        _autodiff().set_grad(self, value)

    @property
    def grad_fn(self):
        """The recorded op that computed this tensor (None for leaves)."""
        ag = self._ag
        return None if ag is None else ag.grad_fn

    @property
    def is_leaf(self):
        return self.grad_fn is None

    def backward(self, grad=None, create_graph=False):
        """Accumulates d(self)/d(leaf) into the .grad of every leaf that requires it."""
        _autodiff().backward(self, grad, create_graph)

    def register_post_accumulate_grad_hook(self, hook):
        """Calls hook(self) each time backward has stored this leaf's final
        gradient in .grad, while the rest of backward still runs (PyTorch's
        hook of that name). Returns a handle; handle.remove() undoes it."""
        from opforge.autodiff import tape
        return tape.register_post_accumulate_grad_hook(self, hook)

    def detach(self):
        """The same memory, cut from the gradient graph."""
        return _pw.to_tensor(self, None)


Tensor = _pw._init(_TensorMethods, _dtypes._BY_ENUM, _errors._BY_CODE)
Tensor.__module__ = "opforge"
__import__("opforge._tensor_methods", fromlist=["install"]).install(Tensor)  # PyTorch's methods


def _autodiff():
    from opforge import autodiff  # imported on first use: most programs never need it
    return autodiff


def tensor(value, dtype=None, requires_grad=False):
    """Returns `value` as an opforge Tensor.

    numpy arrays that are C-contiguous, aligned and native-endian are
    borrowed without a copy (the Tensor keeps the array alive); Python
    scalars and nested lists are converted (to `dtype` when given).
    With `requires_grad`, the Tensor is a leaf of the gradient graph: it
    owns a copy of the data (so later writes to `value` cannot change a
    recorded gradient) and its dtype must be floating point.
    """
    t = _pw.to_tensor(value, dtype)
    if requires_grad:
        t = _autodiff().make_leaf(t)
    return t


def _from_float32(values, dtype_name):
    """Unpickles a bfloat16 tensor pickled as its (exact) float32 values."""
    return _ops.cast(values, _dtypes.as_dtype(dtype_name))


def from_dlpack(x, /, *, device=None, copy=None):
    """A Tensor sharing the memory of any DLPack producer (``__dlpack__``).

    numpy's importer reads the capsule (DLPack 1.x versioned or legacy); the
    result borrows its memory without a copy unless copy=True (or the data
    is not in an opforge dtype). CPU memory only, as numpy. bfloat16, which
    numpy's importer does not know, goes through opforge's own importer.
    """
    try:
        return _pw.to_tensor(np.from_dlpack(x, device=device, copy=copy), None)
    except (BufferError, RuntimeError, TypeError):
        if device not in (None, "cpu") or not hasattr(x, "__dlpack__"):
            raise
        try:
            capsule = x.__dlpack__(max_version=(1, 0))
        except TypeError:  # a producer from before DLPack 1.0
            capsule = x.__dlpack__()
        t = _pw.dlpack_import(capsule)
        return t.copy() if copy else t

