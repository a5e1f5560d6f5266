"""test_bad_input oracles for the index ops (robustness_oracles.py merges them into ORACLES).

Indices are mostly in range, sometimes out of it (either side); shapes and
attrs are sometimes inconsistent. Each oracle raises ValueError (bad shape
or attr) or IndexError (bad index) where the op must raise.
"""
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from opforge.testing.check.inputs import array, quiet, shapes

REDUCTIONS = ["none", "add", "mul", "max", "min"]


def _indices(draw, shape, dim):
    itype = draw(st.sampled_from([np.int32, np.int64]))
    ints = st.integers(-dim, max(dim - 1, -dim)) if draw(st.integers(0, 5)) and dim else st.integers(-dim - 2, dim + 2)
    return draw(hnp.arrays(itype, shape, elements=ints))


def _reduction(draw):
    return draw(st.sampled_from(REDUCTIONS)) if draw(st.integers(0, 9)) else "sum"


def _check_range(col, dim):
    if col.size and (col.min() < -dim or col.max() >= dim):
        raise IndexError("index out of range")


def _nd_tuples(data, indices):
    if indices.ndim == 0:
        raise ValueError("indices must have rank >= 1")
    k = indices.shape[-1]
    if k > data.ndim:
        raise ValueError("index tuples longer than data's rank")
    flat = indices.reshape(int(np.prod(indices.shape[:-1])), k).astype(np.int64)
    for j in range(k):
        _check_range(flat[:, j], data.shape[j])
        flat[:, j] %= max(data.shape[j], 1)
    return k, [tuple(t) for t in flat]


def gather_nd_gen(draw, dtype):
    params = array(draw, dtype, draw(shapes(max_rank=3)))
    k = draw(st.integers(0, params.ndim + (0 if draw(st.integers(0, 5)) else 1)))
    lead = draw(shapes(max_rank=2))
    dim = min(params.shape[:k]) if k and params.ndim >= k else 3
    return (params, _indices(draw, lead + (k,), dim)), {}


@quiet
def gather_nd(params, indices):
    k, tuples = _nd_tuples(params, indices)
    out = np.empty(indices.shape[:-1] + params.shape[k:], params.dtype)
    flat = out.reshape((len(tuples),) + params.shape[k:])
    for i, t in enumerate(tuples):
        flat[i] = params[t]
    return out


def scatter_nd_gen(draw, dtype):
    data = array(draw, dtype, draw(shapes(max_rank=3)), small=True)
    k = draw(st.integers(0, data.ndim + (0 if draw(st.integers(0, 5)) else 1)))
    lead = draw(shapes(max_rank=2))
    dim = min(data.shape[:k]) if k and data.ndim >= k else 3
    ushape = lead + data.shape[k:] if draw(st.integers(0, 5)) else draw(shapes(max_rank=3))
    return (data, _indices(draw, lead + (k,), dim), array(draw, dtype, ushape, small=True)), {
        "reduction": _reduction(draw)}


def _combine(reduction, a, b):
    if reduction == "none":
        return b
    if a.dtype == np.bool_:
        return {"add": np.logical_or, "mul": np.logical_and, "max": np.logical_or, "min": np.logical_and}[
            reduction](a, b)
    return {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[reduction](a, b)


@quiet
def scatter_nd(data, indices, updates, reduction):
    if reduction not in REDUCTIONS:
        raise ValueError("reduction")
    if indices.ndim == 0 or indices.shape[-1] > data.ndim:
        raise ValueError("indices")
    k = indices.shape[-1]
    if updates.shape != indices.shape[:-1] + data.shape[k:]:
        raise ValueError("updates shape")
    k, tuples = _nd_tuples(data, indices)
    out = data.copy()
    rows = updates.reshape((len(tuples),) + data.shape[k:])
    for t, u in zip(tuples, rows):
        out[t] = _combine(reduction, out[t], u)
    return out


def _elements_check(data, indices, axis):
    if data.ndim == 0 or indices.ndim != data.ndim:
        raise ValueError("rank")
    if not -data.ndim <= axis < data.ndim:
        raise ValueError("axis")
    axis %= data.ndim
    if any(i > d for j, (i, d) in enumerate(zip(indices.shape, data.shape)) if j != axis):
        raise ValueError("indices larger than data")
    _check_range(indices, data.shape[axis])
    return axis


def _positions(data, indices, axis):
    for pos in np.ndindex(*indices.shape):
        at = list(pos)
        at[axis] = int(indices[pos]) % data.shape[axis]
        yield pos, tuple(at)


def elements_gen(draw, dtype, scatter=False):
    data = array(draw, dtype, draw(shapes(max_rank=3)), small=True)
    rank = data.ndim
    axis = draw(st.integers(-rank, rank - 1)) if rank and draw(st.integers(0, 5)) else draw(st.integers(-3, 3))
    if draw(st.integers(0, 5)) and rank:
        ishape = tuple(draw(st.integers(0, d)) if j != axis % rank else draw(st.integers(0, 3))
                       for j, d in enumerate(data.shape))
    else:
        ishape = draw(shapes(max_rank=3))
    dim = data.shape[axis % rank] if rank else 2
    args = (data, _indices(draw, ishape, dim))
    if not scatter:
        return args, {"axis": axis}
    ushape = ishape if draw(st.integers(0, 5)) else draw(shapes(max_rank=3))
    return args + (array(draw, dtype, ushape, small=True),), {"axis": axis, "reduction": _reduction(draw)}


@quiet
def gather_elements(params, indices, axis):
    axis = _elements_check(params, indices, axis)
    out = np.empty(indices.shape, params.dtype)
    for pos, at in _positions(params, indices, axis):
        out[pos] = params[at]
    return out


@quiet
def scatter_elements(data, indices, updates, axis, reduction):
    if reduction not in REDUCTIONS:
        raise ValueError("reduction")
    axis = _elements_check(data, indices, axis)
    if updates.shape != indices.shape:
        raise ValueError("updates shape")
    out = data.copy()
    for pos, at in _positions(data, indices, axis):
        out[at] = _combine(reduction, out[at], updates[pos])
    return out


def top_k_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes(min_rank=0, max_rank=3)))
    rank = x.ndim
    axis = draw(st.integers(-rank, rank - 1)) if rank and draw(st.integers(0, 5)) else draw(st.integers(-3, 3))
    dim = x.shape[axis % rank] if rank and -rank <= axis < rank else 2
    k = draw(st.integers(0, dim)) if draw(st.integers(0, 5)) else draw(st.integers(-1, dim + 2))
    return (x,), {"k": k, "axis": axis, "largest": draw(st.booleans()), "sorted": draw(st.booleans())}


@quiet
def top_k(x, k, axis, largest, **_):  # 'sorted' (always honoured) would shadow the builtin
    if k < 0 or x.ndim == 0 or not -x.ndim <= axis < x.ndim or k > x.shape[axis]:
        raise ValueError("bad TopK input")
    moved = np.moveaxis(x, axis, -1)
    lanes = moved.reshape(int(np.prod(moved.shape[:-1])), moved.shape[-1])
    vals = np.empty((lanes.shape[0], k), x.dtype)
    idx = np.empty((lanes.shape[0], k), np.int64)
    for r, lane in enumerate(lanes):
        items = [(v.item(), j) for j, v in enumerate(lane)]
        if largest:  # NaN above every number; ties: the lower index first
            key = lambda t: (0 if t[0] != t[0] else 1, -t[0] if t[0] == t[0] else 0, t[1])  # noqa: E731
        else:
            key = lambda t: (1 if t[0] != t[0] else 0, t[0] if t[0] == t[0] else 0, t[1])  # noqa: E731
        best = sorted(items, key=key)[:k]
        vals[r] = [lane[j] for _, j in best]
        idx[r] = [j for _, j in best]
    shape = moved.shape[:-1] + (k,)
    return (np.moveaxis(vals.reshape(shape), -1, axis), np.moveaxis(idx.reshape(shape), -1, axis))


def non_zero_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes(max_rank=3)))
    count = int(np.count_nonzero(x))
    return (x,), {"count": count if draw(st.integers(0, 5)) else draw(st.integers(-1, count + 2))}


@quiet
def non_zero(x, count):
    if count != np.count_nonzero(x):
        raise ValueError("count")
    if x.ndim == 0:  # numpy refuses 0-d; NonZero gives rank-0 positions: shape [0, count]
        return np.zeros((0, count), np.int64)
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, count)


INDEX_ORACLES = {
    "GatherND": (gather_nd_gen, gather_nd),
    "ScatterND": (scatter_nd_gen, scatter_nd),
    "GatherElements": (elements_gen, gather_elements),
    "ScatterElements": (lambda d, t: elements_gen(d, t, scatter=True), scatter_elements),
    "TopK": (top_k_gen, top_k),
    "NonZero": (non_zero_gen, non_zero),
}
