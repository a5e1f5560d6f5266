"""numpy oracles of the shape-tensor ops (cpp/ops/shape_ops.cc: one graph for
every size), for test_bad_input.py. Shape tensors are int64 arrays; the
draws include negative dims, wrong lengths, steps of 0 and repeated axes."""

import numpy as np
from hypothesis import strategies as st

from robustness_oracles import array, quiet, shapes

_I = np.int64


def _ints(draw, lo, hi, min_size=0, max_size=4):
    return np.array(draw(st.lists(st.integers(lo, hi), min_size=min_size, max_size=max_size)), _I)


def shape_gen(draw, dtype):
    return (array(draw, dtype, draw(shapes())),), {}


def reshape_to_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes()))
    target = draw(st.one_of(st.permutations(list(x.shape)).map(lambda v: np.array(v, _I)),
                            st.just(np.array([0, -1][: x.ndim], _I)), st.just(np.array([-1], _I)),
                            st.builds(lambda v: v, st.just(None)).map(lambda _: _ints(draw, -2, 5))))
    return (x, target), {"allowzero": draw(st.booleans())}


@quiet
def reshape_to(x, shape, allowzero):
    spec = [int(d) for d in shape]
    dims = []
    for i, d in enumerate(spec):
        if d == 0 and not allowzero:
            if i >= x.ndim:
                raise ValueError("0 copies a dim x lacks")
            d = x.shape[i]
        dims.append(d)
    if any(d < -1 for d in dims) or dims.count(-1) > 1 or (allowzero and 0 in spec and -1 in spec):
        raise ValueError("bad shape")
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1], dtype=_I))
        if known == 0 or x.size % known:
            raise ValueError("the -1 cannot be inferred")
    elif int(np.prod(dims, dtype=_I)) != x.size:
        raise ValueError("element counts differ")
    return np.reshape(x, dims)


def expand_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes()))
    return (x, _ints(draw, -1, 4)), {}


@quiet
def expand(x, shape):
    if (shape < 0).any():
        raise ValueError("negative dim")
    return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(int(d) for d in shape))).copy()


def strided_slice_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes()))
    k = draw(st.integers(0, max(x.ndim, 1)))
    bound = st.one_of(st.integers(-6, 6), st.sampled_from([-(2**62), 2**62]))
    starts = np.array(draw(st.lists(bound, min_size=k, max_size=k)), _I)
    ends = np.array(draw(st.lists(bound, min_size=k, max_size=k)), _I)
    axes = _ints(draw, -x.ndim - 1, x.ndim, k, k)
    steps = _ints(draw, -3, 3, k, k + draw(st.sampled_from([0, 0, 0, 1])))
    return (x, starts, ends, axes, steps), {}


@quiet
def strided_slice(x, starts, ends, axes, steps):
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ValueError("one entry each per sliced axis")
    index = [slice(None)] * x.ndim
    seen = set()
    for s, e, a, st_ in zip(starts, ends, axes, steps):
        if not -x.ndim <= a < x.ndim or a % x.ndim in seen or st_ == 0:
            raise ValueError("bad axis or step")
        seen.add(a % x.ndim)
        index[a % x.ndim] = slice(int(s), int(e), int(st_))
    return x[tuple(index)].copy()


def tile_gen(draw, dtype):
    x = array(draw, dtype, draw(shapes()))
    n = max(x.ndim + draw(st.sampled_from([0, 0, 0, -1, 1])), 0)
    return (x, _ints(draw, -1, 3, n, n)), {}


@quiet
def tile(x, repeats):
    if len(repeats) != x.ndim or (repeats < 0).any():
        raise ValueError("one non-negative count per axis")
    return np.tile(x, tuple(int(r) for r in repeats)) if x.ndim else x.copy()


def constant_of_shape_gen(draw, dtype):
    value = array(draw, dtype, draw(st.sampled_from([(), (1,), (1, 1), (2,), (0,)])))
    return (_ints(draw, -1, 4), value), {}


@quiet
def constant_of_shape(shape, value):
    if value.size != 1 or (shape < 0).any():
        raise ValueError("one value, non-negative dims")
    return np.full(tuple(int(d) for d in shape), value.reshape(()), dtype=value.dtype)


def arange_of_gen(draw, dtype):
    dt = np.dtype(dtype)
    start = np.array(draw(st.integers(-5, 5)), dt)
    start = draw(st.sampled_from([start, start, start, start.reshape(1), np.array([1, 2], dt)]))
    limit = np.array(draw(st.integers(-5, 5)), dt)
    delta = np.array(draw(st.sampled_from([0, 1, 2, 3, -1, -2] + ([0.5, -0.75] if dt.kind == "f" else []))), dt)
    return (start, limit, delta), {}


@quiet
def arange_of(start, limit, delta):
    if start.size != 1 or limit.size != 1 or delta.size != 1 or delta.reshape(()) == 0:
        raise ValueError("scalars, delta not 0")
    s, lim, d = (v.reshape(()) for v in (start, limit, delta))
    n = max(int(np.ceil((float(lim) - float(s)) / float(d))), 0)
    return (np.arange(n).astype(start.dtype) * d + s).astype(start.dtype)


SHAPE_ORACLES = {
    "Shape": (shape_gen, quiet(lambda x: np.array(x.shape, _I))),
    "ReshapeTo": (reshape_to_gen, reshape_to),
    "Expand": (expand_gen, expand),
    "StridedSlice": (strided_slice_gen, strided_slice),
    "Tile": (tile_gen, tile),
    "ConstantOfShape": (constant_of_shape_gen, constant_of_shape),
    "ArangeOf": (arange_of_gen, arange_of),
}
