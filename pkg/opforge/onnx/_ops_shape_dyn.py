"""Expand, Tile, Range, ConstantOfShape and Trilu where their shape-like inputs or
the data's dims are known only when the graph runs (symbolic dims): the
shape-tensor ops of cpp/ops/shape_ops.cc. Where everything is known at
conversion, the static converters (_ops_index.py, _ops_math_more.py) run
as before; this module wraps them (imported after them by _importer.py)."""

import numpy as np

from opforge import ops as P
from opforge.onnx import _validate
from opforge.onnx._node import CONVERTERS, Converter, shape_of
from opforge.onnx._shape_values import int64_tensor, ints_or_tensor, is_run_time


def _wrap(op_type, dynamic):
    """CONVERTERS[op_type] tries `dynamic` first; NotImplemented falls back to the static one."""
    base = CONVERTERS[op_type]

    def fn(n):
        r = dynamic(n)
        return base.fn(n) if r is NotImplemented else r
    fn.__name__ = base.fn.__name__
    CONVERTERS[op_type] = Converter(op_type, base.versions, base.attrs, fn, base.check)


def _shape_input(n, i, what, x=None):
    """The shape-like input as a tensor where it or x's dims are known only at run time; else None."""
    ints, dyn = ints_or_tensor(n, i, what)
    if dyn is not None:
        return dyn
    if x is not None and None in shape_of(x):
        return int64_tensor(ints)
    return None


def _expand(n):
    x = n.input(0)
    shape = _shape_input(n, 1, "shape", x)
    return NotImplemented if shape is None else P.expand(x, shape)


def _tile(n):
    x = n.input(0)
    reps = _shape_input(n, 1, "repeats", x)
    return NotImplemented if reps is None else P.tile(x, reps)


def _range(n):
    vals = [n.input(i) for i in range(3)]
    if not any(is_run_time(v) for v in vals):
        return NotImplemented
    return P.arange_of(*vals)


def _constant_of_shape(n):
    shape = n.input(0)
    if not is_run_time(shape):
        return NotImplemented
    _, shape = ints_or_tensor(n, 0, "input")
    if n.has_attr("value"):
        v = _validate.tensor_to_numpy(n.attr("value"), f"node {n.where} attribute 'value'")
        if v.size != 1:
            raise n.fail(f"attribute 'value' must hold one element, got {v.size}")
        value = v.reshape(())
    else:
        value = np.zeros((), np.float32)
    return P.constant_of_shape(shape, value)


def _trilu(n):
    x = n.input(0)
    shape = shape_of(x)
    if len(shape) < 2 or None not in shape[-2:]:
        return NotImplemented
    # The mask from the run-time dims: col - row >= k (upper) or <= k (lower).
    k, kt = ints_or_tensor(n, 1, "k") if n.has(1) else ([0], None)
    k = kt if kt is not None else np.array(k, np.int64)
    s = P.shape(x)
    dims = [P.reshape(P.slice(s, begin=[len(shape) + a], size=[1]), shape=[]) for a in (-2, -1)]
    zero, one = np.array(0, np.int64), np.array(1, np.int64)
    rows = P.reshape(P.arange_of(zero, dims[0], one), shape=[-1, 1])
    cols = P.reshape(P.arange_of(zero, dims[1], one), shape=[1, -1])
    diff = P.sub(cols, rows)
    mask = P.greater_equal(diff, P.reshape(k, shape=[])) if n.attr("upper", 1) else \
        P.less_equal(diff, P.reshape(k, shape=[]))
    return P.select(mask, x, np.zeros((), dtype=x.dtype.as_numpy_dtype))


_wrap("Expand", _expand)
_wrap("Tile", _tile)
_wrap("Range", _range)
_wrap("ConstantOfShape", _constant_of_shape)
_wrap("Trilu", _trilu)
