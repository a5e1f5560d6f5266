"""Tensor factories with PyTorch's names and defaults (float32, int64 for integers).

``of.zeros(2, 3)`` and ``of.zeros((2, 3))`` both work; ``dtype=`` takes an
opforge dtype, a numpy dtype or a name; ``requires_grad=True`` makes a leaf.
zeros/ones/full and the random ones are ops (so they also build graph
nodes); arange/linspace/eye are computed by numpy and wrapped without a copy.
"""

import builtins

import numpy as np

from opforge import _pywrap_internal as _pw
from opforge import dtypes as _dtypes
from opforge import errors as _errors
from opforge import ops as _ops
from opforge import random as _random


def _size(size, fn):
    if len(size) == 1 and not isinstance(size[0], (int, np.integer)):
        size = tuple(size[0])
    try:
        size = [int(d) for d in size]
    except (TypeError, ValueError):
        raise _errors.InvalidArgumentError(f"{fn}: size must be ints or one sequence of ints, got {size!r}") from None
    if builtins.any(d < 0 for d in size):
        raise _errors.InvalidArgumentError(f"{fn}: size {size} has a negative dim")
    return size


def _dt(dtype, default="float32"):
    return _dtypes.as_dtype(default if dtype is None else dtype).name


def _finish(t, requires_grad):
    if requires_grad:
        from opforge.autodiff import make_leaf
        t = make_leaf(t)
    return t


def full(size, fill_value, dtype=None, requires_grad=False):
    """A tensor of `size` filled with `fill_value` (dtype inferred as torch.full does)."""
    if dtype is None:
        dtype = "bool" if isinstance(fill_value, (bool, np.bool_)) else (
            "int64" if isinstance(fill_value, (int, np.integer)) else "float32")
    if isinstance(size, (int, np.integer)):
        size = (size,)
    size = _size(tuple(size), "full")
    return _finish(_ops.fill(size, np.asarray(fill_value, dtype=_dt(dtype))), requires_grad)


def zeros(*size, dtype=None, requires_grad=False):
    return full(_size(size, "zeros"), 0, _dt(dtype), requires_grad)


def ones(*size, dtype=None, requires_grad=False):
    return full(_size(size, "ones"), 1, _dt(dtype), requires_grad)


def empty(*size, dtype=None, requires_grad=False):
    """Like zeros (opforge never hands out uninitialized memory)."""
    return zeros(*size, dtype=dtype, requires_grad=requires_grad)


def _like(x, dtype):
    return list(x.shape), (x.dtype.name if dtype is None else _dt(dtype))


def zeros_like(x, dtype=None, requires_grad=False):
    if dtype is None and not requires_grad:
        return _ops.zeros_like(x)  # an op: works on symbolic tensors too
    shape, d = _like(_as_tensor(x), dtype)
    return full(shape, 0, d, requires_grad)


def ones_like(x, dtype=None, requires_grad=False):
    if dtype is None and not requires_grad:
        return _ops.ones_like(x)
    shape, d = _like(_as_tensor(x), dtype)
    return full(shape, 1, d, requires_grad)


def full_like(x, fill_value, dtype=None, requires_grad=False):
    shape, d = _like(_as_tensor(x), dtype)
    return full(shape, fill_value, d, requires_grad)


def empty_like(x, dtype=None, requires_grad=False):
    return zeros_like(x, dtype, requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad=False):
    """[start, end) in steps (torch.arange: int64 when every argument is an int, else float32)."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise _errors.InvalidArgumentError("arange: step must be nonzero")
    if dtype is None:
        ints = builtins.all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        dtype = "int64" if ints else "float32"
    return _finish(_pw.to_tensor(np.arange(start, end, step, dtype=_dt(dtype)), None), requires_grad)


def linspace(start, end, steps, dtype=None, requires_grad=False):
    """`steps` evenly spaced values from start to end inclusive (torch.linspace)."""
    if int(steps) < 0:
        raise _errors.InvalidArgumentError(f"linspace: steps must be >= 0, got {steps}")
    return _finish(_pw.to_tensor(np.linspace(start, end, int(steps), dtype=_dt(dtype)), None), requires_grad)


def eye(n, m=None, dtype=None, requires_grad=False):
    """The n x m identity (torch.eye)."""
    if int(n) < 0 or (m is not None and int(m) < 0):
        raise _errors.InvalidArgumentError(f"eye: sizes must be >= 0, got n={n}, m={m}")
    return _finish(_pw.to_tensor(np.eye(int(n), None if m is None else int(m), dtype=_dt(dtype)), None),
                   requires_grad)


def rand(*size, dtype=None, requires_grad=False, seed=None):
    """Uniform [0, 1) values (seeded by of.manual_seed)."""
    return _finish(_random.uniform(_size(size, "rand"), dtype=_dt(dtype), seed=seed), requires_grad)


def randn(*size, dtype=None, requires_grad=False, seed=None):
    """Standard normal values (seeded by of.manual_seed)."""
    return _finish(_random.normal(_size(size, "randn"), dtype=_dt(dtype), seed=seed), requires_grad)


def randint(low, high=None, size=None, dtype=None, seed=None):
    """torch.randint: randint(high, size) or randint(low, high, size); int64 by default."""
    if size is None:  # randint(high, size)
        if high is None:
            raise _errors.InvalidArgumentError("randint: size is required, e.g. randint(10, (3,))")
        low, high, size = 0, low, high
    return _random.randint(low, high, size, dtype=_dt(dtype, "int64"), seed=seed)


def rand_like(x, dtype=None, requires_grad=False):
    shape, d = _like(_as_tensor(x), dtype)
    return rand(shape, dtype=d, requires_grad=requires_grad)


def randn_like(x, dtype=None, requires_grad=False):
    shape, d = _like(_as_tensor(x), dtype)
    return randn(shape, dtype=d, requires_grad=requires_grad)


def randperm(n, dtype=None, seed=None):
    return _random.permutation(n, dtype=_dt(dtype, "int64"), seed=seed)


def manual_seed(n):
    """Seeds every random op and factory (torch.manual_seed)."""
    _random.seed(n)


def _as_tensor(x):
    return x if hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x.dtype, "name") else _pw.to_tensor(x, None)


def tensor(data, dtype=None, requires_grad=False):
    """`data` as a Tensor, converted to `dtype` when given (torch.tensor / tf.convert_to_tensor).

    An ndarray (or Tensor) already of `dtype` that is C-contiguous is
    borrowed without a copy; any other dtype is converted (numpy's casting
    rules), and Python lists take numpy's inference (float64 for floats,
    int64 for ints) unless `dtype` says otherwise.
    """
    if dtype is not None:
        want = _dtypes.as_dtype(dtype).name
        if isinstance(data, _pw.Tensor if hasattr(_pw, "Tensor") else ()) or type(data).__name__ == "Tensor":
            data = data.numpy()
        arr = np.asarray(data)
        if arr.dtype.name != want:
            if arr.dtype.kind in "fc" and want in ("int32", "int64") and not np.all(np.isfinite(arr)):
                raise _errors.InvalidArgumentError(f"tensor: cannot convert non-finite values to {want}")
            arr = arr.astype(want)
        data = np.ascontiguousarray(arr)
    from opforge.tensor import tensor as _tensor
    return _tensor(data, None, requires_grad)


def _reduce_bool(x, dim, keepdim, fn):
    x = _ops.cast(x, "bool") if _as_tensor(x).dtype.name != "bool" else x
    if fn == "all":
        x = _ops.logical_not(x)
    count = _ops.sum(_ops.cast(x, "int64"), dim, keepdim)
    return _ops.greater(count, 0) if fn == "any" else _ops.equal(count, 0)


def any(x, dim=None, keepdim=False):
    """True where any element (along `dim`) is nonzero (torch.any; np.any's axis as dim)."""
    return _reduce_bool(x, dim, keepdim, "any")


def all(x, dim=None, keepdim=False):
    """True where every element (along `dim`) is nonzero (torch.all)."""
    return _reduce_bool(x, dim, keepdim, "all")


# zeros_like / ones_like stay the ZerosLike / OnesLike ops at of.* (x's dtype); these take dtype=.
__all__ = ["zeros", "ones", "full", "empty", "full_like", "empty_like", "arange",
           "linspace", "eye", "rand", "randn", "randint", "rand_like", "randn_like", "randperm", "manual_seed",
           "tensor", "any", "all"]
