"""ONNX CumProd, ReverseSequence, Compress, LRN and TensorScatter, composed of opforge ops."""

import numpy as np

from opforge import ops as P
from opforge.onnx import _take
from opforge.onnx._node import FLOAT, INT, STRING, converter, dtype_of, shape_of


def _static(n, x):
    shape = shape_of(x)
    if any(d is None for d in shape):
        raise n.fail(f"needs the static shape of its input, got {list(shape)}")
    return shape


def _shift_in(x, k, axis, fill):
    """x moved k places along axis, the first k filled with `fill` (the last k dropped)."""
    shape = list(shape_of(x))
    size = shape[axis]
    head = np.full([k if i == axis else d for i, d in enumerate(shape)], fill, dtype=dtype_of(x))
    if k >= size:
        return head[tuple(slice(0, size) if i == axis else slice(None) for i in range(len(shape)))]
    kept = P.slice(x, begin=[0] * len(shape), size=[size - k if i == axis else d for i, d in enumerate(shape)])
    return P.concat([head, kept], axis=axis)


@converter("CumProd", (26,), {"exclusive": INT, "reverse": INT})
def _cumprod(n):
    x = n.input(0)
    shape = _static(n, x)
    axis = n.axis(int(n.static(1, "axis").reshape(-1)[0]), len(shape))
    reverse = n.attr("reverse", 0)
    y = _take.flip(x, axis) if reverse else x
    if n.attr("exclusive", 0):
        y = _shift_in(y, 1, axis, 1)
    # Hillis-Steele scan: after the step with shift k, y[i] is the product of x[i-2k+1 .. i].
    k = 1
    while k < shape[axis]:
        y = P.mul(y, _shift_in(y, k, axis, 1))
        k *= 2
    return _take.flip(y, axis) if reverse else y


@converter("ReverseSequence", (10, 28), {"batch_axis": INT, "time_axis": INT})
def _reverse_sequence(n):
    x, lens = n.input(0), n.input(1)
    shape = _static(n, x)
    b, t = n.attr("batch_axis", 1), n.attr("time_axis", 0)
    if {b, t} != {0, 1}:
        raise n.fail(f"batch_axis {b} and time_axis {t} must be 0 and 1")
    steps = shape[t]
    # The source of time step i in batch row j: lens[j] - 1 - i while i < lens[j], else i.
    lanes = [1] * len(shape)
    lanes[t] = steps
    i = np.arange(steps, dtype=np.int64).reshape(lanes)
    lanes = [1] * len(shape)
    lanes[b] = shape[b]
    ln = P.reshape(P.cast(lens, dtype=np.dtype(np.int64)), shape=lanes)
    src = P.select(P.less(i, ln), P.sub(P.sub(ln, np.int64(1)), i), P.add(i, np.zeros_like(i)))
    src = P.add(src, np.zeros(shape, dtype=np.int64))  # broadcast to x's shape
    return _take.moved(lambda v: P.gather_elements(v, src, axis=t), x)


@converter("Compress", (9, 11, 28), {"axis": INT})
def _compress(n):
    x, cond = n.input(0), n.input(1)
    if n.has_attr("axis"):
        axis = n.axis(n.attr("axis"), len(shape_of(x)))
    else:
        x, axis = P.reshape(x, shape=[-1]), 0
    size = shape_of(x)[axis]
    if size is None or shape_of(cond)[0] is None:
        raise n.fail("needs static sizes of condition and the compressed axis")
    c = cond
    if shape_of(c)[0] > size:
        raise n.fail(f"condition has {shape_of(c)[0]} entries, more than axis {axis}'s {size}")
    # The output size depends on the values: the condition must have one at conversion.
    where = np.nonzero(n.static(1, "condition").reshape(-1))[0].astype(np.int64)
    return _take.take(x, where[where < size], axis)


@converter("LRN", (1, 13), {"alpha": FLOAT, "beta": FLOAT, "bias": FLOAT, "size": INT})
def _lrn(n):
    x = n.input(0)
    shape = _static(n, x)
    size = n.attr("size")
    if size is None or size < 1:
        raise n.fail(f"size must be a positive int, got {size}")
    dt = dtype_of(x)
    channels = shape[1]
    # Sum of squares over channels c - floor((size-1)/2) .. c + ceil((size-1)/2): a band matrix.
    lo, hi = (size - 1) // 2, (size - 1) - (size - 1) // 2
    c, d = np.indices((channels, channels))
    band = ((d >= c - lo) & (d <= c + hi)).astype(dt)
    sq = _take.apply_matrix(P.mul(x, x), band, 1)
    alpha, beta, bias = n.attr("alpha", 1e-4), n.attr("beta", 0.75), n.attr("bias", 1.0)
    base = P.add(np.array(bias, dt), P.mul(np.array(alpha / size, dt), sq))
    return P.div(x, P.pow(base, np.array(beta, dt)))


@converter("TensorScatter", (24,), {"axis": INT, "mode": STRING})
def _tensor_scatter(n):
    past, update = n.input(0), n.input(1)
    ps, us = _static(n, past), _static(n, update)
    rank = len(ps)
    axis = n.axis(n.attr("axis", -2), rank)
    mode = n.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise n.fail(f"mode {mode!r} is not one of linear, circular")
    if axis == 0 or len(us) != rank or any(p != u for i, (p, u) in enumerate(zip(ps, us)) if i != axis) \
            or us[axis] > ps[axis]:
        raise n.fail(f"update of shape {list(us)} does not fit past_cache of shape {list(ps)} at axis {axis}")
    # The cache position of each update element: write_indices[batch] + its position along axis.
    lanes = [1] * rank
    lanes[axis] = us[axis]
    steps = np.arange(us[axis], dtype=np.int64).reshape(lanes)
    if n.has(2):
        start = P.reshape(P.cast(n.input(2), dtype=np.dtype(np.int64)), shape=[ps[0]] + [1] * (rank - 1))
        index = P.add(start, steps)
        if mode == "circular":
            index = P.sub(index, P.mul(_floor_div(index, ps[axis]), np.int64(ps[axis])))
        index = P.add(index, np.zeros(us, np.int64))
    else:
        index = np.broadcast_to(steps % ps[axis] if mode == "circular" else steps, us).copy()
    return _take.moved2(lambda a, b: P.scatter_elements(a, index, b, axis=axis), past, update)


def _floor_div(v, d):
    """floor(v / d) of a non-negative int64 tensor by a positive int (exact below 2**52)."""
    f = np.dtype(np.float64)
    return P.cast(P.floor(P.div(P.cast(v, dtype=f), np.float64(d))), dtype=np.dtype(np.int64))
