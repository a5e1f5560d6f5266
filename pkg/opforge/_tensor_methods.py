"""PyTorch's Tensor methods (``t.mm``, ``t.clamp``, ``t.view``, ``t.zero_()``...), installed
onto opforge.Tensor by tensor.py. Each is a registered op (so the tape records
it) or a view of the shape.

In-place methods (``add_``, ``zero_``, ``w -= lr * g``...) write into the
tensor's own memory. A tensor that requires grad may only be changed in
place under ``of.no_grad()`` (an optimizer step): outside it they raise,
rather than silently detach it from the graph or corrupt a saved value.
"""

import collections

import numpy as np

from opforge import _pywrap_internal as _pw
from opforge import _write_generation
from opforge import dtypes as _dtypes
from opforge import errors as _errors
from opforge import ops as _ops

_MaxMin = collections.namedtuple("_MaxMin", ["values", "indices"])  # torch.return_types.max


def _dims(args, fn):
    if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
        args = tuple(args[0])
    return [int(a) for a in args]


def _axis(dim, axis):
    return axis if dim is None else dim


def _keep(keepdim, keepdims):
    return bool(keepdims) if keepdims is not None else bool(keepdim)


class _Size(int):
    """numpy's ``t.size`` (the element count, an int) that is also PyTorch's ``t.size(dim=None)``."""

    def __new__(cls, n, shape):
        self = super().__new__(cls, n)
        self._shape = shape
        return self

    def __call__(self, dim=None):
        return tuple(self._shape) if dim is None else self._shape[dim]


class TorchMethods:
    # --- shape
    def dim(self):
        return self.ndim

    def numel(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (str, np.dtype, _dtypes.DType)):
            raise _errors.UnimplementedError("Tensor.view(dtype): reinterpreting bytes is not supported; use .to(dtype)")
        return _ops.reshape(self, _dims(shape, "view"))

    def view_as(self, other):
        return _ops.reshape(self, list(other.shape))

    def flatten(self, start_dim=0, end_dim=-1):
        shape = list(self.shape)
        if not shape:
            return _ops.reshape(self, [1])
        s, e = start_dim % len(shape), end_dim % len(shape)
        if s > e:
            raise _errors.InvalidArgumentError(f"Tensor.flatten: start_dim {start_dim} is after end_dim {end_dim}")
        n = int(np.prod(shape[s:e + 1], dtype=np.int64))
        return _ops.reshape(self, shape[:s] + [n] + shape[e + 1:])

    def squeeze(self, dim=None):
        shape = list(self.shape)
        if dim is None:
            new = [d for d in shape if d != 1]
        else:
            dims = {d % max(len(shape), 1) for d in ([dim] if isinstance(dim, int) else dim)}
            new = [d for i, d in enumerate(shape) if not (i in dims and d == 1)]
        return _ops.reshape(self, new)

    def unsqueeze(self, dim):
        shape = list(self.shape)
        if not -len(shape) - 1 <= dim <= len(shape):
            raise _errors.InvalidArgumentError(f"Tensor.unsqueeze: dim {dim} out of range for rank {len(shape)}")
        shape.insert(dim % (len(shape) + 1), 1)
        return _ops.reshape(self, shape)

    def permute(self, *dims):
        return _ops.transpose(self, _dims(dims, "permute"))

    def t(self):
        return _ops.transpose(self)

    def expand(self, *sizes):
        sizes = _dims(sizes, "expand")
        shape = list(self.shape)
        lead = len(sizes) - len(shape)
        if lead < 0:
            raise _errors.InvalidArgumentError(f"Tensor.expand: {len(sizes)} sizes for a tensor of rank {len(shape)}")
        target = [shape[i - lead] if s == -1 else s for i, s in enumerate(sizes)]
        ones = np.ones(target, dtype=self.dtype.name)
        # x * ones broadcasts with the op's gradient (summed back to x's shape).
        return _ops.logical_and(self, ones) if self.dtype.name == "bool" else _ops.mul(self, ones)

    def expand_as(self, other):
        return self.expand(list(other.shape))

    def repeat(self, *sizes):
        sizes = _dims(sizes, "repeat")
        if len(sizes) < self.ndim:
            raise _errors.InvalidArgumentError(
                f"Tensor.repeat: {len(sizes)} repeat counts for a tensor of rank {self.ndim}")
        x = _ops.reshape(self, [1] * (len(sizes) - self.ndim) + list(self.shape))
        for axis, r in enumerate(sizes):
            if r != 1:
                x = _ops.concat([x] * r, axis) if r > 0 else _ops.slice(x, [0] * x.ndim, [0 if i == axis else -1 for i in range(x.ndim)])
        return x

    # --- dtype
    def to(self, *args, dtype=None, device=None, copy=False):
        for a in args:
            if isinstance(a, str) and a in ("cpu", "cpu:0"):
                continue
            if hasattr(a, "dtype") and hasattr(a, "shape") and not isinstance(a, (np.dtype, type)):
                dtype = a.dtype
            else:
                dtype = a
        if device not in (None, "cpu", "cpu:0"):
            raise _errors.UnimplementedError(f"Tensor.to: opforge tensors live on the CPU, got device {device!r}")
        if dtype is None or _dtypes.as_dtype(dtype) == self.dtype:
            return self.copy() if copy else self
        return _ops.cast(self, _dtypes.as_dtype(dtype).name)

    def float(self):
        return self.to("float32")

    def double(self):
        return self.to("float64")

    def long(self):
        return self.to("int64")

    def int(self):
        return self.to("int32")

    def bool(self):
        return self.to("bool")

    def type_as(self, other):
        return self.to(other.dtype)

    # --- math
    def mm(self, other):
        if self.ndim != 2 or getattr(other, "ndim", 2) != 2:
            raise _errors.InvalidArgumentError(
                f"Tensor.mm: both operands must be 2-D, got ranks {self.ndim} and {getattr(other, 'ndim', '?')}; use matmul")
        return _ops.mat_mul(self, other)

    def matmul(self, other):
        return _ops.mat_mul(self, other)

    def pow(self, exponent):
        return _ops.pow(self, exponent)

    def clamp(self, min=None, max=None):
        if min is None and max is None:
            raise _errors.InvalidArgumentError("Tensor.clamp: at least one of min and max must be given")
        x = self
        if min is not None:
            x = _ops.maximum(x, min)
        if max is not None:
            x = _ops.minimum(x, max)
        return x

    clip = clamp

    def add(self, other, alpha=1):
        return _ops.add(self, other if alpha == 1 else _ops.mul(other, alpha))

    def sub(self, other, alpha=1):
        return _ops.sub(self, other if alpha == 1 else _ops.mul(other, alpha))

    def mul(self, other):
        return _ops.mul(self, other)

    def div(self, other):
        return _ops.div(self, other)

    def neg(self):
        return _ops.neg(self)

    def abs(self):
        return _ops.abs(self)

    def exp(self):
        return _ops.exp(self)

    def log(self):
        return _ops.log(self)

    def sqrt(self):
        return _ops.sqrt(self)

    def square(self):
        return _ops.square(self)

    def relu(self):
        return _ops.relu(self)

    def sigmoid(self):
        return _ops.sigmoid(self)

    def tanh(self):
        return _ops.tanh(self)

    def softmax(self, dim=-1):
        return _ops.softmax(self, dim)

    def log_softmax(self, dim=-1):
        return _ops.log_softmax(self, dim)

    # --- comparisons (element-wise, bool results)
    def eq(self, other):
        return _ops.equal(self, other)

    def ne(self, other):
        return _ops.not_equal(self, other)

    def lt(self, other):
        return _ops.less(self, other)

    def le(self, other):
        return _ops.less_equal(self, other)

    def gt(self, other):
        return _ops.greater(self, other)

    def ge(self, other):
        return _ops.greater_equal(self, other)

    def equal(self, other):
        """True when `other` has this shape and the same values (torch.equal)."""
        return tuple(self.shape) == tuple(getattr(other, "shape", np.shape(other))) and bool(
            np.array_equal(self.numpy(), np.asarray(other)))

    # --- reductions: PyTorch's dim/keepdim, numpy's axis/keepdims
    def sum(self, dim=None, keepdim=False, dtype=None, *, axis=None, keepdims=None):
        x = self if dtype is None else self.to(dtype)
        return _ops.sum(x, _axis(dim, axis), _keep(keepdim, keepdims))

    def mean(self, dim=None, keepdim=False, dtype=None, *, axis=None, keepdims=None):
        x = self if dtype is None else self.to(dtype)
        return _ops.mean(x, _axis(dim, axis), _keep(keepdim, keepdims))

    def max(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """max() is the largest element; max(dim) is (values, indices) as in PyTorch; max(axis=) values only."""
        if dim is None:
            return _ops.max(self, axis, _keep(keepdim, keepdims))
        if hasattr(dim, "shape"):  # torch.max(a, b): element-wise
            return _ops.maximum(self, dim)
        return _MaxMin(_ops.max(self, dim, keepdim), _ops.arg_max(self, dim, keepdim))

    def min(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        if dim is None:
            return _ops.min(self, axis, _keep(keepdim, keepdims))
        if hasattr(dim, "shape"):
            return _ops.minimum(self, dim)
        return _MaxMin(_ops.min(self, dim, keepdim), _ops.arg_min(self, dim, keepdim))

    def argmax(self, dim=None, keepdim=False):
        return _ops.arg_max(self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return _ops.arg_min(self, dim, keepdim)

    def any(self, dim=None, keepdim=False):
        from opforge._factories import any as _any
        return _any(self, dim, keepdim)

    def all(self, dim=None, keepdim=False):
        from opforge._factories import all as _all
        return _all(self, dim, keepdim)

    # --- in place
    def zero_(self):
        return _write(self, 0, "zero_")

    def fill_(self, value):
        return _write(self, value, "fill_")

    def copy_(self, src):
        return _write(self, src, "copy_")

    def add_(self, other, alpha=1):
        return _write(self, lambda: self.add(other, alpha), "add_", other)

    def sub_(self, other, alpha=1):
        return _write(self, lambda: self.sub(other, alpha), "sub_", other)

    def mul_(self, other):
        return _write(self, lambda: _ops.mul(self, other), "mul_", other)

    def div_(self, other):
        return _write(self, lambda: _ops.div(self, other), "div_", other)

    def clamp_(self, min=None, max=None):
        return _write(self, lambda: self.clamp(min, max), "clamp_")

    def __iadd__(self, other):
        return _augmented(self, other, _ops.add, "+=")

    def __isub__(self, other):
        return _augmented(self, other, _ops.sub, "-=")

    def __imul__(self, other):
        return _augmented(self, other, _ops.mul, "*=")

    def __itruediv__(self, other):
        return _augmented(self, other, _ops.div, "/=")


def _requires(t):
    ag = getattr(t, "_ag", None)
    return ag is not None and ag.requires_grad


def _check_inplace(t, name, other=None):
    if not _pw.grad_enabled():
        return
    if _requires(t):
        what = ("a leaf that requires grad" if t._ag.grad_fn is None
                else "a tensor computed from tensors that require grad (its value may be saved for backward)")
        raise _errors.InvalidArgumentError(
            f"Tensor.{name}: {what} cannot be changed in place while gradients are recorded: that would "
            "silently cut it from the graph. Update parameters inside `with of.no_grad():`")
    if other is not None and _requires(other):
        raise _errors.InvalidArgumentError(
            f"Tensor.{name}: the operand requires grad, but an in-place result is not recorded; "
            "use the out-of-place op (x = x + y) or of.no_grad()")


def _write(t, value, name, other=None):
    _check_inplace(t, name, other)
    view = t.numpy()
    if not view.flags.writeable:
        raise _errors.InvalidArgumentError(
            f"Tensor.{name}: this tensor is read-only (it borrows read-only memory); use t.copy() first")
    if callable(value):
        value = value()
    src = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
    if src.shape != view.shape:
        try:
            src = np.broadcast_to(src, view.shape)
        except ValueError:
            raise _errors.InvalidArgumentError(
                f"Tensor.{name}: a value of shape {tuple(src.shape)} cannot be written into shape {tuple(view.shape)}") from None
    try:
        np.copyto(view, src, casting="same_kind")
    except TypeError as e:
        raise _errors.InvalidArgumentError(
            f"Tensor.{name}: a {src.dtype} result cannot be stored in this {t.dtype.name} tensor") from e
    _write_generation.bump()  # caches of t's values (nn.Conv2d's packed filter) are stale now
    return t


def _augmented(t, other, op, symbol):
    if not _requires(t) and not t.numpy().flags.writeable:
        return op(t, other)  # read-only memory (e.g. a borrowed constant): rebind, as for numbers
    return _write(t, lambda: op(t, other), symbol, other)


def install(tensor_type):
    """Copies the methods onto the Tensor type (its C part takes no Python base class)."""
    for name, value in vars(TorchMethods).items():
        if not (name.startswith("__") and name not in ("__iadd__", "__isub__", "__imul__", "__itruediv__")):
            setattr(tensor_type, name, value)
    c_size = tensor_type.size  # the C getter: the element count
    tensor_type.size = property(lambda self: _Size(c_size.__get__(self), self.shape),
                                doc="The element count (numpy); call it for the shape (PyTorch's size()).")
