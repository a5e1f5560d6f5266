"""ONNX indexing and layout operators composed of opforge ops: Expand, Tile,
Range, Split, Trilu, OneHot, CumSum; GatherElements and GatherND on their
native ops (cpp/ops/index_ops.cc).

Shape-like inputs (Expand's shape, Tile's repeats, Range's bounds, Split's
sizes, OneHot's depth) must be known when the node is converted. The gathers
become one Gather on the flattened data at computed flat indices, so they
differentiate through Gather's gradient; CumSum is a MatMul with a
triangular mask (exact for ints too) (O(n^2) along the axis; a native kernel is left for later).
"""

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx._node import INT, INTS, converter, dtype_of, shape_of


def _static_shape(n, x):
    shape = shape_of(x)
    if any(d is None for d in shape):
        raise n.fail(f"needs the static shape of its input, got {list(shape)}", UnimplementedError)
    return shape


def _broadcast_to(x, target):
    dt = dtype_of(x)
    if tuple(shape_of(x)) == tuple(target):
        return P.identity(x)
    if dt == np.bool_:
        return P.logical_or(x, np.zeros(target, dtype=np.bool_))
    return P.add(x, np.zeros(target, dtype=dt))


@converter("Expand", (8, 13))
def _expand(n):
    x = n.input(0)
    shape = n.static_ints(1, "shape")
    try:
        target = np.broadcast_shapes(_static_shape(n, x), tuple(shape))
    except ValueError:
        raise n.fail(f"shape {shape} does not broadcast with the input's {list(shape_of(x))}") from None
    return _broadcast_to(x, target)


@converter("Tile", (6, 13))
def _tile(n):
    x = n.input(0)
    shape = _static_shape(n, x)
    reps = n.static_ints(1, "repeats")
    if len(reps) != len(shape) or any(r < 0 for r in reps):
        raise n.fail(f"repeats {reps} must be {len(shape)} non-negative ints")
    # [d0, d1] -> [1, d0, 1, d1] -> broadcast to [r0, d0, r1, d1] -> [r0*d0, r1*d1].
    inter = [v for d in shape for v in (1, d)]
    big = [v for r, d in zip(reps, shape) for v in (r, d)]
    y = _broadcast_to(P.reshape(x, shape=inter), big)
    return P.reshape(y, shape=[r * d for r, d in zip(reps, shape)])


# stash_type (27) only changes float16/bfloat16 accumulation, which opforge lacks.
@converter("Range", (11, 27), {"stash_type": INT})
def _range(n):
    start, limit, delta = (n.static(i, w) for i, w in enumerate(("start", "limit", "delta")))
    for v, w in ((start, "start"), (limit, "limit"), (delta, "delta")):
        if v.size != 1:
            raise n.fail(f"{w} must be a scalar, got shape {list(v.shape)}")
    # One-element tensors (as shape arithmetic in function bodies makes them) read as scalars.
    start, limit, delta = (v.reshape(()) for v in (start, limit, delta))
    dt = start.dtype
    if delta == 0:
        raise n.fail("delta must not be 0")
    count = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    return (start + np.arange(count, dtype=dt) * delta).astype(dt)


@converter("Split", (2, 11, 13, 18), {"axis": INT, "split": INTS, "num_outputs": INT})
def _split(n):
    x = n.input(0)
    shape = _static_shape(n, x)
    axis = n.axis(n.attr("axis", 0), len(shape))
    outs = len(n.node.output)
    if n.version >= 13:
        sizes = n.static_ints(1, "split") if n.has(1) else None
    else:
        sizes = n.attr("split")
    if sizes is None:
        parts = n.attr("num_outputs", outs)
        if n.version >= 18 and not n.has_attr("num_outputs"):
            raise n.fail("either input 'split' or attribute 'num_outputs' is required")
        each = -(-shape[axis] // parts)  # the last part may be smaller
        sizes = [min(each, shape[axis] - k * each) for k in range(parts)]
    if sum(sizes) != shape[axis] or len(sizes) != outs or any(s < 0 for s in sizes):
        raise n.fail(f"split {sizes} does not cut dim {shape[axis]} into {outs} outputs")
    results, begin = [], 0
    for s in sizes:
        b = [0] * len(shape)
        b[axis] = begin
        size = list(shape)
        size[axis] = s
        results.append(P.slice(x, begin=b, size=size))
        begin += s
    return tuple(results)


@converter("Trilu", (14,), {"upper": INT})
def _trilu(n):
    x = n.input(0)
    shape = _static_shape(n, x)
    if len(shape) < 2:
        raise n.fail(f"input must have rank >= 2, got {len(shape)}")
    k = int(n.static(1, "k").reshape(-1)[0]) if n.has(1) else 0
    ones = np.ones(shape[-2:], dtype=np.bool_)
    mask = np.triu(ones, k) if n.attr("upper", 1) else np.tril(ones, k)
    return P.select(mask, x, np.zeros((), dtype=dtype_of(x)))


@converter("OneHot", (9, 11, 28), {"axis": INT})
def _one_hot(n):
    idx, values = n.input(0), n.input(2)
    depth = int(n.static(1, "depth").reshape(-1)[0])
    rank = len(shape_of(idx))
    axis = n.axis(n.attr("axis", -1), rank + 1)
    it = dtype_of(idx)
    if it.kind == "f":  # ONNX allows float indices; they are cast
        idx = P.cast(idx, dtype=np.dtype(np.int64))
        it = np.dtype(np.int64)
    # Negative indices count from the end (since opset 11).
    idx = P.select(P.less(idx, np.array(0, it)), P.add(idx, np.array(depth, it)), idx)
    shape = [d for d in shape_of(idx)]
    shape.insert(axis, 1)
    lanes = [1] * (rank + 1)
    lanes[axis] = depth
    hit = P.equal(P.reshape(idx, shape=shape), np.arange(depth, dtype=it).reshape(lanes))
    off = P.slice(values, begin=[0], size=[1])
    on = P.slice(values, begin=[1], size=[1])
    return P.select(hit, P.reshape(on, shape=[]), P.reshape(off, shape=[]))


@converter("CumSum", (11, 14), {"exclusive": INT, "reverse": INT})
def _cumsum(n):
    x = n.input(0)
    shape = _static_shape(n, x)
    axis = n.axis(int(n.static(1, "axis").reshape(-1)[0]), len(shape))
    # Integer sums go through MatMul's exact integer kernels (wrapping as numpy does).
    return _cumsum_float(n, x, shape, axis, dtype_of(x))


def _cumsum_float(n, x, shape, axis, dt):
    size = shape[axis]
    # out[..., j] = sum_i x[..., i] * M[i, j]; M picks which i count for j.
    i, j = np.indices((size, size))
    keep = (i >= j) if n.attr("reverse", 0) else (i <= j)
    if n.attr("exclusive", 0):
        keep &= i != j
    perm = [d for d in range(len(shape)) if d != axis] + [axis]
    inv = list(np.argsort(perm))
    moved = P.transpose(x, perm=perm) if axis != len(shape) - 1 else x
    y = P.mat_mul(P.reshape(moved, shape=[-1, size]), keep.astype(dt))
    y = P.reshape(y, shape=[shape[d] for d in perm])
    return P.transpose(y, perm=[int(p) for p in inv]) if axis != len(shape) - 1 else y


@converter("GatherElements", (11, 13), {"axis": INT})
def _gather_elements(n):
    x, idx = n.input(0), n.input(1)
    return P.gather_elements(x, idx, axis=n.axis(n.attr("axis", 0), len(shape_of(x))))


@converter("GatherND", (11, 12, 13), {"batch_dims": INT})
def _gather_nd(n):
    x, idx = n.input(0), n.input(1)
    b = n.attr("batch_dims", 0)
    if b == 0:
        return P.gather_nd(x, idx)
    xs, ishape = _static_shape(n, x), _static_shape(n, idx)
    k = ishape[-1]
    if b + k > len(xs) or b >= len(ishape):
        raise n.fail(f"indices' last dim {k} plus batch_dims {b} exceeds data rank {len(xs)}")
    # batch_dims b: prepend each tuple's batch position, then one GatherND on the batch-flattened data.
    it = dtype_of(idx)
    nb = int(np.prod(xs[:b], dtype=np.int64))
    mid = list(ishape[b:-1])
    pos = np.broadcast_to(np.arange(nb, dtype=it).reshape([nb] + [1] * (len(mid) + 1)), [nb] + mid + [1])
    idx = P.concat([pos, P.reshape(idx, shape=[nb] + mid + [k])], axis=-1)
    out = P.gather_nd(P.reshape(x, shape=[nb] + list(xs[b:])), idx)
    return P.reshape(out, shape=list(ishape[:-1]) + list(xs[b + k:]))
