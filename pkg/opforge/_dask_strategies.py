"""How each op category runs on dask.array; the generated wrappers of
``opforge.dask`` (and of ``m.dask`` for op libraries) call these.

Every strategy takes (op name, eager wrapper, inputs in declaration order,
attrs by name), checks the call with the binder (``_pywrap_internal.bind``:
the op's own dtype/shape/attr checks, without running it) so that
errors raise when the graph is built, naming the op, and then builds the dask
graph. Each block runs the eager op (GIL released, intra-op threads).
"""
from __future__ import annotations

import functools
import numbers

import dask.array as da
import numpy as np
from dask.array import reductions as _dar

from . import _pywrap_internal as _pw, errors


def _is_scalar(v) -> bool:
    return isinstance(v, (numbers.Number, np.generic)) and not isinstance(v, np.ndarray)


def _array(v):
    """A dask array, or a Python/numpy scalar as is (it takes its partner's dtype)."""
    if _is_scalar(v) or isinstance(v, da.Array):
        return v
    return da.asarray(np.asarray(v))


def _shape_known(name: str, v):
    if not _is_scalar(v) and any(np.isnan(d) for d in v.shape):
        raise errors.UnimplementedError(
            f"{name}: a dask array of unknown shape {v.shape}; call compute_chunk_sizes() first")
    return v


def _infer(name: str, inputs, attrs):
    """(output dtypes, output shapes) of the op on these inputs; raises its errors.
    The binder (``_pywrap_internal.bind``, as every op call) takes a dask
    array by its dtype and shape, and a scalar at its partner's dtype."""
    args = tuple([_shape_known(name, x) for x in v] if isinstance(v, (list, tuple)) else _shape_known(name, v)
                 for v in inputs)
    _, dtypes, shapes, _ = _pw.bind(name, args, attrs)
    return [np.dtype(d.name) for d in dtypes], [tuple(s) for s in shapes]


def _flat(inputs):
    for v in inputs:
        yield from (v if isinstance(v, (list, tuple)) else (v,))


def _numpy(t) -> np.ndarray:
    return t.numpy() if hasattr(t, "numpy") else np.asarray(t)


class _Block:
    """Runs the eager op on blocks (picklable: the wrapper pickles by name)."""

    def __init__(self, fn, attrs: dict):
        self.fn, self.attrs = fn, attrs

    def __call__(self, *blocks):
        return _numpy(self.fn(*blocks, **self.attrs))


def _right_aligned(arrays, ndim: int):
    """blockwise's (array, index) pairs with numpy broadcasting: an array's
    axes are the output's last ones; scalars pass as is."""
    pairs = []
    for a in arrays:
        pairs += [a, None] if _is_scalar(a) else [a, tuple(range(ndim - a.ndim, ndim))]
    return pairs


def elementwise(name, fn, inputs, attrs):
    args = [_array(v) for v in inputs]
    (dtype,), (shape,) = _infer(name, args, attrs)
    if all(_is_scalar(a) for a in args):
        return da.from_array(_numpy(fn(*args, **attrs)))
    ndim = len(shape)
    return da.blockwise(_Block(fn, attrs), tuple(range(ndim)), *_right_aligned(args, ndim),
                        dtype=dtype, meta=np.empty((0,) * ndim, dtype))


def _axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axis = [axis] if isinstance(axis, numbers.Integral) else list(axis)
    return tuple(sorted({a % ndim for a in axis})) if ndim else ()


def _partial(fn, block, axis=None, keepdims=False, **_):
    return _numpy(fn(block, axis=list(axis), keepdims=keepdims))


def reduction(name, fn, inputs, attrs):
    """Sum, Prod, Max, Min: each block reduced, then the partials by the same op."""
    (x,) = (_array(v) for v in inputs)
    (dtype,), (shape,) = _infer(name, (x,), attrs)
    if _is_scalar(x):
        return elementwise(name, fn, inputs, attrs)
    part = functools.partial(_partial, fn)
    return da.reduction(x, part, part, combine=part, axis=_axes(attrs["axis"], x.ndim),
                        keepdims=attrs["keepdims"], dtype=dtype, concatenate=True,
                        meta=np.empty((0,) * len(shape), dtype))


def mean(name, fn, inputs, attrs):
    """Mean as the sum (by opforge's Sum) over the count of the reduced axes."""
    from opforge import ops
    (x,) = (_array(v) for v in inputs)
    (dtype,), _ = _infer(name, (x,), attrs)
    if _is_scalar(x) or dtype.kind != "f":
        # Integer means round like the op's own kernel: no partial-sum shortcut.
        if _is_scalar(x) or x.ndim == 0:
            return elementwise(name, fn, (x,), attrs)
        return _whole(name, fn, x, attrs, _axes(attrs["axis"], x.ndim))
    axes = _axes(attrs["axis"], x.ndim)
    total = reduction("Sum", ops.sum, (x,), attrs)
    count = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    return elementwise("Div", ops.div, (total, float(count)), {})


def _whole(name, fn, x, attrs, axes):
    """The op run on blocks that hold the whole of ``axes`` (reduced or kept as 1)."""
    (dtype,), (shape,) = _infer(name, (x,), attrs)
    x = x.rechunk({a: -1 for a in axes})
    ind = tuple(range(x.ndim))
    keep = attrs.get("keepdims", False)
    out_ind = ind if keep else tuple(i for i in ind if i not in axes)
    return da.blockwise(_Block(fn, attrs), out_ind, x, ind, dtype=dtype,
                        adjust_chunks={a: 1 for a in axes} if keep else None,
                        meta=np.empty((0,) * len(shape), dtype))


class _ArgFn:
    """The op as dask's arg-reduction helpers call argmin/argmax."""

    def __init__(self, fn):
        self.fn, self.__name__ = fn, getattr(fn, "__name__", "arg")

    def __call__(self, x, axis=None, keepdims=False):
        return _numpy(self.fn(x, axis=axis, keepdims=keepdims))


class _ArgValue:
    """The values at the op's indices (dask's chunk step wants both)."""

    def __init__(self, fn):
        self.arg = _ArgFn(fn)

    def __call__(self, x, axis=None, keepdims=True):
        i = self.arg(x, axis=axis, keepdims=True)
        if axis is None:
            return x.reshape(-1)[i.reshape(-1)].reshape(i.shape)
        return np.take_along_axis(x, i, axis)


def arg_reduction(name, fn, inputs, attrs):
    """ArgMax, ArgMin: dask's arg-reduction (candidates per block, then the best)."""
    (x,) = (_array(v) for v in inputs)
    (dtype,), (shape,) = _infer(name, (x,), attrs)
    if _is_scalar(x) or x.ndim == 0 or x.size == 0:
        return _whole(name, fn, da.asarray(x), attrs, tuple(range(np.ndim(x))))
    arg = _ArgFn(fn)
    out = _dar.arg_reduction(x, functools.partial(_dar.arg_chunk, _ArgValue(fn), arg),
                             functools.partial(_dar.arg_combine, arg),
                             functools.partial(_dar.arg_agg, arg),
                             axis=attrs["axis"], keepdims=attrs["keepdims"])
    if out.shape != shape:
        out = out.reshape(shape)  # dask keeps one axis of a full keepdims reduction
    return out.astype(dtype, copy=False)


def _contract_block(fn, attrs, a, b):
    # One product per (i, k, j) block triple; k is summed afterwards.
    return np.expand_dims(_numpy(fn(a, b, **attrs)), -2)


def contraction(name, fn, inputs, attrs):
    """MatMul: a product per pair of blocks along k, then a sum over k."""
    a, b = (_array(v) for v in inputs)
    (dtype,), (shape,) = _infer(name, (a, b), attrs)
    if _is_scalar(a) or _is_scalar(b) or a.ndim < 2 or a.ndim != b.ndim:
        raise errors.UnimplementedError(
            f"{name} on dask arrays needs two operands of the same rank >= 2, got ranks "
            f"{np.ndim(a)} and {np.ndim(b)}")
    batch = tuple(f"b{i}" for i in range(a.ndim - 2))
    a_ind = batch + (("k", "i") if attrs["transpose_a"] else ("i", "k"))
    b_ind = batch + (("j", "k") if attrs["transpose_b"] else ("k", "j"))
    parts = da.blockwise(functools.partial(_contract_block, fn, attrs), batch + ("i", "k", "j"),
                         a, a_ind, b, b_ind, adjust_chunks={"k": 1}, dtype=dtype,
                         meta=np.empty((0,) * (len(shape) + 1), dtype))
    from opforge import ops
    return reduction("Sum", ops.sum, (parts,), {"axis": [parts.ndim - 2], "keepdims": False})


def whole_axis(name, fn, inputs, attrs):
    """Softmax, RmsNorm, ...: inputs of the first one's rank get the whole axis
    (``axis`` attr, else the last) in one chunk; lower-rank inputs broadcast."""
    args = [_array(v) for v in inputs]
    (dtype,), (shape,) = _infer(name, args, attrs)
    ndim = len(shape)
    axis = attrs.get("axis", -1) % ndim
    big = [a.rechunk({axis: -1}) if not _is_scalar(a) and a.ndim == ndim
           else (a if _is_scalar(a) else a.rechunk(-1)) for a in args]
    return da.blockwise(_Block(fn, attrs), tuple(range(ndim)), *_right_aligned(big, ndim),
                        dtype=dtype, meta=np.empty((0,) * ndim, dtype))


# --- layout ops: dask's own functions ---------------------------------------

def _slice(x, begin, size):
    return x[tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))]


def _reshape(x, shape):
    try:
        return x.reshape(shape)
    except NotImplementedError:  # dask splits/merges axes only: through 1-D, which always can
        return x.reshape(-1).reshape(shape)


def _gather(name, params, indices):
    idx = np.asarray(indices.compute() if isinstance(indices, da.Array) else indices)
    if idx.size and (idx.min() < 0 or idx.max() >= params.shape[0]):
        raise errors.InvalidArgumentError(
            f"{name}: argument 'indices' holds values outside [0, {params.shape[0]})")
    return params[idx.reshape(-1)].reshape(idx.shape + params.shape[1:])


def _fill(value, shape, dtype):
    if isinstance(value, da.Array):
        return da.broadcast_to(value.reshape(()), shape)
    return da.full(shape, np.asarray(value).reshape(()), dtype=dtype)


# Inputs in declaration order, the attrs, the inferred shape and dtype.
_LAYOUT = {
    "Reshape": lambda name, i, a, shape, dtype: _reshape(i[0], shape),
    "Transpose": lambda name, i, a, shape, dtype: da.transpose(i[0], a["perm"]),
    "Concat": lambda name, i, a, shape, dtype: da.concatenate(i[0], axis=a["axis"]),
    "Slice": lambda name, i, a, shape, dtype: _slice(i[0], a["begin"], a["size"]),
    "Fill": lambda name, i, a, shape, dtype: _fill(i[0], shape, dtype),
    "Gather": lambda name, i, a, shape, dtype: _gather(name, i[0], i[1]),
}


def layout(name, fn, inputs, attrs):
    """Reshape, Transpose, Concat, Slice, Fill, Gather: dask's own functions."""
    impl = _LAYOUT.get(name)
    if impl is None:
        raise errors.UnimplementedError(
            f"{name}: opforge.dask has no dask equivalent of this layout op")
    args = [[_array(x) for x in v] if isinstance(v, (list, tuple)) else _array(v) for v in inputs]
    (dtype,), (shape,) = _infer(name, args, attrs)
    return impl(name, args, attrs, shape, dtype)


def unimplemented(name, *_):
    raise errors.UnimplementedError(
        f"{name} cannot run on dask arrays: its declared category is 'none' (it updates its "
        "inputs in place, depends on element positions, has several outputs, or is a backward "
        "op); compute the inputs and call opforge's eager op")
